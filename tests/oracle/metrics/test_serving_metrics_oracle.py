"""ServingMetrics against a reconstruction of SGLang's collectors built with the official Python
client from the facts in reference/sglang-runtime.md section 6 and the server-argument docs:
metric names, types, label names, default buckets, the bucket rules and SGLang's accounting
(inter-token latency counted once per new token; cached tokens only when > 0). The same random
event stream goes to both; every sample (name, labels, value) and every family type must agree."""

import math
import random

import pytest

prometheus_client = pytest.importorskip("prometheus_client")
from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram  # noqa: E402
from prometheus_client.exposition import generate_latest  # noqa: E402
from prometheus_client.parser import text_string_to_metric_families  # noqa: E402
from multiprocess_view import without_empty_families  # noqa: E402

prometheus_client.disable_created_metrics()

TTFT = [0.1, 0.2, 0.4, 0.6, 0.8, 1, 2, 4, 6, 8, 10, 20, 40, 60, 80, 100, 200, 400]
E2E = TTFT + [600, 1200, 1800, 2400]
ITL = [0.002, 0.004, 0.006, 0.008, 0.010, 0.015, 0.020, 0.025, 0.030, 0.035, 0.040, 0.060,
       0.080, 0.100, 0.200, 0.400, 0.600, 0.800, 1, 2, 4, 6, 8]
RETRACTIONS = list(range(11)) + [15, 20, 25, 30, 40, 50, 75, 100]
TOKENS = [100, 300, 500, 700, 1000, 1500, 2000, 3000, 4000, 5000, 6000, 7000, 8000, 9000, 10000,
          12000, 15000, 20000, 22000, 25000, 30000, 35000, 40000, 66000, 99000, 132000, 300000,
          600000, 900000, 1100000]
QUEUE = [0, 0.1, 0.2, 0.5, 1, 2, 3, 4, 5, 10, 15, 20, 30, 40, 50, 60, 70, 80, 90, 100, 200, 300,
         400, 500, 600, 700, 800, 900, 1000, 1200, 1400, 1600, 1800, 2000, 2500, 3000]
STAGE = [0.001 * 1.62**i for i in range(30)]
GAUGES = ["num_running_reqs", "num_used_tokens", "token_usage", "pending_prealloc_token_usage",
          "swa_token_usage", "mamba_usage", "decode_sum_seq_lens", "gen_throughput",
          "num_queue_reqs", "num_grammar_queue_reqs", "num_running_reqs_offline_batch",
          "cache_hit_rate", "max_total_num_tokens", "spec_accept_length", "spec_accept_rate",
          "num_retracted_reqs", "num_paused_reqs", "utilization", "engine_startup_time",
          "engine_load_weights_time", "new_token_ratio", "is_cuda_graph"]
STATS_FIELDS = ["num_running_reqs", "num_used_tokens", "token_usage", "gen_throughput",
                "num_queue_reqs", "cache_hit_rate", "max_total_num_tokens",
                "decode_sum_seq_lens", "new_token_ratio", "num_retracted_reqs",
                "engine_startup_time", "engine_load_weights_time"]


def tse(middle, base, count):
    """The two-sided exponential rule as documented for --prompt-tokens-buckets."""
    out = {middle}
    for k in range(1, math.ceil(count / 2) + 1):
        out.add(middle + base**k)
        out.add(max(0.0, middle - base**k))
    return sorted(out)


def rule_bounds(words):
    if not words or words[0] == "default":
        return TOKENS
    if words[0] == "tse":
        return tse(float(words[1]), float(words[2]), int(words[3]))
    return sorted(float(w) for w in words[1:])


class Reference:
    def __init__(self, options):
        r = self.registry = CollectorRegistry()
        self.model = options["model_name"]
        self.allowed = options.get("allowed_customer_labels", [])
        req = ["model_name"] + self.allowed
        self.collect = options.get("collect_tokens_histogram", False)
        self.c = {n: Counter(f"sglang:{n}", n, req, registry=r) for n in
                  ["prompt_tokens_total", "generation_tokens_total", "cached_tokens_total",
                   "num_requests_total", "num_so_requests_total", "num_aborted_requests_total"]}
        self.ttft = Histogram("sglang:time_to_first_token_seconds", "h", req, registry=r,
                              buckets=options.get("bucket_time_to_first_token", TTFT))
        self.itl = Histogram("sglang:inter_token_latency_seconds", "h", req, registry=r,
                             buckets=options.get("bucket_inter_token_latency", ITL))
        self.e2e = Histogram("sglang:e2e_request_latency_seconds", "h", req, registry=r,
                             buckets=options.get("bucket_e2e_request_latency", E2E))
        self.retr = Histogram("sglang:num_retractions", "h", req, registry=r, buckets=RETRACTIONS)
        if self.collect:
            self.ptok = Histogram("sglang:prompt_tokens_histogram", "h", req, registry=r,
                                  buckets=rule_bounds(options.get("prompt_tokens_buckets")))
            self.gtok = Histogram("sglang:generation_tokens_histogram", "h", req, registry=r,
                                  buckets=rule_bounds(options.get("generation_tokens_buckets")))
        sched = ["model_name", "engine_type", "tp_rank", "pp_rank"]
        if options.get("label_dp_rank"):
            sched.append("dp_rank")
        self.options = options
        self.g = {n: Gauge(f"sglang:{n}", n, sched, registry=r) for n in GAUGES}
        self.g["max_running_requests_under_SLO"] = Gauge(
            "sglang:max_running_requests_under_SLO", "g", sched, registry=r)
        self.queue = Histogram("sglang:queue_time_seconds", "h", sched, registry=r, buckets=QUEUE)
        self.stage = Histogram("sglang:per_stage_req_latency_seconds", "h", sched + ["stage"],
                               registry=r, buckets=STAGE)
        self.http = Counter("sglang:http_responses_total", "c",
                            ["endpoint", "status_code", "method"], registry=r)

    def req_labels(self, custom):
        return [self.model] + [custom.get(k, "") for k in self.allowed]

    def sched_labels(self, dp_rank):
        o = self.options
        labels = [self.model, "unified", str(o.get("tp_rank", 0)), str(o.get("pp_rank", 0))]
        if o.get("label_dp_rank"):
            labels.append(str(dp_rank))
        return labels

    def apply(self, ev):
        op = ev["op"]
        lab = self.req_labels(ev.get("custom", {}))
        if op == "ttft":
            self.ttft.labels(*lab).observe(ev["value"])
        elif op == "itl":
            n = ev["n"]
            if n > 0:
                child = self.itl.labels(*lab)
                sum_before = child._sum.get()
                for _ in range(n):  # n observations of interval / n ...
                    child.observe(ev["interval"] / n)
                # ... while the sum grows by the whole interval (SGLang's accounting).
                child._sum.set(sum_before + ev["interval"])
        elif op == "finish":
            self.c["prompt_tokens_total"].labels(*lab).inc(ev["prompt_tokens"])
            self.c["generation_tokens_total"].labels(*lab).inc(ev["generation_tokens"])
            if ev["cached_tokens"] > 0:
                self.c["cached_tokens_total"].labels(*lab).inc(ev["cached_tokens"])
            self.c["num_requests_total"].labels(*lab).inc()
            if ev["has_grammar"]:
                self.c["num_so_requests_total"].labels(*lab).inc()
            self.e2e.labels(*lab).observe(ev["e2e_latency"])
            if self.collect:
                self.ptok.labels(*lab).observe(ev["prompt_tokens"])
                self.gtok.labels(*lab).observe(ev["generation_tokens"])
            self.retr.labels(*lab).observe(ev["retraction_count"])
        elif op == "abort":
            self.c["num_aborted_requests_total"].labels(*lab).inc()
        elif op == "stats":
            sl = self.sched_labels(ev.get("dp_rank", 0))
            for name in GAUGES:
                self.g[name].labels(*sl).set(ev.get(name, 0))
            if "max_running_requests_under_SLO" in ev:
                self.g["max_running_requests_under_SLO"].labels(*sl).set(
                    ev["max_running_requests_under_SLO"])
        elif op == "queue_time":
            self.queue.labels(*self.sched_labels(ev.get("dp_rank", 0))).observe(ev["value"])
        elif op == "http":
            self.http.labels(ev["endpoint"], str(ev["status_code"]), ev["method"]).inc()
        elif op == "stage":
            self.stage.labels(*self.sched_labels(ev.get("dp_rank", 0)), ev["stage"]).observe(
                ev["value"])


def random_events(rng, options):
    events = []
    customs = [{}, {"tenant": "acme"}, {"tenant": "b\"c", "tier": "gold"}, {"other": "x"}]
    for _ in range(rng.randint(1, 80)):
        op = rng.choice(["ttft", "itl", "itl", "finish", "abort", "stats", "queue_time", "stage",
                         "http"])
        ev = {"op": op}
        if options.get("allowed_customer_labels"):
            ev["custom"] = rng.choice(customs)
        if options.get("label_dp_rank"):
            ev["dp_rank"] = rng.randint(0, 1)
        if op in ("ttft", "queue_time", "stage"):
            ev["value"] = rng.choice([0, 0.05, 0.1, 0.15, 0.5, 3.0, 99.0, 5000.0])
        if op == "http":
            ev.update(endpoint=rng.choice(["/generate", "/v1/chat/completions"]),
                      status_code=rng.choice([200, 400, 503]), method=rng.choice(["GET", "POST"]))
        if op == "stage":
            ev["stage"] = rng.choice(["prefill_waiting", "prefill_forward", "decode_loop"])
        if op == "itl":
            ev["interval"] = rng.choice([0.001, 0.01, 0.03, 0.25, 2.0])
            ev["n"] = rng.choice([0, 1, 1, 2, 5])
        if op == "finish":
            ev.update(prompt_tokens=rng.choice([1, 7, 150, 999, 1000, 1017, 250000]),
                      generation_tokens=rng.choice([0, 1, 16, 985, 4000]),
                      cached_tokens=rng.choice([0, 0, 5, 128]),
                      e2e_latency=rng.choice([0.09, 0.4, 1.5, 30.0, 3000.0]),
                      has_grammar=rng.random() < 0.3,
                      retraction_count=rng.choice([0, 0, 1, 3, 12, 200]))
        if op == "stats":
            for name in STATS_FIELDS:
                ev[name] = rng.choice([0, 1, 3, 0.25, 0.5, 4096, 123.5])
            for name in ("num_running_reqs", "num_used_tokens", "num_queue_reqs",
                         "max_total_num_tokens", "decode_sum_seq_lens", "num_retracted_reqs"):
                ev[name] = int(ev[name])
            if rng.random() < 0.3:
                ev["max_running_requests_under_SLO"] = rng.randint(1, 64)
        events.append(ev)
    return events


def samples_of(text):
    types, samples = {}, {}
    for family in text_string_to_metric_families(text):
        types[family.name] = family.type
        for s in family.samples:
            samples[(s.name, tuple(sorted(s.labels.items())))] = s.value
    return types, samples


OPTION_SETS = [
    {"model_name": "smol"},
    {"model_name": "smol", "collect_tokens_histogram": True},
    {"model_name": "m", "collect_tokens_histogram": True,
     "prompt_tokens_buckets": ["tse", "1000", "2", "8"],
     "generation_tokens_buckets": ["customer", "4000", "10", "50", "100", "500"]},
    {"model_name": "m", "allowed_customer_labels": ["tenant", "tier"], "label_dp_rank": True,
     "tp_rank": 0, "pp_rank": 0},
    {"model_name": "m", "bucket_time_to_first_token": [0.05, 0.5, 5],
     "bucket_inter_token_latency": [0.001, 0.01, 0.1], "bucket_e2e_request_latency": [1, 10]},
]


@pytest.mark.parametrize("seed", range(30))
def test_serving_metrics_match_sglang_reconstruction(run_script, seed):
    rng = random.Random(seed)
    options = OPTION_SETS[seed % len(OPTION_SETS)]
    events = random_events(rng, options)
    ok, ours = run_script([{"op": "serving", "options": options}] + events)
    assert ok, ours
    reference = Reference(options)
    for ev in events:
        reference.apply(ev)
    want_types, want = samples_of(
        without_empty_families(generate_latest(reference.registry).decode()))
    got_types, got = samples_of(ours)
    assert got_types == want_types
    assert got.keys() == want.keys()
    for key, value in want.items():
        assert got[key] == pytest.approx(value, rel=1e-12, abs=1e-12), key


@pytest.mark.parametrize("rule", [
    ["tse", "1000", "2", "8"], ["tse", "512", "1.5", "9"], ["tse", "3", "4", "6"],
    ["tse", "100", "10", "1"], ["customer", "500", "10", "50"], ["default"], [],
])
def test_bucket_rules_follow_documented_formula(run_script, rule):
    ok, out = run_script([{"op": "buckets", "rule": rule}])
    assert ok, out
    got = [float(x) for x in out.strip().strip("[]").split(",")]
    assert got == pytest.approx(rule_bounds(rule), rel=1e-15)


def test_documented_tse_example(run_script):
    ok, out = run_script([{"op": "buckets", "rule": ["tse", "1000", "2", "8"]}])
    assert ok, out
    assert [float(x) for x in out.strip().strip("[]").split(",")] == [
        984.0, 992.0, 996.0, 998.0, 1000.0, 1002.0, 1004.0, 1008.0, 1016.0]


@pytest.mark.parametrize("rule", [["tse", "1000", "1", "8"], ["tse", "0", "2", "8"],
                                  ["customer", "1", "1"], ["customer", "-1"], ["linear", "1"],
                                  ["default", "x"], ["tse", "1", "2"]])
def test_invalid_rules_are_rejected(run_script, rule):
    ok, message = run_script([{"op": "buckets", "rule": rule}])
    assert not ok and message.strip()

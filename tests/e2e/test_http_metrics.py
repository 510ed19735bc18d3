"""sglang:http_responses_total{endpoint,status_code,method} counts every response as SGLang's
middleware does: the matched route's path ("Unknown" without one), the status, the method.
Parsed with prometheus_client's own exposition parser. Also SGLang's custom metric labels."""
import json
import subprocess

import requests
from prometheus_client.parser import text_string_to_metric_families

from server_util import BUILD, SMOLLM2, Server


def http_responses(url):
    text = requests.get(url + "/metrics", timeout=10).text
    counts = {}
    for family in text_string_to_metric_families(text):
        if family.name != "sglang:http_responses":
            continue
        for sample in family.samples:
            if sample.name.endswith("_total"):
                labels = sample.labels
                counts[(labels["endpoint"], labels["status_code"], labels["method"])] = sample.value
    return counts


def test_http_responses_total_counts_by_route_status_and_method():
    server = Server(SMOLLM2, "--skip-server-warmup", "--enable-metrics")
    try:
        before = http_responses(server.url)
        gen = {"text": "Hi", "sampling_params": {"max_new_tokens": 2}}
        assert requests.post(server.url + "/generate", json=gen, timeout=60).status_code == 200
        assert requests.post(server.url + "/generate", json={**gen, "stream": True},
                             timeout=60).status_code == 200
        assert requests.post(server.url + "/generate", data="{bad", timeout=60).status_code == 400
        assert requests.get(server.url + "/v1/models/nope", timeout=10).status_code == 404
        assert requests.get(server.url + "/no-such-route", timeout=10).status_code == 404
        after = http_responses(server.url)

        def delta(key):
            return after.get(key, 0) - before.get(key, 0)

        assert delta(("/generate", "200", "POST")) == 2
        assert delta(("/generate", "400", "POST")) == 1
        assert delta(("/v1/models/{model}", "404", "GET")) == 1
        assert delta(("Unknown", "404", "GET")) == 1
        assert delta(("/metrics", "200", "GET")) == 1  # the first scrape
    finally:
        server.stop()


def samples(url, name):
    text = requests.get(url + "/metrics", timeout=30).text
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            if sample.name == name:
                yield sample


def test_custom_labels_from_the_header_and_the_generate_field():
    """SGLang's custom metric labels: the header's JSON object (allowed names only) and /generate's
    custom_labels label the request's tokenizer-side series; prompt tokens add up per series, as
    each answer's usage reports them; a bad header is ignored, a bad field is a 400."""
    server = Server(SMOLLM2, "--skip-server-warmup", "--enable-metrics",
                    "--tokenizer-metrics-allowed-customer-labels", "team", "tier")
    try:
        header = {"x-customer-labels": json.dumps({"team": "search", "bogus": "dropped"})}
        r = requests.post(server.url + "/v1/completions", headers=header, timeout=120,
                          json={"prompt": "The capital of France is", "max_tokens": 3})
        assert r.status_code == 200, r.text
        search_prompt = r.json()["usage"]["prompt_tokens"]
        r = requests.post(server.url + "/generate", timeout=120, headers=header,
                          json={"text": "Hello there", "custom_labels": {"tier": "gold"},
                                "sampling_params": {"max_new_tokens": 2}})
        assert r.status_code == 200, r.text
        gold_prompt = r.json()["meta_info"]["prompt_tokens"]
        r = requests.post(server.url + "/generate", timeout=120,
                          headers={"x-customer-labels": "not json"},
                          json={"text": "Hi", "sampling_params": {"max_new_tokens": 1}})
        assert r.status_code == 200, r.text
        r = requests.post(server.url + "/generate", timeout=120,
                          json={"text": "Hi", "custom_labels": {"tier": 3}})
        assert r.status_code == 400 and "tier" in r.text, r.text
        got = {(s.labels.get("team"), s.labels.get("tier")): s.value
               for s in samples(server.url, "sglang:prompt_tokens_total")}
        assert got[("search", "")] == search_prompt
        # The field wins over the header, which still sets the team.
        assert got[("search", "gold")] == gold_prompt
        assert ("", "") in got  # the request whose header could not be read
        assert all("bogus" not in s.labels for s in samples(server.url, "sglang:prompt_tokens_total"))
        assert "Ignoring the x-customer-labels header" in server.logs()
    finally:
        assert server.stop() == 0, server.logs()


def test_log_metrics_false_keeps_a_request_out_of_the_metrics():
    """SGLang's log_metrics: false leaves the tokenizer-side series alone (as its health checks
    do); the same request without it counts."""
    server = Server(SMOLLM2, "--skip-server-warmup", "--enable-metrics")
    try:
        def total():
            return sum(s.value for s in samples(server.url, "sglang:prompt_tokens_total"))

        before = total()
        body = {"text": "The capital of France is", "sampling_params": {"max_new_tokens": 2}}
        r = requests.post(server.url + "/generate", json={**body, "log_metrics": False},
                          timeout=120)
        assert r.status_code == 200, r.text
        assert total() == before
        r = requests.post(server.url + "/generate", json=body, timeout=120)
        assert total() == before + r.json()["meta_info"]["prompt_tokens"]
        r = requests.post(server.url + "/generate", json={**body, "log_metrics": "no"},
                          timeout=120)
        assert r.status_code == 400 and "log_metrics" in r.text, r.text
    finally:
        assert server.stop() == 0, server.logs()


def test_allowed_labels_need_a_header_name():
    out = subprocess.run([str(BUILD / "radixserve"), "--model-path", str(SMOLLM2),
                          "--tokenizer-metrics-allowed-customer-labels", "team",
                          "--tokenizer-metrics-custom-labels-header", ""],
                         capture_output=True, text=True, timeout=120)
    assert out.returncode == 2
    assert "--tokenizer-metrics-allowed-customer-labels" in out.stderr

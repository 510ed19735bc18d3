"""Our Prometheus exposition against the official Python client (prometheus_client): the same
random sequence of registrations and updates is applied to both, and the texts must be identical
byte for byte (format 0.0.4, label order, number rendering, escaping), and parse back with the
client's own parser."""

import random

import pytest

prometheus_client = pytest.importorskip("prometheus_client")
from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram  # noqa: E402
from prometheus_client.exposition import generate_latest  # noqa: E402
from prometheus_client.parser import text_string_to_metric_families  # noqa: E402
from multiprocess_view import without_empty_families  # noqa: E402

prometheus_client.disable_created_metrics()  # SGLang serves a multiprocess registry: no _created

LABEL_VALUES = ["", "a", "model-7B", 'quo"te', "back\\slash", "new\nline", "ünï©ødé", "x y"]
HELPS = ["Plain help.", "Help with \\ backslash", "Two\nlines", 'Has "quotes"', "Ünïcode ✓"]
BUCKET_SETS = [
    [0.1, 0.2, 0.4, 0.6, 0.8, 1, 2, 4, 6, 8, 10],
    [0.002, 0.004, 0.0125, 1e-5, 1],
    [100, 1000, 1100000, 123456789],
    [0, 1, 2, 3],
    [-5, -1, 0, 2.5],
]
VALUES = [0, 1, 0.5, 0.1, 2.5, 1e-6, 3e-5, 123456, 1234567, 98765432.5, 1e17, 7, 0.3]


def random_script(rng):
    ops, families = [], []
    label_pool = ["model_name", "tp_rank", "zone", "a", "Z_up", "_x"]
    for index in range(rng.randint(1, 6)):
        kind = rng.choice(["counter", "gauge", "histogram"])
        name = f"ns:{kind}_{index}" + ("_total" if kind == "counter" else "")
        labels = rng.sample(label_pool, rng.randint(0, 3))
        op = {"op": kind, "name": name, "help": rng.choice(HELPS), "labels": labels}
        if kind == "histogram":
            buckets = sorted(rng.choice(BUCKET_SETS))
            op["buckets"] = buckets
        ops.append(op)
        families.append(op)
    for _ in range(rng.randint(0, 60)):
        fam = rng.choice(families)
        values = [rng.choice(LABEL_VALUES) for _ in fam["labels"]]
        value = rng.choice(VALUES)
        if fam["op"] == "counter":
            ops.append({"op": "inc", "name": fam["name"], "labels": values, "value": value})
        elif fam["op"] == "gauge":
            action = rng.choice(["inc", "dec", "set"])
            ops.append({"op": action, "name": fam["name"], "labels": values,
                        "value": value * rng.choice([1, -1])})
        else:
            ops.append({"op": "observe", "name": fam["name"], "labels": values,
                        "value": value * rng.choice([1, 1, -1])})
    return ops


def replay_in_client(ops):
    registry = CollectorRegistry()
    metrics = {}
    for op in ops:
        kind = op["op"]
        if kind == "counter":
            metrics[op["name"]] = Counter(op["name"], op["help"], op["labels"], registry=registry)
        elif kind == "gauge":
            metrics[op["name"]] = Gauge(op["name"], op["help"], op["labels"], registry=registry)
        elif kind == "histogram":
            metrics[op["name"]] = Histogram(op["name"], op["help"], op["labels"],
                                            buckets=op["buckets"], registry=registry)
        else:
            metric = metrics[op["name"]]
            child = metric.labels(*op["labels"]) if op["labels"] else metric
            getattr(child, op["op"])(op["value"])
    return without_empty_families(generate_latest(registry).decode())


@pytest.mark.parametrize("seed", range(40))
def test_random_scripts_match_client_bytes(run_script, seed):
    ops = random_script(random.Random(seed))
    ok, ours = run_script(ops)
    assert ok, ours
    assert ours == replay_in_client(ops)
    # And the client's parser reads it.
    list(text_string_to_metric_families(ours))


def test_parser_reads_histogram_structure(run_script):
    ops = [
        {"op": "histogram", "name": "lat_seconds", "help": "h", "labels": ["model_name"],
         "buckets": [0.1, 1, 10]},
        {"op": "observe", "name": "lat_seconds", "labels": ["m"], "value": 0.5},
        {"op": "observe", "name": "lat_seconds", "labels": ["m"], "value": 50},
    ]
    ok, text = run_script(ops)
    assert ok, text
    (family,) = list(text_string_to_metric_families(text))
    assert family.type == "histogram"
    samples = {(s.name, s.labels.get("le")): s.value for s in family.samples}
    assert samples[("lat_seconds_bucket", "0.1")] == 0
    assert samples[("lat_seconds_bucket", "1.0")] == 1
    assert samples[("lat_seconds_bucket", "+Inf")] == 2
    assert samples[("lat_seconds_count", None)] == 2
    assert samples[("lat_seconds_sum", None)] == 50.5

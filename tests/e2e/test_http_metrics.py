"""sglang:http_responses_total{endpoint,status_code,method} counts every response as SGLang's
middleware does: the matched route's path ("Unknown" without one), the status, the method.
Parsed with prometheus_client's own exposition parser."""
import requests
from prometheus_client.parser import text_string_to_metric_families

from server_util import SMOLLM2, Server


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

"""LightLLM's metrics push (--metric_gateway, --job_name, --grouping_key, --push_interval,
--enable_monitor_auth) against a fake Prometheus Pushgateway on loopback. The reference for the
request's method, path (grouping-key escaping), content type and auth header is
prometheus_client's own push_to_gateway, which LightLLM calls, sent to the same fake gateway; the
pushed body is parsed with prometheus_client's exposition parser."""
import http.server
import os
import subprocess
import threading
import time

import pytest
import requests
from prometheus_client import CollectorRegistry
from prometheus_client.exposition import basic_auth_handler, push_to_gateway
from prometheus_client.parser import text_string_to_metric_families

from server_util import BUILD, STORIES, Server, free_port

GROUPING = ["instance=node a", "zone=", "path=/x/y", "rank=0"]
GROUPING_DICT = dict(item.split("=", 1) for item in GROUPING)
JOB = "serve/1"


class FakeGateway:
    """Records every request (method, path, headers, body) and answers `status`."""

    def __init__(self, status=200):
        self.requests = []
        self.status = status
        self.cv = threading.Condition()
        gateway = self

        class Handler(http.server.BaseHTTPRequestHandler):
            def _record(self):
                length = int(self.headers.get("Content-Length", 0))
                body = self.rfile.read(length).decode() if length else ""
                with gateway.cv:
                    gateway.requests.append((self.command, self.path, dict(self.headers), body))
                    gateway.cv.notify_all()
                self.send_response(gateway.status)
                self.send_header("Content-Length", "0")
                self.end_headers()

            do_PUT = do_POST = do_DELETE = _record

            def log_message(self, *args):
                pass

        self.server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.address = f"127.0.0.1:{self.server.server_address[1]}"
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def wait_for(self, count, timeout=60):
        with self.cv:
            assert self.cv.wait_for(lambda: len(self.requests) >= count, timeout), self.requests
            return list(self.requests)

    def close(self):
        self.server.shutdown()
        self.server.server_close()


def reference_push(grouping, job, handler=None):
    """What prometheus_client's push_to_gateway sends for these arguments: (method, path, headers)."""
    gateway = FakeGateway()
    try:
        kwargs = {} if handler is None else {"handler": handler}
        push_to_gateway(gateway.address, job=job, grouping_key=grouping,
                        registry=CollectorRegistry(), **kwargs)
        method, path, headers, _ = gateway.wait_for(1)[0]
        return method, path, headers
    finally:
        gateway.close()


def families(text):
    return {f.name: f for f in text_string_to_metric_families(text)}


def counter_value(text, name):
    family = families(text).get(name)
    if family is None:
        return 0.0
    return sum(s.value for s in family.samples if s.name.endswith("_total"))


def test_pushes_the_metrics_where_push_to_gateway_would_and_keeps_pushing():
    gateway = FakeGateway()
    args = ["--skip-server-warmup", "--metric_gateway", gateway.address, "--job_name", JOB,
            "--push_interval", "1"]
    for item in GROUPING:
        args += ["--grouping_key", item]
    server = Server(STORIES, *args)
    try:
        first = gateway.wait_for(1)
        method, path, headers, body = first[0]
        ref_method, ref_path, ref_headers = reference_push(GROUPING_DICT, JOB)
        assert method == ref_method == "PUT"
        assert path == ref_path
        assert headers["Content-Type"] == ref_headers["Content-Type"]
        assert "Authorization" not in headers
        assert "sglang:num_running_reqs" in families(body)
        # Metrics are collected (and served) without --enable-metrics once a gateway is set; the
        # next push carries every family the scrape had.
        scraped = requests.get(server.url + "/metrics", timeout=10)
        assert scraped.status_code == 200
        next_push = gateway.wait_for(len(gateway.requests) + 1)[-1][3]
        assert set(families(scraped.text)) <= set(families(next_push))
        # A request's tokens reach a later push.
        before = len(gateway.requests)
        r = requests.post(server.url + "/generate",
                          json={"text": "Once upon a time", "sampling_params": {"max_new_tokens": 4}},
                          timeout=60)
        assert r.status_code == 200
        prompt_tokens = r.json()["meta_info"]["prompt_tokens"]
        deadline = time.time() + 30
        while time.time() < deadline:
            latest = gateway.wait_for(before + 1)[-1]
            if counter_value(latest[3], "sglang:prompt_tokens") >= prompt_tokens:
                break
            before = len(gateway.requests)
        else:
            raise AssertionError("no push carried the request's prompt tokens")
        assert all(req[0] == "PUT" and req[1] == ref_path for req in gateway.requests)
    finally:
        server.stop()
        gateway.close()


def test_monitor_auth_sends_basic_auth_from_username_and_password():
    gateway = FakeGateway()
    env = {"USERNAME": "alice", "PASSWORD": "s3cret:x"}
    server = Server(STORIES, "--skip-server-warmup", "--metric_gateway", "http://" + gateway.address,
                    "--enable_monitor_auth", "--push_interval", "1", env=env)
    try:
        method, path, headers, _ = gateway.wait_for(1)[0]

        def handler(url, method, timeout, headers, data):
            return basic_auth_handler(url, method, timeout, headers, data, "alice", "s3cret:x")

        _, ref_path, ref_headers = reference_push({}, "lightllm", handler)
        assert path == ref_path == "/metrics/job/lightllm"
        assert headers["Authorization"] == ref_headers["Authorization"]
    finally:
        server.stop()
        gateway.close()


def test_a_failing_gateway_is_logged_and_serving_goes_on():
    gateway = FakeGateway(status=500)
    dead = f"127.0.0.1:{free_port()}"  # nothing listens there
    for address, reason in ((gateway.address, "HTTP status 500"), (dead, "")):
        server = Server(STORIES, "--skip-server-warmup", "--metric_gateway", address,
                        "--push_interval", "1")
        try:
            r = requests.post(server.url + "/generate",
                              json={"text": "Hello", "sampling_params": {"max_new_tokens": 3}},
                              timeout=60)
            assert r.status_code == 200
            deadline = time.time() + 30
            while "Pushing metrics to" not in server.log_path.read_text() or \
                    "failed" not in server.log_path.read_text():
                assert time.time() < deadline, server.logs()
                time.sleep(0.2)
            log = server.log_path.read_text()
            assert reason in log
            # One warning while it keeps failing, not one per attempt.
            time.sleep(2.5)
            assert server.log_path.read_text().count("failed:") == 1
            assert requests.get(server.url + "/health", timeout=10).status_code == 200
        finally:
            server.stop()
    gateway.close()


@pytest.mark.parametrize("args,env,named", [
    (["--grouping_key", "novalue"], {}, "--grouping_key"),
    (["--grouping_key", "a=b=c"], {}, "--grouping_key"),
    (["--grouping_key", "bad-key=1"], {}, "--grouping_key"),
    (["--push_interval", "0"], {}, "--push_interval"),
    (["--enable_monitor_auth"], {"USERNAME": "alice"}, "--enable_monitor_auth"),
])
def test_bad_push_arguments_exit_2_naming_the_argument(args, env, named):
    run_env = {k: v for k, v in os.environ.items() if k not in ("USERNAME", "PASSWORD")}
    run_env.update(env)
    proc = subprocess.run(
        [str(BUILD / "radixserve"), "--model-path", str(STORIES), "--port", str(free_port()),
         "--metric_gateway", "127.0.0.1:9", *args],
        capture_output=True, text=True, timeout=60, env=run_env)
    assert proc.returncode == 2, proc.stderr
    errors = [line for line in proc.stderr.splitlines() if "error" in line]
    assert len(errors) == 1 and named in errors[0], proc.stderr

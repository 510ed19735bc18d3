"""--watchdog-timeout / --soft-watchdog-timeout against a real server whose model steps are slowed
down by the test hook RADIX_TEST_STEP_DELAY_MS (read once by the engine at startup).

Soft: a step that outlives the soft timeout logs one warning naming the stuck batch; the request
still completes and the server keeps serving. Hard: the server logs "Watchdog timeout", aborts
(SIGABRT, so a crash-dump handler can run) and exits non-zero, as SGLang's watchdog kills its
server.
"""
import signal

import pytest
import requests

from server_util import STORIES, Server


def start(monkeypatch, delay_ms, *args):
    monkeypatch.setenv("RADIX_TEST_STEP_DELAY_MS", str(delay_ms))
    return Server(STORIES, "--skip-server-warmup", *args)


def test_soft_watchdog_logs_the_stuck_batch_and_keeps_serving(monkeypatch):
    srv = start(monkeypatch, 1200, "--soft-watchdog-timeout", "0.3")
    try:
        r = requests.post(srv.url + "/generate", json={
            "rid": "slow-request", "input_ids": [1, 2, 3],
            "sampling_params": {"max_new_tokens": 2, "temperature": 0, "ignore_eos": True}},
            timeout=120)
        assert r.status_code == 200, r.text
        assert r.json()["meta_info"]["completion_tokens"] == 2
        logs = srv.logs()
        assert "Soft watchdog timeout" in logs, logs
        assert "rid=slow-request" in logs and "phase 'forward'" in logs, logs
        assert "Watchdog timeout (" not in logs
        assert requests.get(srv.url + "/health", timeout=10).status_code == 200
        srv.assert_no_leak()
    finally:
        assert srv.stop() == 0, srv.logs()


def test_hard_watchdog_aborts_the_server(monkeypatch):
    srv = start(monkeypatch, 5000, "--watchdog-timeout", "0.5")
    try:
        with pytest.raises(requests.RequestException):
            # The server dies while this request's first step is stuck.
            requests.post(srv.url + "/generate", json={
                "rid": "stuck-request", "input_ids": [1, 2, 3],
                "sampling_params": {"max_new_tokens": 4, "temperature": 0}}, timeout=120)
        returncode = srv.proc.wait(timeout=60)
        logs = srv.logs()
        assert returncode == -signal.SIGABRT, logs
        assert "Watchdog timeout (watchdog_timeout=0.5)" in logs, logs
        assert "rid=stuck-request" in logs, logs
    finally:
        srv.stop()


def test_no_watchdog_warning_when_steps_are_fast():
    srv = Server(STORIES, "--skip-server-warmup", "--soft-watchdog-timeout", "5")
    try:
        for _ in range(3):
            r = requests.post(srv.url + "/generate", json={
                "input_ids": [1, 2, 3], "sampling_params": {"max_new_tokens": 8}}, timeout=60)
            assert r.status_code == 200, r.text
        logs = srv.logs()
        assert "Soft watchdog timeout" not in logs and "Watchdog timeout (" not in logs, logs
    finally:
        assert srv.stop() == 0, srv.logs()

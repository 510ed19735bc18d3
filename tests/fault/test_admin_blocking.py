"""Admin calls never block HTTP I/O while the engine is inside a long step (contract 4).

stories260K with its context stretched to 32768 and --chunked-prefill-size -1 prefills a long
prompt in one step (attention is quadratic: 4000 tokens took ~6 s, 8000 ~17 s on two busy
cores). While it runs, /server_info and /flush_cache are fired concurrently; /health must still
answer at once, and /flush_cache must answer 400 (requests are pending) without waiting for the
step. The prompt length doubles until the step outlasts the probes by more than the bound, so the
test means something on a fast or an idle machine too.
"""
import threading
import time

import pytest
import requests

from fault_util import STORIES, finish_module, start_server

LENGTHS = [4000, 8000, 16000, 32000]  # prompt tokens, tried in turn (see the module docstring)
BOUND = 2.0  # seconds; generous (a blocked /health waited for the whole step, ~10+ s)


@pytest.fixture(scope="module")
def srv():
    srv = start_server(STORIES, "--context-length", "32768", "--chunked-prefill-size", "-1",
                       "--max-prefill-tokens", "32768", "--max-total-tokens", "80000")
    yield srv
    finish_module(srv)


class Background:
    def __init__(self, fn):
        self.result = None
        self.error = None
        self.done_at = None
        self._thread = threading.Thread(target=self._run, args=(fn,), daemon=True)
        self._thread.start()

    def _run(self, fn):
        try:
            self.result = fn()
        except Exception as e:  # noqa: BLE001 - reported by the test
            self.error = e
        finally:
            self.done_at = time.time()

    def join(self, timeout):
        self._thread.join(timeout)
        assert not self._thread.is_alive(), "background call did not finish"
        assert self.error is None, repr(self.error)
        return self.result


_salt = [0]


def during_long_step(server, probe):
    """Runs probe() while the engine is inside one long prefill step; returns (probe's result,
    when probe started). Lengthens the prompt until the step outlasts probe's start by more than
    BOUND + 1 s, so that a probe blocked behind the step would have taken longer than BOUND."""
    for length in LENGTHS:
        _salt[0] += 1
        # Distinct ids each time (3..502; 0-2 are <unk>, <s>, </s>): no radix-cache hit.
        ids = [3 + (i * 7919 + _salt[0] * 104729) % 500 for i in range(length)]
        ids[0] = 3 + _salt[0]
        body = {"input_ids": ids, "sampling_params": {"max_new_tokens": 1}}
        job = Background(lambda: requests.post(server.url + "/generate", json=body, timeout=600))
        # Parsing and submitting take milliseconds; then the step runs for seconds.
        time.sleep(1.0)
        started = time.time()
        result = probe()
        response = job.join(600)
        assert response.status_code == 200, response.text[:300]
        if job.done_at - started > BOUND + 1.0:
            return result, started
    pytest.fail(f"no prefill step of up to {LENGTHS[-1]} tokens lasted {BOUND + 1:.0f} s")


def test_health_answers_while_admin_calls_wait_on_a_long_step(srv):
    def probe():
        admin = [Background(lambda: requests.get(srv.url + "/server_info", timeout=600))
                 for _ in range(2)]
        admin += [Background(lambda: requests.post(srv.url + "/flush_cache", timeout=600))
                  for _ in range(2)]
        time.sleep(0.2)  # let the admin calls reach the server first
        t0 = time.time()
        health = requests.get(srv.url + "/health", timeout=600)
        return health, time.time() - t0, admin

    (health, elapsed, admin), _ = during_long_step(srv, probe)
    assert health.status_code == 200, health.text
    assert elapsed < BOUND, f"/health took {elapsed:.1f} s during a long step"
    for call in admin:
        r = call.join(600)
        assert r.status_code in (200, 400), r.text[:300]


def test_flush_cache_while_busy_answers_400_at_once(srv):
    def probe():
        t0 = time.time()
        flush = requests.post(srv.url + "/flush_cache", timeout=600)
        t1 = time.time()
        info = requests.get(srv.url + "/server_info", timeout=600)
        t2 = time.time()
        return flush, t1 - t0, info, t2 - t1

    (flush, flush_s, info, info_s), _ = during_long_step(srv, probe)
    assert flush.status_code == 400, flush.text
    assert flush_s < BOUND, f"/flush_cache took {flush_s:.1f} s during a long step"
    assert info.status_code == 200
    assert info_s < BOUND, f"/server_info took {info_s:.1f} s during a long step"


def test_flush_cache_when_idle(srv):
    # The earlier tests' requests have answered, but the engine may release the last one a moment
    # after its response went out: wait until it reports nothing running or waiting.
    deadline = time.time() + 30
    while time.time() < deadline:
        state = requests.get(srv.url + "/server_info", timeout=60).json()["internal_states"][0]
        if state["num_running_reqs"] == 0 and state["num_queued_reqs"] == 0:
            break
        time.sleep(0.1)
    r = requests.post(srv.url + "/flush_cache", timeout=60)
    assert r.status_code == 200, r.text

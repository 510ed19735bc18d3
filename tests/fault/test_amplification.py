"""Amplification limits: n, best_of, batch size x n, top logprobs (contract 2)."""
import re
import threading
import time

import pytest

from fault_util import (CHAT, COMPLETIONS, STORIES, assert_error, finish_module, post,
                        start_server)

MSG = [{"role": "user", "content": "hi"}]
N_WORD = re.compile(r"(?<![A-Za-z0-9_])n(?![A-Za-z0-9_])")
HUGE = 1_000_000_000


class PeakRss:
    """Samples the server's VmRSS every 20 ms while the block runs."""

    def __init__(self, server):
        self.server = server
        self.start = server.rss()
        self.peak = self.start
        self._stop = threading.Event()

    def __enter__(self):
        def sample():
            while not self._stop.is_set():
                try:
                    self.peak = max(self.peak, self.server.rss())
                except (OSError, KeyError):
                    return
                self._stop.wait(0.02)
        self._thread = threading.Thread(target=sample, daemon=True)
        self._thread.start()
        return self

    def __exit__(self, *exc):
        self._stop.set()
        self._thread.join(timeout=5)

    @property
    def growth_mb(self):
        return (self.peak - self.start) / 2**20


def assert_names_n(response):
    message = assert_error(response, 400)
    assert N_WORD.search(message), message


@pytest.fixture(scope="module")
def limited():
    srv = start_server(STORIES, "--chat-template", "chatml", "--max-n", "4",
                       "--max-requests-per-call", "8", "--max-top-logprobs", "5")
    yield srv
    finish_module(srv)


# ------------------------------------------------------------------------------------------------
# Defaults: --max-n 128, --max-requests-per-call 4096, --max-top-logprobs 100


@pytest.mark.parametrize("route, body", [
    ("/generate", {"text": "hi", "sampling_params": {"max_new_tokens": 1, "n": 129}}),
    (COMPLETIONS, {"prompt": "hi", "max_tokens": 1, "n": 129}),
    (CHAT, {"messages": MSG, "max_tokens": 1, "n": 129}),
])
def test_default_max_n(stories, route, body):
    assert_names_n(post(stories, route, body))


def test_n_128_is_allowed(stories):
    r = post(stories, "/generate", {"text": "hi", "sampling_params": {
        "max_new_tokens": 1, "n": 128}}, timeout=60)
    assert r.status_code == 200, r.text[:300]
    assert len(r.json()) == 128


@pytest.mark.parametrize("route, body", [
    ("/generate", {"text": "hi", "sampling_params": {"max_new_tokens": 1, "n": HUGE}}),
    ("/generate", {"text": ["a", "b"], "sampling_params": {"max_new_tokens": 1, "n": HUGE}}),
    ("/generate", {"text": "hi", "stream": True,
                   "sampling_params": {"max_new_tokens": 1, "n": HUGE}}),
    (COMPLETIONS, {"prompt": "hi", "max_tokens": 1, "n": HUGE}),
    (COMPLETIONS, {"prompt": "hi", "max_tokens": 1, "best_of": HUGE}),
    (CHAT, {"messages": MSG, "max_tokens": 1, "n": HUGE}),
    (CHAT, {"messages": MSG, "max_tokens": 1, "n": HUGE, "stream": True}),
])
def test_huge_n_is_cheap(stories, route, body):
    with PeakRss(stories) as rss:
        t0 = time.time()
        r = post(stories, route, body, timeout=15)
        elapsed = time.time() - t0
    assert r.status_code == 400, r.text[:300]
    assert elapsed < 5, f"the 400 took {elapsed:.1f} s"
    assert rss.growth_mb < 200, f"RSS grew by {rss.growth_mb:.0f} MB"
    assert stories.alive()


def test_default_best_of(stories):
    r = post(stories, COMPLETIONS, {"prompt": "hi", "max_tokens": 1, "best_of": 129})
    assert_error(r, 400, "best_of")


@pytest.mark.parametrize("route, body", [
    ("/generate", {"text": "hi", "return_logprob": True, "top_logprobs_num": 101,
                   "sampling_params": {"max_new_tokens": 1}}),
    (COMPLETIONS, {"prompt": "hi", "max_tokens": 1, "logprobs": 101}),
    (CHAT, {"messages": MSG, "max_tokens": 1, "logprobs": True, "top_logprobs": 101}),
])
def test_default_max_top_logprobs(stories, route, body):
    assert_error(post(stories, route, body), 400, "logprobs")


def test_default_top_logprobs_100_is_allowed(stories):
    r = post(stories, "/generate", {"text": "hi", "return_logprob": True,
                                    "top_logprobs_num": 100,
                                    "sampling_params": {"max_new_tokens": 1}})
    assert r.status_code == 200, r.text[:300]


def test_default_requests_per_call(stories):
    """4097 prompts in one /generate call exceed the default --max-requests-per-call 4096."""
    r = post(stories, "/generate", {"input_ids": [[5]] * 4097,
                                    "sampling_params": {"max_new_tokens": 1}}, timeout=60)
    assert_error(r, 400)
    r = post(stories, "/generate", {"input_ids": [[5]] * 2049,
                                    "sampling_params": {"max_new_tokens": 1, "n": 2}}, timeout=60)
    assert_error(r, 400)


# ------------------------------------------------------------------------------------------------
# A server started with --max-n 4 --max-requests-per-call 8 --max-top-logprobs 5


def test_limited_n(limited):
    r = post(limited, "/generate", {"text": "hi", "sampling_params": {"max_new_tokens": 1, "n": 4}})
    assert r.status_code == 200, r.text[:300]
    assert len(r.json()) == 4
    assert_names_n(post(limited, "/generate",
                        {"text": "hi", "sampling_params": {"max_new_tokens": 1, "n": 5}}))


@pytest.mark.parametrize("route, base", [
    (COMPLETIONS, {"prompt": "hi", "max_tokens": 1}),
    (CHAT, {"messages": MSG, "max_tokens": 1}),
])
def test_limited_openai_n(limited, route, base):
    r = post(limited, route, {**base, "n": 4})
    assert r.status_code == 200, r.text[:300]
    assert len(r.json()["choices"]) == 4
    assert_names_n(post(limited, route, {**base, "n": 5}))
    assert_names_n(post(limited, route, {**base, "n": 5, "stream": True}))


def test_limited_best_of(limited):
    r = post(limited, COMPLETIONS, {"prompt": "hi", "max_tokens": 1, "best_of": 5})
    assert_error(r, 400, "best_of")


@pytest.mark.parametrize("prompts, n, ok", [
    (8, 1, True),
    (2, 4, True),
    (9, 1, False),
    (3, 3, False),
    (5, 2, False),
])
def test_limited_requests_per_call(limited, prompts, n, ok):
    r = post(limited, "/generate", {"text": ["hi"] * prompts,
                                    "sampling_params": {"max_new_tokens": 1, "n": n}})
    if ok:
        assert r.status_code == 200, r.text[:300]
        assert len(r.json()) == prompts * n
    else:
        assert_error(r, 400)


def test_limited_requests_per_call_input_ids(limited):
    r = post(limited, "/generate", {"input_ids": [[5, 6]] * 9,
                                    "sampling_params": {"max_new_tokens": 1}})
    assert_error(r, 400)


def test_limited_requests_per_call_completions(limited):
    r = post(limited, COMPLETIONS, {"prompt": ["hi"] * 3, "max_tokens": 1, "n": 3})
    assert_error(r, 400)


@pytest.mark.parametrize("route, body, ok", [
    ("/generate", {"text": "hi", "return_logprob": True, "top_logprobs_num": 5,
                   "sampling_params": {"max_new_tokens": 1}}, True),
    ("/generate", {"text": "hi", "return_logprob": True, "top_logprobs_num": 6,
                   "sampling_params": {"max_new_tokens": 1}}, False),
    ("/generate", {"text": ["a", "b"], "return_logprob": True, "top_logprobs_num": [1, 6],
                   "sampling_params": {"max_new_tokens": 1}}, False),
    (COMPLETIONS, {"prompt": "hi", "max_tokens": 1, "logprobs": 5}, True),
    (COMPLETIONS, {"prompt": "hi", "max_tokens": 1, "logprobs": 6}, False),
    (CHAT, {"messages": MSG, "max_tokens": 1, "logprobs": True, "top_logprobs": 5}, True),
    (CHAT, {"messages": MSG, "max_tokens": 1, "logprobs": True, "top_logprobs": 6}, False),
])
def test_limited_top_logprobs(limited, route, body, ok):
    r = post(limited, route, body)
    if ok:
        assert r.status_code == 200, r.text[:300]
    else:
        assert_error(r, 400, "logprobs")

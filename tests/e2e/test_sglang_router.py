"""radixserve as a worker of SGLang's own router (PyPI sglang-router, its Rust gateway started with
`python -m sglang_router.launch_router`), on loopback: three stories260K workers behind it.
Requests through the router (native and OpenAI, streamed and not) give what a worker gives
directly; the cache-aware policy keeps prompts that share a long prefix on one worker (their
cached_tokens show it); killing a worker in the middle of a run loses no request (the router
retries); a worker added through the router's API gets traffic, and none once removed; a
--dp-size 2 worker composes with the router's --dp-aware mode. The router's own fan-out routes
(/get_loads, /flush_cache, /get_model_info, ...) read the workers' SGLang routes."""
import concurrent.futures
import contextlib
import json
import os
import signal
import subprocess
import sys
import time

import openai
import pytest
import requests

from server_util import STORIES, Router, Server, free_port

GREEDY = {"max_new_tokens": 8, "temperature": 0}


def stopped_after(stack, process):
    """Registers process.stop() on the exit stack (a failed start later still stops it)."""
    stack.callback(process.stop)
    return process


def test_the_router_is_installed():
    """The router is a test dependency (scripts/requirements-test.txt): missing it fails."""
    import sglang_router  # noqa: F401


@pytest.fixture(scope="module")
def cluster():
    with contextlib.ExitStack() as stack:
        workers = [stopped_after(stack, Server(
            STORIES, "--skip-server-warmup", "--enable-metrics", "--enable-cache-report",
            "--chat-template", "chatml", "--context-length", "2048")) for _ in range(3)]
        router = stopped_after(stack, Router(workers, "--policy", "cache_aware"))
        yield router, workers
    for w in workers:
        assert w.proc.returncode == 0, w.logs()


def generate(url, text, **extra):
    r = requests.post(url + "/generate", json={"text": text, "sampling_params": GREEDY, **extra},
                      timeout=60)
    assert r.status_code == 200, r.text
    return r


def test_native_and_openai_routes_through_the_router(cluster):
    router, workers = cluster
    direct = generate(workers[0].url, "Once upon a time").json()
    routed = generate(router.url, "Once upon a time").json()
    assert routed["text"] == direct["text"] and routed["output_ids"] == direct["output_ids"]

    stream = requests.post(router.url + "/generate", json={
        "text": "Once upon a time", "sampling_params": GREEDY, "stream": True}, timeout=60)
    events = [json.loads(line[6:]) for line in stream.iter_lines()
              if line.startswith(b"data: ") and line != b"data: [DONE]"]
    assert events[-1]["text"] == direct["text"]

    client = openai.OpenAI(base_url=router.url + "/v1", api_key="none")
    out = client.completions.create(model="stories", prompt="Once upon a time", max_tokens=8,
                                    temperature=0)
    assert out.choices[0].text == direct["text"]
    chunks = client.completions.create(model="stories", prompt="Once upon a time", max_tokens=8,
                                       temperature=0, stream=True)
    assert "".join(c.choices[0].text for c in chunks if c.choices) == direct["text"]
    models = requests.get(router.url + "/v1/models", timeout=10)
    assert models.status_code == 200 and models.json()["data"]


def test_openai_chat_through_the_router(cluster):
    router, workers = cluster
    messages = [{"role": "user", "content": "Tell me about the little dog"}]
    direct = openai.OpenAI(base_url=workers[1].url + "/v1", api_key="none")
    want = direct.chat.completions.create(model="stories", messages=messages, max_tokens=8,
                                          temperature=0)
    client = openai.OpenAI(base_url=router.url + "/v1", api_key="none")
    out = client.chat.completions.create(model="stories", messages=messages, max_tokens=8,
                                         temperature=0)
    assert out.choices[0].message.content == want.choices[0].message.content
    assert out.usage.prompt_tokens == want.usage.prompt_tokens
    assert out.usage.completion_tokens == 8
    chunks = list(client.chat.completions.create(
        model="stories", messages=messages, max_tokens=8, temperature=0, stream=True,
        stream_options={"include_usage": True}))
    text = "".join(c.choices[0].delta.content or "" for c in chunks if c.choices)
    assert text == want.choices[0].message.content
    assert chunks[-1].usage.completion_tokens == 8


def test_router_fan_out_routes_reach_every_worker(cluster):
    """The router's own /get_loads, /flush_cache, /get_model_info, /get_server_info and
    /health_generate call the workers' SGLang routes and read their fields."""
    router, workers = cluster
    info = requests.get(router.url + "/get_model_info", timeout=10).json()
    assert info["model_path"] == workers[0].server_info()["model_path"]
    assert info["is_generation"] is True
    assert requests.get(router.url + "/get_server_info", timeout=10).status_code == 200
    assert requests.get(router.url + "/health_generate", timeout=30).status_code == 200

    # /get_loads: the router reads each worker's /get_load (its num_tokens) while a long
    # request runs on one of them.
    body = {"text": "Once upon a time", "sampling_params": {
        "max_new_tokens": 1200, "temperature": 0, "ignore_eos": True}}
    with concurrent.futures.ThreadPoolExecutor(1) as pool:
        long = pool.submit(requests.post, router.url + "/generate", json=body, timeout=120)
        busy = []
        deadline = time.time() + 30
        while not busy and time.time() < deadline and not long.done():
            loads = requests.get(router.url + "/get_loads", timeout=10).json()["workers"]
            assert {w["worker"] for w in loads} == {w.url for w in workers}
            busy = [w for w in loads if w["load"] > 0]
            time.sleep(0.05)
        assert busy, "no worker ever showed load through the router's /get_loads"
        assert long.result().status_code == 200

    # /flush_cache on the router flushes every worker: a prompt cached on its worker is
    # computed again afterwards.
    prompt = "The big brown bear found a jar of honey in the old oak tree by the river. " * 3
    generate(router.url, prompt)
    assert generate(router.url, prompt).json()["meta_info"]["cached_tokens"] > 20
    # A worker refuses while it still holds a request that has already answered (it is released
    # a moment later), so the router may report a partial flush at first.
    deadline = time.time() + 30
    while True:
        flushed = requests.post(router.url + "/flush_cache", timeout=30)
        if flushed.status_code == 200 and flushed.json()["workers_flushed"] == 3:
            break
        assert time.time() < deadline, flushed.text
        time.sleep(0.2)
    assert generate(router.url, prompt).json()["meta_info"]["cached_tokens"] == 0


def test_router_engine_metrics_aggregates_the_workers(cluster):
    """The router's /engine_metrics scrapes every worker's /metrics. Its parser refuses the
    upper-case family sglang:max_running_requests_under_SLO, which SGLang declares and never sets;
    like SGLang's multiprocess registry, radixserve serves no HELP/TYPE for families without
    samples, so the scrape parses."""
    router, workers = cluster
    text = requests.get(router.url + "/engine_metrics", timeout=30).text
    for w in workers:
        assert f'worker_addr="{w.url}"' in text


def test_cache_aware_policy_keeps_a_shared_prefix_on_one_worker(cluster):
    router, _ = cluster
    prefix = ("The little red train climbed the hill every morning with a big box of apples for "
              "the town, and the children waved at it from the green fields. ") * 3
    cached = []
    for i in range(6):
        meta = generate(router.url, prefix + f"On day {i} she went to the park.").json()
        cached.append(meta["meta_info"]["cached_tokens"])
    # The first request computes the prefix; every later one finds it cached on its worker.
    assert cached[0] < 10  # at most the start of the text, shared with other tests' prompts
    assert all(c >= 60 for c in cached[1:]), cached
    # The OpenAI route reports the same through usage.prompt_tokens_details.cached_tokens.
    client = openai.OpenAI(base_url=router.url + "/v1", api_key="none")
    out = client.completions.create(model="stories", prompt=prefix + "At night she slept.",
                                    max_tokens=4, temperature=0)
    assert out.usage.prompt_tokens_details.cached_tokens >= 60, out.usage


def test_killed_worker_loses_no_request():
    with contextlib.ExitStack() as stack:
        workers = [stopped_after(stack, Server(STORIES, "--skip-server-warmup")) for _ in range(3)]
        router = stopped_after(stack, Router(workers, "--policy", "round_robin",
                                             "--retry-max-retries", "5",
                                             "--retry-initial-backoff-ms", "20"))

        def one(i):
            body = {"text": f"Story {i}: once upon a time", "sampling_params": {
                "max_new_tokens": 16, "temperature": 0, "ignore_eos": True}}
            r = requests.post(router.url + "/generate", json=body, timeout=120)
            return r.status_code, r.json() if r.status_code == 200 else r.text

        with concurrent.futures.ThreadPoolExecutor(8) as pool:
            futures = [pool.submit(one, i) for i in range(48)]
            time.sleep(0.3)
            workers[1].proc.send_signal(signal.SIGKILL)
            results = [f.result() for f in futures]
        failed = [r for r in results if r[0] != 200]
        assert not failed, failed[:3]
        assert all(r[1]["meta_info"]["completion_tokens"] == 16 for r in results)
        # Later requests still succeed on the two live workers.
        for i in range(6):
            generate(router.url, f"After the crash {i}")


def test_worker_added_at_run_time_gets_traffic():
    with contextlib.ExitStack() as stack:
        workers = [stopped_after(stack, Server(STORIES, "--skip-server-warmup"))]
        router = stopped_after(stack, Router(workers, "--policy", "round_robin"))
        extra = stopped_after(stack, Server(STORIES, "--skip-server-warmup", "--enable-metrics"))
        r = requests.post(router.url + "/workers", json={"url": extra.url}, timeout=30)
        assert r.status_code in (200, 202), r.text
        deadline = time.time() + 30
        while time.time() < deadline and len(router.workers()) < 2:
            time.sleep(0.2)
        assert {w["url"] for w in router.workers()} == {workers[0].url, extra.url}
        for i in range(8):
            generate(router.url, f"Request {i} once upon a time")
        metrics = requests.get(extra.url + "/metrics", timeout=10).text
        served = [line for line in metrics.splitlines()
                  if line.startswith("sglang:prompt_tokens_total")]
        assert served and float(served[0].split()[-1]) > 0, metrics[:2000]
        # Removed again (by the id the router gave it), it gets no more traffic.
        [added] = [w for w in router.workers() if w["url"] == extra.url]
        r = requests.delete(f"{router.url}/workers/{added['id']}", timeout=30)
        assert r.status_code in (200, 202), r.text
        deadline = time.time() + 30
        while time.time() < deadline and len(router.workers()) > 1:
            time.sleep(0.2)
        assert [w["url"] for w in router.workers()] == [workers[0].url]
        for i in range(4):
            generate(router.url, f"After removal {i}")
        after = requests.get(extra.url + "/metrics", timeout=10).text
        assert [line for line in after.splitlines()
                if line.startswith("sglang:prompt_tokens_total")] == served


def test_dp_size_worker_composes_with_a_dp_aware_router():
    with contextlib.ExitStack() as stack:
        worker = stopped_after(stack, Server(STORIES, "--skip-server-warmup", "--dp-size", "2"))
        # The router reads dp_size from /server_info and lists one worker per DP rank.
        router = stopped_after(stack, Router([worker], "--policy", "round_robin", "--dp-aware",
                                             expect=2))
        direct = generate(worker.url, "Once upon a time").json()
        for _ in range(4):
            assert generate(router.url, "Once upon a time").json()["text"] == direct["text"]
        loads = requests.get(worker.url + "/get_load", timeout=10).json()
        assert len(loads) == 2

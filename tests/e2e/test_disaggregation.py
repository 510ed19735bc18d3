"""Prefill/decode disaggregation (SGLang's --disaggregation-mode) on loopback: a prefill server and
a decode server of SmolLM2-135M behind SGLang's own router in its PD mode
(`--pd-disaggregation --prefill URL BOOTSTRAP_PORT --decode URL`). Greedy output through the pair,
on the native and OpenAI routes, streamed or not, equals one ordinary server's token for token,
and the decode server's cached_tokens show the prompt came from the prefill server. A decode
server killed while its transfer is pending leaves nothing held on the prefill side; rows nobody
fetches are dropped after the waiting timeout; bad bootstrap fields get a 400; both sides pass
the KV leak check after every test."""
import concurrent.futures
import contextlib
import json
import os
import signal
import subprocess
import threading
import time
import types

import openai
import pytest
import requests

from server_util import BUILD, SMOLLM2, STORIES, Namespace, Router, Server, free_port

GREEDY = {"max_new_tokens": 24, "temperature": 0}
PROMPTS = ["The capital of France is a city that",
           "Once upon a time, in a small village by the sea, there lived an old fisherman who",
           "def fibonacci(n):"]


def pd_router(prefill, decode):
    """sglang-router in PD mode over one prefill and one decode server."""
    return Router([prefill, decode], worker_args=[
        "--pd-disaggregation", "--prefill", prefill.url, str(prefill.bootstrap_port),
        "--decode", decode.url])


def prefill_server(model=SMOLLM2, *args, env=None):
    port = free_port()
    server = Server(model, "--skip-server-warmup", "--disaggregation-mode", "prefill",
                    "--disaggregation-bootstrap-port", port, *args, env=env)
    server.bootstrap_port = port
    return server


def decode_server(model=SMOLLM2, *args, env=None):
    return Server(model, "--skip-server-warmup", "--disaggregation-mode", "decode", *args, env=env)


def transfers(server):
    return server.server_info()["internal_states"][0]["kv_transfer"]


def generate(url, text, sampling=GREEDY, **extra):
    r = requests.post(url + "/generate", json={"text": text, "sampling_params": sampling, **extra},
                      timeout=120)
    assert r.status_code == 200, r.text
    return r.json()


@pytest.fixture(scope="module")
def pd():
    with contextlib.ExitStack() as stack:
        one = Server(SMOLLM2, "--skip-server-warmup")
        stack.callback(one.stop)
        prefill = prefill_server()
        stack.callback(prefill.stop)
        decode = decode_server()
        stack.callback(decode.stop)
        router = pd_router(prefill, decode)
        stack.callback(router.stop)
        yield one, prefill, decode, router
        for server in (prefill, decode):
            server.assert_no_leak()
            assert transfers(server)["pending_bytes"] == 0


@pytest.fixture(autouse=True)
def no_leak_after(request):
    yield
    if "pd" in request.fixturenames:
        _, prefill, decode, _ = request.getfixturevalue("pd")
        prefill.assert_no_leak()
        decode.assert_no_leak()


def test_greedy_through_the_router_equals_one_server(pd):
    one, prefill, decode, router = pd
    before = transfers(decode)["received"]
    for text in PROMPTS:
        want = generate(one.url, text)
        got = generate(router.url, text)
        assert got["output_ids"] == want["output_ids"] and got["text"] == want["text"]
        # The decode server computed only the prompt's last token: the rest came from the
        # prefill server's K/V.
        assert got["meta_info"]["cached_tokens"] == want["meta_info"]["prompt_tokens"] - 1
    assert transfers(decode)["received"] - before == len(PROMPTS)
    assert transfers(prefill)["sent"] >= len(PROMPTS)


def test_streaming_and_logprobs_through_the_router(pd):
    one, _, _, router = pd
    text = PROMPTS[1]
    want = generate(one.url, text, return_logprob=True, logprob_start_len=0)
    stream = requests.post(router.url + "/generate", json={
        "text": text, "sampling_params": GREEDY, "stream": True}, timeout=120)
    events = [json.loads(line[6:]) for line in stream.iter_lines()
              if line.startswith(b"data: ") and line != b"data: [DONE]"]
    assert events[-1]["output_ids"] == want["output_ids"]
    got = generate(router.url, text, return_logprob=True, logprob_start_len=0)
    assert got["output_ids"] == want["output_ids"]
    # The router puts the prefill server's input logprobs before the decode server's (none).
    got_in = got["meta_info"]["input_token_logprobs"]
    want_in = want["meta_info"]["input_token_logprobs"]
    assert [t for _, t, _ in got_in] == [t for _, t, _ in want_in]
    for (g, _, _), (w, _, _) in zip(got_in[1:], want_in[1:]):
        assert abs(g - w) < 1e-3
    got_out = got["meta_info"]["output_token_logprobs"]
    want_out = want["meta_info"]["output_token_logprobs"]
    assert [t for _, t, _ in got_out] == [t for _, t, _ in want_out]
    for (g, _, _), (w, _, _) in zip(got_out, want_out):
        assert abs(g - w) < 1e-3


def test_openai_routes_through_the_router(pd):
    one, _, _, router = pd
    direct = openai.OpenAI(base_url=one.url + "/v1", api_key="none")
    client = openai.OpenAI(base_url=router.url + "/v1", api_key="none")
    messages = [{"role": "user", "content": "Tell me about the sea."}]
    want = direct.chat.completions.create(model="m", messages=messages, max_tokens=20,
                                          temperature=0)
    got = client.chat.completions.create(model="m", messages=messages, max_tokens=20,
                                         temperature=0)
    assert got.choices[0].message.content == want.choices[0].message.content
    assert got.usage.prompt_tokens == want.usage.prompt_tokens
    chunks = client.chat.completions.create(model="m", messages=messages, max_tokens=20,
                                            temperature=0, stream=True)
    assert "".join(c.choices[0].delta.content or "" for c in chunks if c.choices) == \
        want.choices[0].message.content
    # n > 1: the router sends one room per choice.
    many = client.chat.completions.create(model="m", messages=messages, max_tokens=20,
                                          temperature=0, n=2)
    assert [c.message.content for c in many.choices] == [want.choices[0].message.content] * 2
    # A prompt list: one room per prompt.
    want_c = direct.completions.create(model="m", prompt=PROMPTS[:2], max_tokens=12,
                                       temperature=0)
    got_c = client.completions.create(model="m", prompt=PROMPTS[:2], max_tokens=12,
                                      temperature=0)
    assert sorted(c.text for c in got_c.choices) == sorted(c.text for c in want_c.choices)


def test_concurrent_requests_through_the_router(pd):
    one, _, _, router = pd
    texts = [f"{p} ({i})" for i in range(4) for p in PROMPTS]
    want = {t: generate(one.url, t)["output_ids"] for t in texts}
    with concurrent.futures.ThreadPoolExecutor(8) as pool:
        got = dict(zip(texts, pool.map(lambda t: generate(router.url, t)["output_ids"], texts)))
    assert got == want


def test_bootstrap_fields_by_hand(pd):
    """Without the router: both servers get the same body with the same room, in either order."""
    one, prefill, decode, _ = pd
    for delay_prefill in (False, True):
        body = {"text": PROMPTS[0], "sampling_params": GREEDY, "bootstrap_host": "127.0.0.1",
                "bootstrap_port": prefill.bootstrap_port,
                "bootstrap_room": 1000 + int(delay_prefill)}
        results = {}

        def post(name, url, delay):
            time.sleep(delay)
            results[name] = requests.post(url + "/generate", json=body, timeout=120)

        threads = [threading.Thread(target=post, args=("p", prefill.url, 0.5 * delay_prefill)),
                   threading.Thread(target=post, args=("d", decode.url, 0.5 * (not delay_prefill)))]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        assert results["p"].status_code == 200 and results["d"].status_code == 200
        # SGLang's prefill server generates one token; the decode server the whole answer.
        assert results["p"].json()["meta_info"]["completion_tokens"] == 1
        want = generate(one.url, PROMPTS[0])
        assert results["d"].json()["output_ids"] == want["output_ids"]
        assert results["d"].json()["output_ids"][0] == results["p"].json()["output_ids"][0]


def test_a_request_without_a_room_is_served_whole(pd):
    one, prefill, decode, _ = pd
    want = generate(one.url, PROMPTS[2])
    assert generate(decode.url, PROMPTS[2])["output_ids"] == want["output_ids"]
    assert generate(prefill.url, PROMPTS[2])["output_ids"] == want["output_ids"]


def test_bad_bootstrap_fields_are_refused(pd):
    one, prefill, decode, _ = pd
    cases = [
        (one, {"bootstrap_room": 5, "bootstrap_host": "127.0.0.1"}, "disaggregation-mode"),
        (decode, {"bootstrap_room": 5}, "bootstrap_host is required"),
        (decode, {"bootstrap_room": -1, "bootstrap_host": "127.0.0.1"}, "non-negative"),
        (decode, {"bootstrap_room": "x", "bootstrap_host": "127.0.0.1"}, "non-negative"),
        (decode, {"bootstrap_room": [1, 2], "bootstrap_host": "127.0.0.1"}, "entries"),
        (decode, {"bootstrap_room": 5, "bootstrap_host": "127.0.0.1", "bootstrap_port": 70000},
         "bootstrap_port"),
        (prefill, {"bootstrap_room": 5, "bootstrap_host": 3}, "bootstrap_host"),
    ]
    for server, fields, message in cases:
        r = requests.post(server.url + "/generate",
                          json={"text": "hi", "sampling_params": GREEDY, **fields}, timeout=30)
        assert r.status_code == 400, (fields, r.text)
        assert message in r.text, (fields, r.text)
    # A prefill server nobody listens on: the decode server answers 503 and keeps serving.
    r = requests.post(decode.url + "/generate", json={
        "text": "hi", "sampling_params": GREEDY, "bootstrap_room": 9,
        "bootstrap_host": "127.0.0.1", "bootstrap_port": free_port()}, timeout=60)
    assert r.status_code == 503 and "cannot connect" in r.text, r.text
    assert generate(decode.url, "hi")["meta_info"]["completion_tokens"] > 0


def test_a_call_the_prefill_server_refuses_fails_its_decode_side_at_once(pd):
    """The prefill server refuses the call after parsing it (its rid is live there already): it
    publishes the refusal under the room, so the decode server answers the error now instead of
    waiting out its 300 s transfer timeout."""
    _, prefill, decode, _ = pd
    live = requests.post(prefill.url + "/generate", stream=True, timeout=120, json={
        "text": PROMPTS[1], "rid": "pd-dup", "stream": True,
        "sampling_params": {"max_new_tokens": 4000, "temperature": 0, "ignore_eos": True}})
    try:
        assert live.status_code == 200
        lines = live.iter_lines()  # kept: a dropped iterator may close the connection
        next(lines)  # the rid is live on the prefill server
        body = {"text": PROMPTS[0], "rid": "pd-dup", "sampling_params": GREEDY,
                "bootstrap_host": "127.0.0.1", "bootstrap_port": prefill.bootstrap_port,
                "bootstrap_room": 4242}
        with concurrent.futures.ThreadPoolExecutor(2) as pool:
            to_decode = pool.submit(requests.post, decode.url + "/generate", json=body, timeout=60)
            to_prefill = pool.submit(requests.post, prefill.url + "/generate", json=body,
                                     timeout=60)
            refused = to_prefill.result()
            assert refused.status_code == 400 and "Duplicate request ID" in refused.text, refused.text
            failed = to_decode.result()  # a timeout here means the decode side kept waiting
        assert failed.status_code == 503, failed.text
        assert "refused" in failed.text and "Duplicate request ID" in failed.text, failed.text
    finally:
        live.close()  # aborts the long request
    assert generate(decode.url, "hi")["meta_info"]["completion_tokens"] > 0


def test_decode_killed_while_its_transfer_is_pending_frees_the_prefill_side():
    """The prefill is slowed down (test hook) so the decode server is waiting on its transfer
    when it is killed; the prefill server then drops the rows at once and holds nothing."""
    with contextlib.ExitStack() as stack:
        prefill = prefill_server(env={"RADIX_TEST_STEP_DELAY_MS": "1500"})
        stack.callback(prefill.stop)
        decode = decode_server()
        stack.callback(decode.stop)
        body = {"text": PROMPTS[1], "sampling_params": GREEDY, "bootstrap_host": "127.0.0.1",
                "bootstrap_port": prefill.bootstrap_port, "bootstrap_room": 77}
        with concurrent.futures.ThreadPoolExecutor(2) as pool:
            to_decode = pool.submit(requests.post, decode.url + "/generate", json=body,
                                    timeout=120)
            deadline = time.time() + 30
            while transfers(prefill)["pending_rooms"] == 0:  # the decode server is waiting
                assert time.time() < deadline
                time.sleep(0.05)
            to_prefill = pool.submit(requests.post, prefill.url + "/generate", json=body,
                                     timeout=120)
            os.kill(decode.proc.pid, signal.SIGKILL)
            decode.proc.wait()
            with pytest.raises(requests.RequestException):
                to_decode.result()
            assert to_prefill.result().status_code == 200
        deadline = time.time() + 30
        while True:
            t = transfers(prefill)
            if t["pending_bytes"] == 0 and t["pending_rooms"] == 0 and t["dropped"] == 1:
                break
            assert time.time() < deadline, t
            time.sleep(0.1)
        assert t["sent"] == 0 and t["abandoned"] == 1
        prefill.assert_no_leak()


def test_rows_nobody_fetches_are_dropped_after_the_waiting_timeout():
    with contextlib.ExitStack() as stack:
        prefill = prefill_server(STORIES, env={"SGLANG_DISAGGREGATION_WAITING_TIMEOUT": "1"})
        stack.callback(prefill.stop)
        generate(prefill.url, "Once upon a time", bootstrap_host="127.0.0.1", bootstrap_room=3)
        deadline = time.time() + 30
        while True:
            t = transfers(prefill)
            if t["dropped"] == 1 and t["pending_bytes"] == 0 and t["pending_rooms"] == 0:
                break
            assert time.time() < deadline, t
            time.sleep(0.1)
        prefill.assert_no_leak()


def test_a_decode_server_with_another_kv_layout_refuses_the_rows():
    with contextlib.ExitStack() as stack:
        prefill = prefill_server(STORIES, "--kv-cache-dtype", "bf16")
        stack.callback(prefill.stop)
        decode = decode_server(STORIES, "--kv-cache-dtype", "fp8_e4m3")
        stack.callback(decode.stop)
        body = {"text": "Once upon a time", "sampling_params": GREEDY,
                "bootstrap_host": "127.0.0.1", "bootstrap_port": prefill.bootstrap_port,
                "bootstrap_room": 4}
        with concurrent.futures.ThreadPoolExecutor(2) as pool:
            d = pool.submit(requests.post, decode.url + "/generate", json=body, timeout=60)
            p = pool.submit(requests.post, prefill.url + "/generate", json=body, timeout=60)
            assert p.result().status_code == 200
            r = d.result()
        assert r.status_code == 503 and "layout" in r.text, r.text
        decode.assert_no_leak()
        prefill.assert_no_leak()


@pytest.mark.parametrize("args,message", [
    (["--disaggregation-mode", "decode", "--disable-radix-cache"], "--disable-radix-cache"),
    (["--disaggregation-mode", "prefill", "--tp-size", "2"], "--tp-size 1"),
    (["--disaggregation-mode", "prefill", "--disaggregation-decode-tp", "2"],
     "--disaggregation-decode-tp"),
    (["--disaggregation-mode", "prefill", "--disaggregation-bootstrap-port", "0"],
     "--disaggregation-bootstrap-port"),
])
def test_impossible_layouts_exit_2(args, message):
    proc = subprocess.run([str(BUILD / "radixserve"), "--model-path", str(STORIES), *args],
                          capture_output=True, text=True, timeout=60)
    assert proc.returncode == 2, proc.stderr
    assert message in proc.stderr, proc.stderr


def test_the_bootstrap_port_in_use_is_a_startup_error():
    with contextlib.ExitStack() as stack:
        first = prefill_server(STORIES)
        stack.callback(first.stop)
        with pytest.raises(RuntimeError, match="disaggregation-bootstrap-port"):
            Server(STORIES, "--skip-server-warmup", "--disaggregation-mode", "prefill",
                   "--disaggregation-bootstrap-port", first.bootstrap_port)


def test_prefill_server_on_another_host():
    """The prefill server on another "host" (a network namespace joined by a veth pair): the
    router reaches it at its address and passes that address as bootstrap_host, from which the
    decode server (here) fetches the K/V."""
    ns = Namespace()
    port, bootstrap = free_port(), free_port()
    log_path = f"{os.environ.get('TMPDIR', '/tmp')}/radixserve-prefill-ns-{port}.log"
    with open(log_path, "w") as log, contextlib.ExitStack() as stack:
        stack.callback(ns.teardown)
        proc = ns.popen([BUILD / "radixserve", "--model-path", SMOLLM2, "--host", ns.peer_ip,
                         "--port", port, "--skip-server-warmup", "--disaggregation-mode",
                         "prefill", "--disaggregation-bootstrap-port", bootstrap], log)
        stack.callback(lambda: (proc.terminate(), proc.wait(timeout=30)))
        prefill = types.SimpleNamespace(url=f"http://{ns.peer_ip}:{port}",
                                        bootstrap_port=bootstrap)
        deadline = time.time() + 120
        while True:
            assert proc.poll() is None, open(log_path).read()
            try:
                if requests.get(prefill.url + "/health", timeout=2).status_code == 200:
                    break
            except requests.RequestException:
                pass
            assert time.time() < deadline, open(log_path).read()
            time.sleep(0.2)
        one = Server(SMOLLM2, "--skip-server-warmup")
        stack.callback(one.stop)
        decode = decode_server()
        stack.callback(decode.stop)
        router = pd_router(prefill, decode)
        stack.callback(router.stop)
        for text in PROMPTS:
            got = generate(router.url, text)
            assert got["output_ids"] == generate(one.url, text)["output_ids"]
            assert got["meta_info"]["cached_tokens"] == got["meta_info"]["prompt_tokens"] - 1
        assert transfers(decode)["received"] == len(PROMPTS)
        info = requests.get(prefill.url + "/server_info", timeout=10).json()
        assert info["internal_states"][0]["kv_transfer"]["sent"] == len(PROMPTS)
        decode.assert_no_leak()
    assert f"K/V transfers served on {ns.peer_ip}:{bootstrap}" in open(log_path).read()

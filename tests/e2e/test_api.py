"""Black-box tests of the HTTP API against a real radixserve serving SmolLM2 (issue 7).

The official OpenAI Python SDK talks to the server unchanged; native routes use plain HTTP.
"""
import json

import openai
import pytest
import requests

from server_util import SMOLLM2, Server


@pytest.fixture(scope="module")
def server():
    if not SMOLLM2.exists():
        pytest.fail(f"{SMOLLM2} missing: run scripts/setup")
    srv = Server(SMOLLM2, "--enable-cache-report", "--max-running-requests", "16")
    yield srv
    assert srv.stop() == 0, srv.logs()


@pytest.fixture(scope="module")
def client(server):
    return openai.OpenAI(base_url=server.url + "/v1", api_key="unused")


def sse_events(response):
    events = []
    for line in response.iter_lines():
        if line.startswith(b"data: "):
            events.append(line[len(b"data: "):].decode())
    return events


def test_generate_single(server):
    r = requests.post(server.url + "/generate", json={
        "text": "The capital of France is",
        "sampling_params": {"max_new_tokens": 8, "temperature": 0}})
    assert r.status_code == 200, r.text
    body = r.json()
    assert isinstance(body["text"], str) and body["text"]
    meta = body["meta_info"]
    assert meta["completion_tokens"] == len(body["output_ids"]) <= 8
    assert meta["prompt_tokens"] > 0
    assert meta["finish_reason"]["type"] in ("length", "stop")
    server.assert_no_leak()


def test_generate_greedy_is_deterministic(server):
    payload = {"text": "Once upon a time", "sampling_params": {"max_new_tokens": 12,
                                                               "temperature": 0}}
    a = requests.post(server.url + "/generate", json=payload).json()
    b = requests.post(server.url + "/generate", json=payload).json()
    assert a["output_ids"] == b["output_ids"]
    # The second run reuses the prompt's KV through the radix cache.
    assert b["meta_info"]["cached_tokens"] > 0


def test_generate_batch_and_input_ids(server):
    r = requests.post(server.url + "/generate", json={
        "input_ids": [[1, 2, 3, 4], [5, 6, 7]],
        "sampling_params": {"max_new_tokens": 4, "temperature": 0}})
    assert r.status_code == 200, r.text
    body = r.json()
    assert isinstance(body, list) and len(body) == 2
    assert body[0]["meta_info"]["prompt_tokens"] == 4
    assert body[1]["meta_info"]["prompt_tokens"] == 3


def test_generate_stream_is_cumulative(server):
    with requests.post(server.url + "/generate", json={
            "text": "Hello, my name is", "stream": True,
            "sampling_params": {"max_new_tokens": 10, "temperature": 0}}, stream=True) as r:
        assert r.status_code == 200
        assert r.headers["content-type"].startswith("text/event-stream")
        events = sse_events(r)
    assert events[-1] == "[DONE]"
    chunks = [json.loads(e) for e in events[:-1]]
    texts = [c["text"] for c in chunks]
    for earlier, later in zip(texts, texts[1:]):
        assert later.startswith(earlier)
    assert chunks[-1]["meta_info"]["finish_reason"] is not None
    full = requests.post(server.url + "/generate", json={
        "text": "Hello, my name is",
        "sampling_params": {"max_new_tokens": 10, "temperature": 0}}).json()
    assert texts[-1] == full["text"]


def test_chat_completion(client):
    out = client.chat.completions.create(
        model="default", messages=[{"role": "user", "content": "Say hi"}],
        max_tokens=8, temperature=0)
    assert out.object == "chat.completion"
    assert out.choices[0].message.role == "assistant"
    assert out.choices[0].finish_reason in ("stop", "length")
    assert out.usage.completion_tokens <= 8
    assert out.usage.total_tokens == out.usage.prompt_tokens + out.usage.completion_tokens


def test_chat_stream_matches_non_stream(client):
    kwargs = dict(model="default", messages=[{"role": "user", "content": "Count to five."}],
                  max_tokens=16, temperature=0)
    full = client.chat.completions.create(**kwargs).choices[0].message.content
    stream = client.chat.completions.create(stream=True,
                                            stream_options={"include_usage": True}, **kwargs)
    pieces, finish, usage = [], None, None
    for chunk in stream:
        if chunk.usage:
            usage = chunk.usage
        for choice in chunk.choices:
            if choice.delta.content:
                pieces.append(choice.delta.content)
            if choice.finish_reason:
                finish = choice.finish_reason
    assert "".join(pieces) == full
    assert finish in ("stop", "length")
    assert usage is not None and usage.completion_tokens > 0


def test_chat_n_choices(client):
    out = client.chat.completions.create(
        model="default", messages=[{"role": "user", "content": "Pick a color."}],
        max_tokens=6, temperature=1.0, n=3, seed=7)
    assert [c.index for c in out.choices] == [0, 1, 2]
    assert all(c.finish_reason in ("stop", "length") for c in out.choices)
    assert out.usage.completion_tokens <= 18


def test_seeded_sampling_is_reproducible(client):
    kwargs = dict(model="default", messages=[{"role": "user", "content": "Tell a story."}],
                  max_tokens=12, temperature=0.9, seed=1234)
    a = client.chat.completions.create(**kwargs).choices[0].message.content
    b = client.chat.completions.create(**kwargs).choices[0].message.content
    assert a == b


def test_stop_string_never_leaks_into_stream(server, client):
    base = client.completions.create(model="default", prompt="1, 2, 3, 4,", max_tokens=12,
                                     temperature=0).choices[0].text
    assert len(base) > 3
    stop = base[2:4]
    text = ""
    finish = None
    for chunk in client.completions.create(model="default", prompt="1, 2, 3, 4,",
                                           max_tokens=12, temperature=0, stop=[stop],
                                           stream=True):
        text += chunk.choices[0].text
        finish = chunk.choices[0].finish_reason or finish
    assert stop not in text
    assert text == base[:base.index(stop)]
    assert finish == "stop"


def test_chat_logprobs_shape(client):
    out = client.chat.completions.create(
        model="default", messages=[{"role": "user", "content": "Hi"}], max_tokens=4,
        temperature=0, logprobs=True, top_logprobs=3)
    content = out.choices[0].logprobs.content
    assert len(content) == out.usage.completion_tokens
    for item in content:
        assert item.logprob <= 0
        assert len(item.top_logprobs) == 3
        assert item.top_logprobs[0].logprob >= item.top_logprobs[-1].logprob


def test_completions_echo_and_cached_tokens(client):
    prompt = "In a small village there lived an old baker who " * 4
    first = client.completions.create(model="default", prompt=prompt, max_tokens=4,
                                      temperature=0, echo=True)
    assert first.choices[0].text.startswith(prompt)
    second = client.completions.create(model="default", prompt=prompt, max_tokens=4,
                                       temperature=0)
    details = second.usage.prompt_tokens_details
    assert details is not None and details.cached_tokens > 0


def test_models_and_admin_routes(server):
    models = requests.get(server.url + "/v1/models").json()
    name = models["data"][0]["id"]
    assert requests.get(server.url + f"/v1/models/{name}").status_code == 200
    missing = requests.get(server.url + "/v1/models/nope")
    assert missing.status_code == 404
    assert missing.json()["error"]["code"] == "model_not_found"
    assert requests.get(server.url + "/model_info").json()["is_generation"] is True
    assert requests.get(server.url + "/get_load").status_code == 200
    assert requests.get(server.url + "/health_generate").status_code == 200
    tok = requests.post(server.url + "/tokenize", json={"prompt": "hello world"}).json()
    assert tok["count"] == len(tok["tokens"])
    detok = requests.post(server.url + "/detokenize", json={"tokens": tok["tokens"]}).json()
    assert detok["text"].strip() == "hello world"
    assert requests.post(server.url + "/flush_cache").status_code == 200
    server.assert_no_leak()


def test_client_disconnect_mid_stream_releases_everything(server):
    for _ in range(3):
        r = requests.post(server.url + "/generate", stream=True, json={
            "text": "Write a very long story about a dragon.", "stream": True,
            "sampling_params": {"max_new_tokens": 400, "ignore_eos": True}})
        lines = r.iter_lines()
        assert any(line.startswith(b"data: ") for line in lines)
        r.close()  # drop the connection mid-stream
    server.assert_no_leak()


def test_abort_request_by_rid(server):
    import threading
    result = {}

    def run():
        result["body"] = requests.post(server.url + "/generate", json={
            "text": "Count forever:", "rid": "abort-me-please",
            "sampling_params": {"max_new_tokens": 2000, "ignore_eos": True}}).json()

    thread = threading.Thread(target=run)
    thread.start()
    import time
    deadline = time.time() + 30
    while time.time() < deadline and requests.get(server.url + "/get_load").json()[0]["num_reqs"] == 0:
        time.sleep(0.05)
    assert requests.post(server.url + "/abort_request", json={"rid": "abort-me"}).status_code == 200
    thread.join(timeout=60)
    assert result["body"]["meta_info"]["finish_reason"]["type"] == "abort"
    server.assert_no_leak()


def test_completion_template_fill_in_the_middle():
    """--completion-template star_coder: prefix/suffix/middle markers as SGLang lays them out."""
    srv = Server(SMOLLM2, "--completion-template", "star_coder")
    try:
        client = openai.OpenAI(base_url=srv.url + "/v1", api_key="unused")
        out = client.completions.create(model="default", prompt="def add(a, b):\n    ",
                                        suffix="\n    return c\n", max_tokens=4, temperature=0)
        fim = "<fim_prefix>def add(a, b):\n    <fim_suffix>\n    return c\n<fim_middle>"
        expected = requests.post(srv.url + "/tokenize", json={"prompt": fim}).json()["count"]
        assert out.usage.prompt_tokens == expected
    finally:
        assert srv.stop() == 0


def test_parallel_samples_share_the_prompt_kv(server):
    """n > 1: the prompt is prefilled once and every sample reuses it from the radix cache."""
    prompt = "A unique prompt about seventeen purple elephants crossing a river at dawn. " * 3
    r = requests.post(server.url + "/generate", json={
        "text": prompt, "sampling_params": {"max_new_tokens": 4, "n": 3, "temperature": 0.8}})
    assert r.status_code == 200, r.text
    items = r.json()
    assert len(items) == 3
    prompt_tokens = items[0]["meta_info"]["prompt_tokens"]
    for item in items:
        assert item["meta_info"]["prompt_tokens"] == prompt_tokens
        # Everything but the last prompt token comes from the cache (SGLang recomputes one).
        assert item["meta_info"]["cached_tokens"] == prompt_tokens - 1
    server.assert_no_leak()


def test_seeded_output_is_the_same_under_concurrent_load(client):
    from concurrent.futures import ThreadPoolExecutor
    kwargs = dict(model="default", messages=[{"role": "user", "content": "Name three fruits."}],
                  max_tokens=16, temperature=1.0, top_p=0.9, seed=99)
    alone = client.chat.completions.create(**kwargs).choices[0].message.content

    def noise(i):
        return client.completions.create(model="default", prompt=f"Noise {i}: once upon",
                                         max_tokens=24, temperature=0.7, seed=i)

    with ThreadPoolExecutor(max_workers=6) as pool:
        background = [pool.submit(noise, i) for i in range(5)]
        loaded = pool.submit(lambda: client.chat.completions.create(**kwargs))
        results = [f.result() for f in background]
        assert loaded.result().choices[0].message.content == alone
    assert len(results) == 5


def test_sagemaker_ping_and_invocations_are_the_health_and_chat_routes(server):
    assert requests.get(server.url + "/ping", timeout=10).status_code == 200
    body = {"messages": [{"role": "user", "content": "Name a color."}], "max_tokens": 8,
            "temperature": 0}
    via_sagemaker = requests.post(server.url + "/invocations", json=body, timeout=60)
    via_openai = requests.post(server.url + "/v1/chat/completions", json=body, timeout=60)
    assert via_sagemaker.status_code == 200, via_sagemaker.text
    assert via_sagemaker.json()["object"] == "chat.completion"
    assert (via_sagemaker.json()["choices"][0]["message"]
            == via_openai.json()["choices"][0]["message"])

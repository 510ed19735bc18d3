"""Multi-LoRA serving end to end on stories260K: adapters from --lora-paths (PEFT folders and
llama.cpp GGUF LoRA files) and from POST /load_lora_adapter, chosen per prompt with lora_path or
with "model": "<served>:<adapter>". Every greedy continuation is checked against llama.cpp
(llama-cpp-python) running the same prompt with the same adapter as a GGUF LoRA file, so batches
that mix the base model and several adapters must give each request what it gets alone."""
import concurrent.futures
import json
import pathlib
import re
import sys
import threading

import openai
import pytest
import requests

from server_util import STORIES, Server

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[1] / "fixtures"))
sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[1] / "oracle/model"))
from lora_files import Adapter, Shape  # noqa: E402
from test_llama_oracle import STORY, tokenize  # noqa: E402
from test_moe_oracle import llama_cpp_greedy  # noqa: E402

MAX_NEW = 16
SHAPE = Shape(hidden=64, intermediate=172, layers=5, heads=8, kv_heads=4, head_dim=8)
NAMES = ("a", "b", "c", "d")


@pytest.fixture(scope="module")
def adapters(tmp_path_factory):
    """Four adapters; a and b served from GGUF LoRA files, c and d from PEFT folders. Each also
    has its GGUF form for llama.cpp. Plus e (loaded at run time only)."""
    root = tmp_path_factory.mktemp("loras")
    out = {}
    for i, name in enumerate(NAMES + ("e",)):
        adapter = Adapter(SHAPE, seed=100 + i, rank=4 + 2 * i, alpha=8, std=0.3)
        gguf = adapter.write_gguf(str(root / f"{name}.gguf"), "llama")
        served = gguf if name in ("a", "b", "e") else adapter.write_peft(str(root / name))
        out[name] = {"gguf": gguf, "served": served}
    return out


@pytest.fixture(scope="module")
def prompts():
    story = tokenize(str(STORIES), STORY)
    return [story[: 5 + 3 * i] for i in range(9)] + [story[:80]]


@pytest.fixture(scope="module")
def expected(adapters, prompts):
    """llama.cpp's continuation of every prompt under the base model and each adapter."""
    out = {}
    for name in (None,) + NAMES + ("e",):
        lora = adapters[name]["gguf"] if name else None
        for i, p in enumerate(prompts[:6]):
            out[(name, i)] = llama_cpp_greedy(str(STORIES), p, MAX_NEW, lora)
    return out


@pytest.fixture(scope="module")
def server(adapters):
    paths = [f"{n}={adapters[n]['served']}" for n in ("a", "b", "c")]
    paths.append(json.dumps({"lora_name": "d", "lora_path": adapters["d"]["served"],
                             "pinned": True}))
    srv = Server(STORIES, "--skip-server-warmup", "--served-model-name", "stories",
                 "--lora-paths", *paths, "--max-loras-per-batch", "4")
    yield srv
    assert srv.stop() == 0, srv.logs()


def generate(srv, prompt, lora=None, **extra):
    body = {"input_ids": prompt, "sampling_params": {"max_new_tokens": MAX_NEW, "temperature": 0,
                                                     "ignore_eos": True}, **extra}
    if lora is not None:
        body["lora_path"] = lora
    r = requests.post(srv.url + "/generate", json=body, timeout=120)
    assert r.status_code == 200, r.text
    return r.json()


def test_mixed_batch_matches_llama_cpp_per_adapter(server, prompts, expected):
    jobs = [(name, i) for i in range(6) for name in (None,) + NAMES]
    with concurrent.futures.ThreadPoolExecutor(len(jobs)) as pool:
        got = list(pool.map(lambda j: generate(server, prompts[j[1]], j[0])["output_ids"], jobs))
    for job, ids in zip(jobs, got):
        assert ids == expected[job], job
    # The adapters really differ from the base model and from each other.
    assert len({tuple(expected[(n, 5)]) for n in (None,) + NAMES}) == 5
    server.assert_no_leak()


def test_an_adapted_request_scores_the_same_alone_and_in_a_batch(server, prompts):
    """A row's adapter update is summed rank after rank on one thread whatever the batch: the
    output logprobs of a request alone equal, bit for bit, its logprobs among 40 adapted requests
    (a decode batch past the 32 rows where batches start splitting over the threads)."""
    def logprobs(job):
        prompt, name = job
        out = generate(server, prompt, name, return_logprob=True)
        return out["output_ids"], [e[0] for e in out["meta_info"]["output_token_logprobs"]]

    target = (prompts[7], "c")
    alone = logprobs(target)
    jobs = [(prompts[i % 9], NAMES[i % 4]) for i in range(39)] + [target]
    with concurrent.futures.ThreadPoolExecutor(len(jobs)) as pool:
        batched = list(pool.map(logprobs, jobs))
    assert batched[-1] == alone
    assert batched[jobs.index(target)] == alone  # the same prompt and adapter earlier in the batch
    server.assert_no_leak()


def test_batch_of_prompts_with_a_list_of_adapters(server, prompts, expected):
    loras = [None, "a", "b", "c", "d", "a"]
    r = requests.post(server.url + "/generate", json={
        "input_ids": prompts[:6], "lora_path": loras,
        "sampling_params": {"max_new_tokens": MAX_NEW, "temperature": 0, "ignore_eos": True}},
        timeout=120)
    assert r.status_code == 200, r.text
    for i, item in enumerate(r.json()):
        assert item["output_ids"] == expected[(loras[i], i)]


def test_openai_model_names_select_the_adapter(server, prompts, expected):
    client = openai.OpenAI(base_url=server.url + "/v1", api_key="none")
    ids = [m.id for m in client.models.list().data]
    assert ids[0] == "stories" and set(ids[1:]) == {f"stories:{n}" for n in NAMES}
    card = client.models.retrieve("stories:c")
    assert card.parent == "stories"
    for model, name in (("stories:b", "b"), ("stories", None), ("c", "c")):
        out = client.completions.create(model=model, prompt=prompts[2], max_tokens=MAX_NEW,
                                        temperature=0, extra_body={"ignore_eos": True})
        native = generate(server, prompts[2], name)
        assert out.choices[0].text == native["text"]
        assert native["output_ids"] == expected[(name, 2)]
    with pytest.raises(openai.BadRequestError) as err:
        client.completions.create(model="stories:nope", prompt="Once", max_tokens=2)
    assert "not loaded" in str(err.value)


def test_unknown_adapter_is_a_400(server):
    r = requests.post(server.url + "/generate", json={"text": "Once", "lora_path": "nope"})
    assert r.status_code == 400 and "not loaded" in r.text
    r = requests.post(server.url + "/generate", json={"text": ["a", "b"], "lora_path": ["a"]})
    assert r.status_code == 400 and "lora_path" in r.text


def test_prefix_cache_is_kept_apart_per_adapter(server, prompts):
    prompt = prompts[9][40:70]  # no other test sends this prefix
    assert generate(server, prompt)["meta_info"]["cached_tokens"] == 0
    assert generate(server, prompt, "a")["meta_info"]["cached_tokens"] == 0
    assert generate(server, prompt, "a")["meta_info"]["cached_tokens"] > 0
    # A client's extra_key cannot reach an adapter's namespace.
    assert generate(server, prompt, extra_key="L1:")["meta_info"]["cached_tokens"] == 0


def test_load_and_unload_at_run_time(server, adapters, prompts, expected):
    url = server.url
    r = requests.post(url + "/load_lora_adapter",
                      json={"lora_name": "e", "lora_path": adapters["e"]["served"]})
    assert r.status_code == 200 and r.json()["success"], r.text
    assert set(r.json()["loaded_adapters"]) == {"a", "b", "c", "d", "e"}
    assert generate(server, prompts[1], "e")["output_ids"] == expected[("e", 1)]
    again = requests.post(url + "/load_lora_adapter",
                          json={"lora_name": "e", "lora_path": adapters["e"]["served"]})
    assert again.status_code == 400 and "already loaded" in again.json()["error_message"]
    bad = requests.post(url + "/load_lora_adapter", json={"lora_name": "x", "lora_path": "/nope"})
    assert bad.status_code == 400 and not bad.json()["success"]
    r = requests.post(url + "/unload_lora_adapter", json={"lora_name": "e"})
    assert r.status_code == 200 and "e" not in r.json()["loaded_adapters"]
    assert requests.post(url + "/generate", json={"text": "x", "lora_path": "e"}).status_code == 400
    assert requests.post(url + "/unload_lora_adapter",
                         json={"lora_name": "e"}).status_code == 400
    server.assert_no_leak()


def test_streams_keep_their_adapter_while_adapters_come_and_go(server, adapters, prompts,
                                                               expected):
    """32 streaming requests over a, b, c and d while e is loaded and unloaded over and over:
    every stream's tokens are llama.cpp's for the adapter it named."""
    stop = threading.Event()

    def churn():
        while not stop.is_set():
            requests.post(server.url + "/load_lora_adapter",
                          json={"lora_name": "e", "lora_path": adapters["e"]["served"]})
            requests.post(server.url + "/unload_lora_adapter", json={"lora_name": "e"})

    def stream(job):
        name, i = job
        body = {"input_ids": prompts[i], "lora_path": name, "stream": True,
                "sampling_params": {"max_new_tokens": MAX_NEW, "temperature": 0,
                                    "ignore_eos": True}}
        ids = []
        with requests.post(server.url + "/generate", json=body, stream=True, timeout=120) as r:
            assert r.status_code == 200
            for line in r.iter_lines():
                if line.startswith(b"data: ") and line != b"data: [DONE]":
                    ids = json.loads(line[6:])["output_ids"]
        return ids

    jobs = [(NAMES[k % 4], k % 6) for k in range(32)]
    churner = threading.Thread(target=churn)
    churner.start()
    try:
        with concurrent.futures.ThreadPoolExecutor(32) as pool:
            got = list(pool.map(stream, jobs))
    finally:
        stop.set()
        churner.join()
    for job, ids in zip(jobs, got):
        assert ids == expected[job], job
    server.assert_no_leak()


def test_one_adapter_per_batch_still_serves_everyone(adapters, prompts, expected):
    srv = Server(STORIES, "--skip-server-warmup", "--lora-paths",
                 f"a={adapters['a']['served']}", f"c={adapters['c']['served']}",
                 "--max-loras-per-batch", "1")
    try:
        jobs = [(n, i) for i in range(4) for n in ("a", "c", None)]
        with concurrent.futures.ThreadPoolExecutor(len(jobs)) as pool:
            got = list(pool.map(lambda j: generate(srv, prompts[j[1]], j[0])["output_ids"], jobs))
        for job, ids in zip(jobs, got):
            assert ids == expected[job], job
        srv.assert_no_leak()
    finally:
        assert srv.stop() == 0, srv.logs()


def test_max_loaded_loras_evicts_the_least_recently_used(adapters):
    srv = Server(STORIES, "--skip-server-warmup", "--enable-lora", "--max-loaded-loras", "2",
                 "--max-loras-per-batch", "1")
    try:
        def load(name):
            r = requests.post(srv.url + "/load_lora_adapter",
                              json={"lora_name": name, "lora_path": adapters[name]["served"]})
            assert r.status_code == 200, r.text
            return set(r.json()["loaded_adapters"])

        assert load("a") == {"a"}
        assert load("b") == {"a", "b"}
        generate(srv, [1, 403, 407], "a")  # a is now the most recently used
        assert load("c") == {"a", "c"}
    finally:
        assert srv.stop() == 0, srv.logs()


def test_lora_requests_need_lora_enabled():
    srv = Server(STORIES, "--skip-server-warmup")
    try:
        r = requests.post(srv.url + "/generate", json={"text": "Once", "lora_path": "a"})
        assert r.status_code == 400 and "--enable-lora" in r.text
        r = requests.post(srv.url + "/load_lora_adapter", json={"lora_name": "a", "lora_path": "x"})
        assert r.status_code == 400 and "--enable-lora" in r.json()["error_message"]
    finally:
        assert srv.stop() == 0, srv.logs()


def test_bad_lora_arguments_exit_with_status_2(radixserve_bin, tmp_path):
    from e2e_util import run_radixserve
    proc = run_radixserve(radixserve_bin, "--model-path", str(STORIES), "--lora-paths",
                          f"x={tmp_path}/missing")
    assert proc.returncode == 2 and "--lora-paths" in proc.stderr
    proc = run_radixserve(radixserve_bin, "--model-path", str(STORIES), "--enable-lora",
                          "--max-loaded-loras", "2", "--max-loras-per-batch", "4")
    assert proc.returncode == 2 and "--max-loaded-loras" in proc.stderr


def test_rtp_llm_adapter_name(server, expected):
    """RTP-LLM's generate_config.adapter_name selects the adapter (the prompt is text here, so the
    reference is the native route with the same text and adapter)."""
    for name in ("b", None):
        config = {"max_new_tokens": 8, "temperature": 0, "return_output_ids": True}
        if name:
            config["adapter_name"] = name
        r = requests.post(server.url + "/", json={"prompt": "Once upon a time",
                                                  "generate_config": config}, timeout=60)
        assert r.status_code == 200, r.text
        native = requests.post(server.url + "/generate", json={
            "text": "Once upon a time", "lora_path": name,
            "sampling_params": {"max_new_tokens": 8, "temperature": 0}}, timeout=60).json()
        assert r.json()["output_ids"] == [native["output_ids"]]
    assert expected[("b", 0)] != expected[(None, 0)]
    r = requests.post(server.url + "/", json={"prompt": "Once", "generate_config": {
        "adapter_name": "nope"}}, timeout=60)
    assert r.status_code != 200 and "not loaded" in r.text


def test_retraction_keeps_each_request_on_its_adapter(adapters, prompts, expected):
    """A KV pool too small for the load forces retractions; retracted requests come back with
    their adapter (and its prefix-cache namespace) and still give llama.cpp's tokens."""
    srv = Server(STORIES, "--skip-server-warmup", "--max-total-tokens", "160",
                 "--chunked-prefill-size", "32", "--schedule-conservativeness", "0.05",
                 "--lora-paths", *[f"{n}={adapters[n]['served']}" for n in NAMES])
    try:
        # One batch call: every request is queued at once, so the pool runs out whatever the
        # machine's speed.
        jobs = [(name, i) for i in range(6) for name in (None,) + NAMES]
        r = requests.post(srv.url + "/generate", json={
            "input_ids": [prompts[i] for _, i in jobs], "lora_path": [n for n, _ in jobs],
            "sampling_params": {"max_new_tokens": MAX_NEW, "temperature": 0, "ignore_eos": True}},
            timeout=300)
        assert r.status_code == 200, r.text
        for job, item in zip(jobs, r.json()):
            assert item["output_ids"] == expected[job], job
        logs = srv.log_path.read_text(errors="replace")
        assert re.search(r"Retract requests. #retracted_reqs: [1-9]", logs), srv.logs()
        srv.assert_no_leak()
    finally:
        assert srv.stop() == 0, srv.logs()

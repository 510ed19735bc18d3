"""LightLLM's generation API (/generate with "inputs"/"parameters", /generate_stream, POST /) and,
with --use_tgi_api, Text Generation Inference's, driven by Hugging Face's own `text_generation`
client. References: the same server's SGLang /generate with the same sampling (greedy output
must agree token for token), LightLLM's api_lightllm.py response shapes, TGI's client models
(which validate every answer), Python's `re` for a regex grammar."""
import json
import re

import pytest
import requests
import text_generation

from server_util import STORIES, Server

PROMPT = "Once upon a time, there was a little"


@pytest.fixture(scope="module")
def srv():
    server = Server(STORIES)
    yield server
    assert server.stop() == 0, server.logs()


@pytest.fixture(scope="module")
def tgi():
    server = Server(STORIES, "--use_tgi_api")
    yield server
    assert server.stop() == 0, server.logs()


def sglang_greedy(srv, prompt, max_new_tokens, **extra):
    r = requests.post(srv.url + "/generate", json={
        "text": prompt, "sampling_params": {"temperature": 0, "max_new_tokens": max_new_tokens,
                                            **extra}}, timeout=60)
    assert r.status_code == 200, r.text
    return r.json()


def sse_events(response):
    events = []
    for line in response.iter_lines():
        if line.startswith(b"data:"):
            events.append(line[len(b"data:"):].strip())
    return events


def test_generate_is_greedy_by_default_and_answers_lightllms_shape(srv):
    r = requests.post(srv.url + "/generate", json={
        "inputs": PROMPT, "parameters": {"max_new_tokens": 12}}, timeout=60)
    assert r.status_code == 200, r.text
    out = r.json()
    ref = sglang_greedy(srv, PROMPT, 12)
    assert set(out) == {"generated_text", "count_output_tokens", "finish_reason", "prompt_tokens"}
    assert out["generated_text"] == [ref["text"]]
    assert out["count_output_tokens"] == ref["meta_info"]["completion_tokens"] == 12
    assert out["finish_reason"] == "length"
    assert out["prompt_tokens"] == ref["meta_info"]["prompt_tokens"]


def test_return_details_lists_each_token_with_its_logprob(srv):
    r = requests.post(srv.url + "/generate", json={
        "inputs": PROMPT, "parameters": {"max_new_tokens": 6, "return_details": True}},
        timeout=60)
    assert r.status_code == 200, r.text
    out = r.json()
    ref = requests.post(srv.url + "/generate", json={
        "text": PROMPT, "return_logprob": True,
        "sampling_params": {"temperature": 0, "max_new_tokens": 6}}, timeout=60).json()
    assert [t["id"] for t in out["tokens"]] == ref["output_ids"]
    ref_lps = [lp for lp, _, _ in ref["meta_info"]["output_token_logprobs"]]
    assert [t["logprob"] for t in out["tokens"]] == pytest.approx(ref_lps, abs=1e-5)
    assert [t["count_output_tokens"] for t in out["tokens"]] == list(range(1, 7))


def test_stream_sends_one_event_per_token_and_no_done_marker(srv):
    with requests.post(srv.url + "/generate_stream", json={
            "inputs": PROMPT, "parameters": {"max_new_tokens": 10}}, stream=True,
            timeout=60) as r:
        assert r.status_code == 200
        raw = sse_events(r)
    assert b"[DONE]" not in raw
    events = [json.loads(e) for e in raw]
    ref = sglang_greedy(srv, PROMPT, 10)
    assert [e["token"]["id"] for e in events] == ref["output_ids"]
    assert "".join(e["token"]["text"] for e in events) == ref["text"]
    assert [e["token"]["count_output_tokens"] for e in events] == list(range(1, 11))
    assert [e["finished"] for e in events] == [False] * 9 + [True]
    assert events[-1]["finish_reason"] == "length"
    assert all(isinstance(e["token"]["logprob"], float) for e in events)


def test_compat_route_and_stop_sequences(srv):
    ref = sglang_greedy(srv, PROMPT, 16)["text"]
    stop = ref.split()[2]
    r = requests.post(srv.url + "/", json={
        "inputs": PROMPT, "stream": False,
        "parameters": {"max_new_tokens": 16, "stop_sequences": [stop]}}, timeout=60)
    assert r.status_code == 200, r.text
    out = r.json()
    assert out["finish_reason"] == "stop"
    # LightLLM keeps the stop sequence in the output.
    assert out["generated_text"][0] == ref[:ref.index(stop) + len(stop)]
    with requests.post(srv.url + "/", json={"inputs": PROMPT, "stream": True,
                                            "parameters": {"max_new_tokens": 4}},
                       stream=True, timeout=60) as r:
        events = [json.loads(e) for e in sse_events(r)]
    assert len(events) == 4 and events[-1]["finished"]


def test_sampled_best_of_answers_a_list_per_choice(srv):
    r = requests.post(srv.url + "/generate", json={
        "inputs": PROMPT, "parameters": {"do_sample": True, "temperature": 0.8, "best_of": 2,
                                         "n": 2, "max_new_tokens": 5}}, timeout=60)
    assert r.status_code == 200, r.text
    out = r.json()
    assert len(out["generated_text"]) == 2
    assert out["count_output_tokens"] == [5, 5]
    assert out["finish_reason"] == ["length", "length"]
    srv.assert_no_leak()


@pytest.mark.parametrize("parameters, needle", [
    ({"no_such_parameter": 1}, "no_such_parameter"),
    ({"allowed_token_ids": [1, 2]}, "allowed_token_ids"),
    ({"do_sample": True, "top_k": 0}, "top_k"),
    ({"best_of": 2, "n": 1}, "n == best_of"),
    ({"stop_sequences": [[5, 6]]}, "stop_sequences"),
])
def test_unsupported_or_invalid_parameters_are_refused_in_lightllms_error_shape(
        srv, parameters, needle):
    r = requests.post(srv.url + "/generate", json={"inputs": PROMPT, "parameters": parameters},
                      timeout=60)
    assert r.status_code == 400, r.text
    assert set(r.json()) == {"message"}
    assert needle in r.json()["message"]


def test_tgi_client_generate_matches_greedy_generation(tgi):
    client = text_generation.Client(tgi.url, timeout=60)
    response = client.generate(PROMPT, max_new_tokens=8, decoder_input_details=True)
    ref = sglang_greedy(tgi, PROMPT, 8)
    assert response.generated_text == ref["text"]
    assert [t.id for t in response.details.tokens] == ref["output_ids"]
    assert response.details.finish_reason.value == "length"
    assert response.details.generated_tokens == 8
    assert len(response.details.prefill) == ref["meta_info"]["prompt_tokens"]


def test_tgi_client_stream_and_grammar(tgi):
    client = text_generation.Client(tgi.url, timeout=60)
    ref = sglang_greedy(tgi, PROMPT, 8)
    chunks = list(client.generate_stream(PROMPT, max_new_tokens=8))
    assert "".join(c.token.text for c in chunks) == ref["text"]
    assert chunks[-1].generated_text == ref["text"]
    assert chunks[-1].details.finish_reason.value == "length"
    grammar = text_generation.types.Grammar(type="regex", value="[0-9]{3}-[a-z]{2}")
    response = client.generate(PROMPT, max_new_tokens=16, grammar=grammar)
    assert re.fullmatch("[0-9]{3}-[a-z]{2}", response.generated_text), response.generated_text
    stop = ref["text"].split()[1]
    response = client.generate(PROMPT, max_new_tokens=8, stop_sequences=[stop])
    assert response.details.finish_reason.value == "stop_sequence"
    assert response.generated_text.endswith(stop)
    tgi.assert_no_leak()


def test_tgi_refuses_what_it_cannot_do_in_tgis_error_shape(tgi):
    r = requests.post(tgi.url + "/generate", json={
        "inputs": PROMPT, "parameters": {"watermark": True}}, timeout=60)
    assert r.status_code == 400
    assert set(r.json()) == {"error", "error_type"}
    assert "watermark" in r.json()["error"]


def test_token_load_reports_shares_of_the_kv_pool():
    """LightLLM's GET /token_load: current_load is what live requests hold of the pool (0 when
    idle), the max loads what they would hold run to their max_new_tokens (LightLLM reports the
    same value for logical_max_load and dynamic_max_load). Steps are slowed down (test hook) so
    the request is still running when the load is read."""
    srv = Server(STORIES, env={"RADIX_TEST_STEP_DELAY_MS": "20"})
    try:
        idle = requests.get(srv.url + "/token_load", timeout=10).json()
        assert idle == {"current_load": 0.0, "logical_max_load": 0.0, "dynamic_max_load": 0.0}
        total = srv.server_info()["max_total_num_tokens"]
        body = {"inputs": "Once upon a time", "parameters": {"max_new_tokens": 100,
                                                            "ignore_eos": True}}
        with requests.post(srv.url + "/generate_stream", json=body, stream=True,
                           timeout=120) as r:
            lines = r.iter_lines()
            next(line for line in lines if line.startswith(b"data:"))  # generating now
            load = requests.get(srv.url + "/token_load", timeout=10).json()
            for _ in lines:
                pass
    finally:
        srv.stop()
    assert 0.0 < load["current_load"] < 0.05
    assert load["logical_max_load"] == load["dynamic_max_load"]
    # The request may still grow to its prompt plus 100 tokens.
    assert load["dynamic_max_load"] > load["current_load"]
    assert 100 - 2 <= load["dynamic_max_load"] * total <= 100 + 32


def test_disable_log_stats_drops_the_periodic_statistics_line():
    """LightLLM's --disable_log_stats: no periodic decode statistics line; without it the line
    comes every --decode-log-interval steps."""
    for flags, want in (([], True), (["--disable_log_stats"], False)):
        srv = Server(STORIES, "--skip-server-warmup", "--decode-log-interval", "1", *flags)
        try:
            r = requests.post(srv.url + "/generate", timeout=60, json={
                "inputs": "Once upon a time", "parameters": {"max_new_tokens": 5}})
            assert r.status_code == 200, r.text
            srv.log.flush()
            assert ("Decode batch" in srv.log_path.read_text()) == want, srv.logs()
        finally:
            assert srv.stop() == 0, srv.logs()


def test_log_stats_interval_logs_lightllm_throughput_lines():
    """LightLLM's --log_stats_interval: its three throughput lines, at the first step after each
    interval (engine steps slowed by the test hook so one request spans several intervals)."""
    srv = Server(STORIES, "--skip-server-warmup", "--log_stats_interval", "1",
                 env={"RADIX_TEST_STEP_DELAY_MS": "50"})
    try:
        r = requests.post(srv.url + "/generate", timeout=120, json={
            "inputs": "Once upon a time", "parameters": {"max_new_tokens": 60,
                                                         "ignore_eos": True}})
        assert r.status_code == 200, r.text
        srv.log.flush()
        logs = srv.log_path.read_text()
        generate = re.findall(r"Avg generate tokens throughput: +([0-9.]+) tokens/s", logs)
        assert len(generate) >= 1, logs
        assert all(float(rate) > 0 for rate in generate)
        assert "Avg tokens(prompt+generate) throughput:" in logs
        assert "Avg prompt tokens throughput:" in logs
    finally:
        assert srv.stop() == 0, srv.logs()


def test_return_all_prompt_logprobs_adds_lightllms_prompt_fields():
    """--return_all_prompt_logprobs: the answer carries prompt_token_ids and, for each prompt token
    but the last, [id, {next id: logprob}]; the logprobs are SGLang's input_token_logprobs of the
    same prompt (checked against llama.cpp in tests/oracle)."""
    srv = Server(STORIES, "--skip-server-warmup", "--return_all_prompt_logprobs")
    try:
        prompt = "Once upon a time, there was"
        r = requests.post(srv.url + "/generate", timeout=60, json={
            "inputs": prompt, "parameters": {"max_new_tokens": 2}})
        assert r.status_code == 200, r.text
        out = r.json()
        ref = requests.post(srv.url + "/generate", timeout=60, json={
            "text": prompt, "return_logprob": True, "logprob_start_len": 0,
            "sampling_params": {"max_new_tokens": 1}}).json()["meta_info"]
        want = ref["input_token_logprobs"]  # [logprob, id, text], the first logprob null
        assert out["prompt_token_ids"] == [t for _, t, _ in want]
        assert len(out["prompt_logprobs"]) == len(want) - 1
        for (prev_id, step), (_, tid, _), (lp, nid, _) in zip(out["prompt_logprobs"], want,
                                                             want[1:]):
            assert prev_id == tid
            [(key, value)] = step.items()
            assert int(key) == nid and value == pytest.approx(lp, abs=1e-5)
    finally:
        assert srv.stop() == 0, srv.logs()

"""RTP-LLM's native generation API: POST / with "prompt" / "prompt_batch" and "generate_config".
References: the same server's SGLang /generate with the same sampling (greedy output must agree
token for token), and RTP-LLM's own source for the shapes: frontend_worker.py (PipelineResponse,
MultiSequencesPipelineResponse, BatchPipelineResponse), utils/base_model_datatypes.py (AuxInfo),
frontend_server.py (SSE "data:" events ending with "data:[done]"; error bodies from
server/misc.py format_exception), config/generate_config.py (fields and defaults)."""
import concurrent.futures
import json
import time

import pytest
import requests

from server_util import STORIES, Server

PROMPT = "Once upon a time, there was a little"

# AuxInfo's fields (rtp_llm/utils/base_model_datatypes.py), as dataclasses.asdict() lists them.
AUX_FIELDS = {
    "cost_time", "iter_count", "prefix_len", "input_len", "output_len", "step_output_len",
    "first_token_cost_time", "wait_time", "pd_sep", "cum_log_probs", "beam_responses",
    "softmax_probs", "reuse_len", "local_reuse_len", "remote_reuse_len", "memory_reuse_len",
    "prefill_total_reuse_len", "prefill_local_reuse_len", "prefill_remote_reuse_len",
    "prefill_memory_reuse_len", "decode_total_reuse_len", "decode_local_reuse_len",
    "decode_remote_reuse_len", "decode_memory_reuse_len", "multimodal_lengths",
    "speculative_draft_rounds", "speculative_accepted_tokens_per_pos", "role_addrs",
    "aux_string"}


@pytest.fixture(scope="module")
def srv():
    server = Server(STORIES)
    yield server
    assert server.stop() == 0, server.logs()


def sglang_greedy(srv, prompt, max_new_tokens, **extra):
    # RTP-LLM's skip_special_tokens defaults to false.
    r = requests.post(srv.url + "/generate", json={
        "text": prompt, "sampling_params": {"temperature": 0, "max_new_tokens": max_new_tokens,
                                            "skip_special_tokens": False, **extra}}, timeout=60)
    assert r.status_code == 200, r.text
    return r.json()


def rtp(srv, body, **kw):
    return requests.post(srv.url + "/", json=body, timeout=60, **kw)


def sse_events(response):
    events = []
    for line in response.iter_lines():
        if line.startswith(b"data:"):
            events.append(line[len(b"data:"):].strip())
    return events


def test_greedy_pipeline_response_matches_sglang(srv):
    ref = sglang_greedy(srv, PROMPT, 12)
    r = rtp(srv, {"prompt": PROMPT, "generate_config": {
        "max_new_tokens": 12, "temperature": 0, "return_output_ids": True,
        "return_input_ids": True}})
    assert r.status_code == 200, r.text
    out = r.json()
    assert set(out) == {"response", "finished", "aux_info", "output_ids", "input_ids"}
    assert out["response"] == ref["text"]
    assert out["finished"] is True
    assert out["output_ids"] == [ref["output_ids"]]  # RTP-LLM nests ids: [[...]]
    assert len(out["input_ids"]) == 1 and len(out["input_ids"][0]) == ref["meta_info"]["prompt_tokens"]
    aux = out["aux_info"]
    assert set(aux) == AUX_FIELDS
    assert aux["input_len"] == ref["meta_info"]["prompt_tokens"]
    assert aux["output_len"] == ref["meta_info"]["completion_tokens"] == 12
    assert aux["cost_time"] > 0
    # The prompt was just run through /generate: its prefix comes from the radix cache.
    assert aux["reuse_len"] > 0


def test_top_level_config_fields_and_top_k_1_are_greedy(srv):
    r = rtp(srv, {"prompt": PROMPT, "max_new_tokens": 8, "top_k": 1,
                  "generate_config": {"max_new_tokens": 3}})
    assert r.status_code == 200, r.text
    # Top-level GenerateConfig fields win over generate_config's (RequestExtractor).
    assert r.json()["response"] == sglang_greedy(srv, PROMPT, 8)["text"]


def test_aux_info_false_answers_an_empty_object(srv):
    r = rtp(srv, {"prompt": PROMPT, "generate_config": {"max_new_tokens": 2, "aux_info": False}})
    assert r.status_code == 200, r.text
    assert r.json()["aux_info"] == {}
    assert "output_ids" not in r.json()  # None fields are left out (exclude_none)


def test_stream_cumulative_ends_with_done_marker(srv):
    ref = sglang_greedy(srv, PROMPT, 10)
    with rtp(srv, {"prompt": PROMPT, "generate_config": {
            "max_new_tokens": 10, "temperature": 0, "yield_generator": True}},
             stream=True) as r:
        assert r.status_code == 200
        assert r.headers["content-type"].startswith("text/event-stream")
        events = sse_events(r)
    assert events[-1] == b"[done]"
    chunks = [json.loads(e) for e in events[:-1]]
    assert len(chunks) >= 2
    for before, after in zip(chunks, chunks[1:]):
        assert after["response"].startswith(before["response"])
    assert [c["finished"] for c in chunks] == [False] * (len(chunks) - 1) + [True]
    assert chunks[-1]["response"] == ref["text"]
    assert chunks[-1]["aux_info"]["output_len"] == 10
    assert chunks[-1]["aux_info"]["first_token_cost_time"] > 0


def test_incremental_stream_concatenates_to_the_text(srv):
    ref = sglang_greedy(srv, PROMPT, 10)
    with rtp(srv, {"prompt": PROMPT, "yield_generator": True, "generate_config": {
            "max_new_tokens": 10, "top_k": 1, "return_incremental": True,
            "return_output_ids": True}}, stream=True) as r:
        events = sse_events(r)
    chunks = [json.loads(e) for e in events[:-1]]
    assert "".join(c["response"] for c in chunks) == ref["text"]
    assert sum((c["output_ids"][0] for c in chunks), []) == ref["output_ids"]
    assert chunks[-1]["finished"] is True


def test_stream_field_streams_without_done_marker(srv):
    with rtp(srv, {"prompt": PROMPT, "stream": True,
                   "generate_config": {"max_new_tokens": 4, "top_k": 1}}, stream=True) as r:
        events = sse_events(r)
    assert b"[done]" not in events
    assert json.loads(events[-1])["finished"] is True


def test_incremental_without_streaming_is_refused(srv):
    r = rtp(srv, {"prompt": PROMPT, "generate_config": {"return_incremental": True}})
    assert r.status_code == 400
    body = r.json()
    assert body["error_code"] == 507 and body["error_code_str"] == "507_ERROR_INPUT_FORMAT_ERROR"
    assert "incremental" in body["message"]


def test_stop_words_str_trims_the_stop_text(srv):
    full = sglang_greedy(srv, PROMPT, 24)["text"]
    words = full.split()
    stop = words[len(words) // 2]
    cut = full[:full.index(stop)]
    r = rtp(srv, {"prompt": PROMPT, "generate_config": {
        "max_new_tokens": 24, "top_k": 1, "stop_words_str": [stop]}})
    assert r.status_code == 200, r.text
    assert r.json()["response"] == cut  # print_stop_words false: trimmed
    r = rtp(srv, {"prompt": PROMPT, "generate_config": {
        "max_new_tokens": 24, "top_k": 1, "stop_words_str": [stop], "print_stop_words": True}})
    assert r.json()["response"] == cut + stop


def test_prompt_batch_answers_response_batch(srv):
    prompts = [PROMPT, "The dog ran to the"]
    r = rtp(srv, {"prompt_batch": prompts, "generate_config": {"max_new_tokens": 6, "top_k": 1}})
    assert r.status_code == 200, r.text
    out = r.json()
    assert set(out) == {"response_batch"}
    assert [o["response"] for o in out["response_batch"]] == [
        sglang_greedy(srv, p, 6)["text"] for p in prompts]
    assert all(o["finished"] for o in out["response_batch"])


def test_prompt_batch_stream(srv):
    prompts = [PROMPT, "The dog ran to the"]
    with rtp(srv, {"prompt_batch": prompts, "yield_generator": True,
                   "generate_config": {"max_new_tokens": 5, "top_k": 1}}, stream=True) as r:
        events = sse_events(r)
    assert events[-1] == b"[done]"
    last = json.loads(events[-2])
    assert [o["response"] for o in last["response_batch"]] == [
        sglang_greedy(srv, p, 5)["text"] for p in prompts]
    assert all(o["finished"] for o in last["response_batch"])


def test_num_return_sequences_answers_multi_sequences(srv):
    r = rtp(srv, {"prompt": PROMPT, "generate_config": {
        "max_new_tokens": 5, "num_return_sequences": 3, "top_k": 1}})
    assert r.status_code == 200, r.text
    out = r.json()
    assert set(out) == {"response", "finished", "aux_info"}
    ref = sglang_greedy(srv, PROMPT, 5)["text"]
    assert out["response"] == [ref] * 3
    assert out["finished"] is True
    assert len(out["aux_info"]) == 3 and all(a["output_len"] == 5 for a in out["aux_info"])


def test_num_return_sequences_samples(srv):
    r = rtp(srv, {"prompt": PROMPT, "generate_config": {
        "max_new_tokens": 8, "num_return_sequences": 2, "temperature": 1.0, "random_seed": 7}})
    assert r.status_code == 200, r.text
    assert len(r.json()["response"]) == 2


@pytest.mark.parametrize("config, name", [
    ({"num_beams": 2}, "num_beams"),
    ({"return_all_hidden_states": True}, "return_all_hidden_states"),
    ({"return_logits": True, "num_return_sequences": 2}, "return_logits"),
    ({"output_hidden_states": True, "num_return_sequences": 2}, "return_hidden_states"),
    ({"logits_index": 0}, "logits_index"),
    ({"no_such_field": 1}, "no_such_field"),
    ({"stop_words_list": [[1, 2]]}, "stop_words_list"),
    ({"top_k": [1, 2]}, "top_k"),
])
def test_unsupported_or_unknown_config_field_is_refused(srv, config, name):
    r = rtp(srv, {"prompt": PROMPT, "generate_config": config})
    assert r.status_code == 400, r.text
    body = r.json()
    assert set(body) == {"error_code", "error_code_str", "message"}
    assert name in body["message"]


def test_return_cum_log_probs_sums_the_output_logprobs(srv):
    """aux_info.cum_log_probs: one number per sequence, the sum of its tokens' log-probabilities
    (as /generate's output_token_logprobs report them; those are checked against llama.cpp in
    tests/oracle)."""
    r = requests.post(srv.url + "/generate", timeout=60, json={
        "text": PROMPT, "return_logprob": True,
        "sampling_params": {"temperature": 0, "max_new_tokens": 8, "skip_special_tokens": False}})
    want = sum(lp for lp, _, _ in r.json()["meta_info"]["output_token_logprobs"])
    r = rtp(srv, {"prompt": PROMPT, "generate_config": {
        "max_new_tokens": 8, "top_k": 1, "return_cum_log_probs": True}})
    assert r.status_code == 200, r.text
    [got] = r.json()["aux_info"]["cum_log_probs"]
    assert got == pytest.approx(want, abs=1e-4)
    plain = rtp(srv, {"prompt": PROMPT, "generate_config": {"max_new_tokens": 2, "top_k": 1}})
    assert plain.json()["aux_info"]["cum_log_probs"] == []


def test_unknown_top_level_field_is_refused(srv):
    r = rtp(srv, {"prompt": PROMPT, "bogus": 1})
    assert r.status_code == 400
    assert "bogus" in r.json()["message"]


def test_default_valued_fields_are_accepted(srv):
    r = rtp(srv, {"prompt": PROMPT, "generate_config": {
        "max_new_tokens": 3, "num_beams": 1, "return_logits": False, "timeout_ms": -1,
        "top_k": 1}})
    assert r.status_code == 200, r.text


def test_single_id_stop_words_list_stops(srv):
    ref = sglang_greedy(srv, PROMPT, 12)
    stop_id = ref["output_ids"][5]
    r = rtp(srv, {"prompt": PROMPT, "generate_config": {
        "max_new_tokens": 12, "top_k": 1, "stop_words_list": [[stop_id]],
        "return_output_ids": True}})
    assert r.status_code == 200, r.text
    ids = r.json()["output_ids"][0]
    first = ref["output_ids"].index(stop_id)
    assert ids[:first] == ref["output_ids"][:first] and len(ids) <= first + 1


def test_lightllm_body_on_root_is_unchanged(srv):
    r = rtp(srv, {"inputs": PROMPT, "parameters": {"max_new_tokens": 4}})
    assert r.status_code == 200, r.text
    assert "generated_text" in r.json()


def open_stream(srv, rid):
    """A long streamed call, live once its first event arrived (the iterator is kept: dropping
    it may close the connection)."""
    r = requests.post(srv.url + "/generate", stream=True, timeout=120, json={
        "text": PROMPT, "rid": rid, "stream": True,
        "sampling_params": {"max_new_tokens": 200, "ignore_eos": True}})
    assert r.status_code == 200, r.text
    lines = r.iter_lines()
    next(lines)
    return r, lines


def test_concurrency_limit_refuses_calls_beyond_it():
    """RTP-LLM's --concurrency-limit: with two calls in flight, a third is refused on every route
    (RTP-LLM's CONCURRENCY_LIMIT_ERROR body on POST /), and served once one has ended. Engine
    steps are slowed by the test hook so the two stay in flight."""
    srv = Server(STORIES, "--skip-server-warmup", "--concurrency-limit", "2",
                 env={"RADIX_TEST_STEP_DELAY_MS": "20"})
    try:
        streams = [open_stream(srv, f"held-{i}") for i in range(2)]
        r = requests.post(srv.url + "/", json={"prompt": PROMPT,
                                               "generate_config": {"max_new_tokens": 2}},
                          timeout=60)
        assert r.status_code == 503, r.text
        assert r.json()["error_code_str"] == "409_CONCURRENCY_LIMIT_ERROR", r.text
        r = requests.post(srv.url + "/v1/completions", json={"prompt": PROMPT, "max_tokens": 2},
                          timeout=60)
        assert r.status_code == 503 and "--concurrency-limit" in r.text, r.text
        streams[0][0].close()  # aborts it; its slot frees when the abort is answered
        deadline = time.time() + 30
        while True:
            r = requests.post(srv.url + "/", json={"prompt": PROMPT,
                                                   "generate_config": {"max_new_tokens": 2}},
                              timeout=60)
            if r.status_code == 200:
                break
            assert r.status_code == 503 and time.time() < deadline, r.text
            time.sleep(0.05)
        streams[1][0].close()
        srv.assert_no_leak()
    finally:
        assert srv.stop() == 0, srv.logs()


def test_concurrency_with_block_makes_calls_wait_their_turn():
    srv = Server(STORIES, "--skip-server-warmup", "--concurrency-limit", "1",
                 "--concurrency-with-block", "true", env={"RADIX_TEST_STEP_DELAY_MS": "20"})
    try:
        held, _ = open_stream(srv, "held")
        with concurrent.futures.ThreadPoolExecutor(1) as pool:
            waiting = pool.submit(requests.post, srv.url + "/", timeout=120, json={
                "prompt": PROMPT, "generate_config": {"max_new_tokens": 2}})
            time.sleep(1.0)
            assert not waiting.done()  # it waits for the held call's slot
            held.close()
            r = waiting.result()
        assert r.status_code == 200 and r.json()["finished"] is True, r.text
        srv.assert_no_leak()
    finally:
        assert srv.stop() == 0, srv.logs()


def test_the_default_concurrency_limit_is_not_enforced_unless_given():
    srv = Server(STORIES, "--skip-server-warmup", env={"RADIX_TEST_STEP_DELAY_MS": "20"})
    try:
        streams = [open_stream(srv, f"free-{i}") for i in range(33)]  # one past the default
        info = srv.server_info()
        assert info["concurrency_limit"] == 32  # the argument's value, not enforced
        srv.log.flush()
        assert "Concurrency limit" not in srv.log_path.read_text()
        for r, _ in streams:
            r.close()
    finally:
        assert srv.stop() == 0, srv.logs()

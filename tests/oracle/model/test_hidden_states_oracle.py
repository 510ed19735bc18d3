"""return_hidden_states (SGLang's meta_info.hidden_states and the OpenAI routes' choice
.hidden_states) and return_entropy (meta_info.output_token_entropy) against transformers:
hidden_states[-1] and the logits of stories260K's HF folder run over the prompt and the generated
tokens (tests/fixtures/hidden_states_reference.py), float32 both sides."""
import json
import os
import subprocess
import sys

import numpy as np
import pytest
import requests
from model_oracle_helpers import STORIES_HF, require

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "../../fixtures"))
sys.path.insert(0, os.path.join(os.path.dirname(__file__), "../../e2e"))
from server_util import Server  # noqa: E402
from torch_env import torch_python  # noqa: E402

FIXTURES = os.path.join(os.path.dirname(__file__), "../../fixtures")
ATOL = 2e-4
PROMPTS = ["Once upon a time, there was a little girl named Lily.",
           "The cat sat on the mat and"]
MAX_NEW = 8


def reference(tmp_path, sequences):
    (tmp_path / "ids.json").write_text(json.dumps(sequences))
    proc = subprocess.run(
        [torch_python(), os.path.join(FIXTURES, "hidden_states_reference.py"), "--model",
         require(STORIES_HF), "--ids", str(tmp_path / "ids.json"), "--out", str(tmp_path)],
        capture_output=True, text=True, check=False, timeout=600)
    assert proc.returncode == 0, proc.stderr[-4000:]
    return [np.load(tmp_path / f"{i}.npy") for i in range(len(sequences))]


def generate(srv, text, **extra):
    body = {"text": text, "return_hidden_states": True,
            "sampling_params": {"temperature": 0, "max_new_tokens": MAX_NEW, "ignore_eos": True},
            **extra}
    r = requests.post(srv.url + "/generate", json=body, timeout=120)
    assert r.status_code == 200, r.text
    return r.json()


def rows(meta):
    """SGLang's list: the prompt's [n][hidden] block, then one [hidden] row per fed output token."""
    states = meta["hidden_states"]
    return np.concatenate([np.array(states[0], dtype=np.float32).reshape(-1, len(states[1]))]
                          + [np.array([r], dtype=np.float32) for r in states[1:]])


@pytest.fixture(scope="module")
def srv():
    server = Server(require(STORIES_HF), "--skip-server-warmup", "--enable-return-hidden-states",
                    "--served-model-name", "m", "--chunked-prefill-size", "16",
                    "--chat-template", "chatml")
    yield server
    server.assert_no_leak()
    assert server.stop() == 0, server.logs()


def test_generate_hidden_states_match_transformers(srv, tmp_path):
    # The second prompt's first call primes the prefix cache; asking again must still compute
    # (and report) every prompt position. The first prompt spans several 16-token chunks.
    outs = [generate(srv, p) for p in PROMPTS] + [generate(srv, PROMPTS[1])]
    for out in outs:
        meta = out["meta_info"]
        states = meta["hidden_states"]
        assert len(states[0]) == meta["prompt_tokens"]
        assert len(states) == 1 + meta["completion_tokens"] - 1
    seqs = []
    for p, out in zip(PROMPTS + [PROMPTS[1]], outs):
        tok = requests.post(srv.url + "/generate", json={
            "text": p, "sampling_params": {"max_new_tokens": 0}, "return_logprob": True,
            "logprob_start_len": 0}, timeout=60).json()
        prompt_ids = [t[1] for t in tok["meta_info"]["input_token_logprobs"]]
        seqs.append(prompt_ids + out["output_ids"][:-1])
    want = reference(tmp_path, seqs)
    for out, w in zip(outs, want):
        got = rows(out["meta_info"])
        assert got.shape == w.shape
        assert np.abs(got - w).max() < ATOL
    np.testing.assert_array_equal(rows(outs[1]["meta_info"]), rows(outs[2]["meta_info"]))


def test_batch_stream_and_openai_routes_agree(srv):
    base = generate(srv, PROMPTS[0])
    want = rows(base["meta_info"])
    # A batch with one item asking and one not.
    r = requests.post(srv.url + "/generate", json={
        "text": [PROMPTS[0], PROMPTS[1]], "return_hidden_states": [True, False],
        "sampling_params": {"temperature": 0, "max_new_tokens": MAX_NEW, "ignore_eos": True}},
        timeout=120)
    assert r.status_code == 200, r.text
    batch = r.json()
    np.testing.assert_allclose(rows(batch[0]["meta_info"]), want, atol=1e-5)
    assert "hidden_states" not in batch[1]["meta_info"]
    # Streamed: the last chunk carries the whole list.
    r = requests.post(srv.url + "/generate", json={
        "text": PROMPTS[0], "stream": True, "return_hidden_states": True,
        "sampling_params": {"temperature": 0, "max_new_tokens": MAX_NEW, "ignore_eos": True}},
        stream=True, timeout=120)
    chunks = [json.loads(line[6:]) for line in r.iter_lines(decode_unicode=True)
              if line.startswith("data: ") and line != "data: [DONE]"]
    assert all("hidden_states" not in c["meta_info"] for c in chunks[:-1])
    np.testing.assert_allclose(rows(chunks[-1]["meta_info"]), want, atol=1e-5)
    # OpenAI completions: the last fed output token's row, in the answer and in its own chunk.
    body = {"model": "m", "prompt": PROMPTS[0], "max_tokens": MAX_NEW, "temperature": 0,
            "ignore_eos": True, "return_hidden_states": True}
    r = requests.post(srv.url + "/v1/completions", json=body, timeout=120)
    assert r.status_code == 200, r.text
    np.testing.assert_allclose(r.json()["choices"][0]["hidden_states"], want[-1], atol=1e-5)
    r = requests.post(srv.url + "/v1/completions", json={**body, "stream": True}, stream=True,
                      timeout=120)
    chunks = [json.loads(line[6:]) for line in r.iter_lines(decode_unicode=True)
              if line.startswith("data: ") and line != "data: [DONE]"]
    with_states = [c for c in chunks if "hidden_states" in c["choices"][0]]
    assert len(with_states) == 1
    np.testing.assert_allclose(with_states[0]["choices"][0]["hidden_states"], want[-1], atol=1e-5)
    # One token generated: nothing fed back, an empty list (as SGLang).
    r = requests.post(srv.url + "/v1/completions", json={**body, "max_tokens": 1}, timeout=120)
    assert r.json()["choices"][0]["hidden_states"] == []
    r = requests.post(srv.url + "/v1/chat/completions", json={
        "model": "m", "messages": [{"role": "user", "content": "hi"}], "max_tokens": 4,
        "temperature": 0, "return_hidden_states": True}, timeout=120)
    assert r.status_code == 200, r.text
    assert len(r.json()["choices"][0]["hidden_states"]) in (0, len(want[-1]))


def test_refused_without_the_flag_and_for_bad_values():
    server = Server(require(STORIES_HF), "--skip-server-warmup", "--served-model-name", "m")
    try:
        r = requests.post(server.url + "/generate", json={"text": "a", "return_hidden_states": True},
                          timeout=30)
        assert r.status_code == 400 and "--enable-return-hidden-states" in r.text
        r = requests.post(server.url + "/v1/completions", json={
            "model": "m", "prompt": "a", "return_hidden_states": True}, timeout=30)
        assert r.status_code == 400 and "--enable-return-hidden-states" in r.text
        r = requests.post(server.url + "/generate", json={"text": "a", "return_hidden_states": 3},
                          timeout=30)
        assert r.status_code == 400 and "return_hidden_states" in r.text
        r = requests.post(server.url + "/generate", json={"text": "a",
                                                          "return_hidden_states": False},
                          timeout=30)
        assert r.status_code == 200
    finally:
        server.assert_no_leak()
        assert server.stop() == 0, server.logs()


def entropy(logits, temperature):
    z = logits.astype(np.float64) / temperature
    z -= z.max(axis=-1, keepdims=True)
    logp = z - np.log(np.exp(z).sum(axis=-1, keepdims=True))
    return -(np.exp(logp) * logp).sum(axis=-1)


def test_return_entropy_matches_transformers(srv, tmp_path):
    # meta_info.output_token_entropy: per output token, the entropy of softmax(logits / T) it was
    # drawn from (T = 1 for greedy), here against transformers' logits at the same positions.
    cases = [(PROMPTS[0], {"temperature": 0}), (PROMPTS[1], {"temperature": 0.7,
                                                             "sampling_seed": 3})]
    outs, seqs, prompt_lens = [], [], []
    for prompt, sampling in cases:
        r = requests.post(srv.url + "/generate", json={
            "text": prompt, "return_entropy": True, "return_logprob": True,
            "logprob_start_len": 0,
            "sampling_params": {"max_new_tokens": MAX_NEW, "ignore_eos": True, **sampling}},
            timeout=120)
        assert r.status_code == 200, r.text
        out = r.json()
        prompt_ids = [t[1] for t in out["meta_info"]["input_token_logprobs"]]
        outs.append(out)
        prompt_lens.append(len(prompt_ids))
        seqs.append(prompt_ids + out["output_ids"])
    reference(tmp_path, seqs)
    for i, ((_, sampling), out) in enumerate(zip(cases, outs)):
        got = np.array(out["meta_info"]["output_token_entropy"])
        assert len(got) == len(out["output_ids"]) == MAX_NEW
        logits = np.load(tmp_path / f"{i}.logits.npy")
        # Output token j is drawn from the logits at position prompt_len - 1 + j.
        rows = logits[prompt_lens[i] - 1:prompt_lens[i] - 1 + MAX_NEW]
        want = entropy(rows, sampling["temperature"] or 1.0)
        np.testing.assert_allclose(got, want, atol=2e-4, rtol=1e-4)
    # Streamed: the entropies arrive with their tokens; the last event holds them all.
    r = requests.post(srv.url + "/generate", json={
        "text": PROMPTS[0], "stream": True, "return_entropy": True,
        "sampling_params": {"max_new_tokens": MAX_NEW, "temperature": 0, "ignore_eos": True}},
        stream=True, timeout=120)
    chunks = [json.loads(line[6:]) for line in r.iter_lines(decode_unicode=True)
              if line.startswith("data: ") and line != "data: [DONE]"]
    np.testing.assert_allclose(chunks[-1]["meta_info"]["output_token_entropy"],
                               outs[0]["meta_info"]["output_token_entropy"], atol=1e-6)
    r = requests.post(srv.url + "/generate", json={"text": "a", "return_entropy": "yes"},
                      timeout=30)
    assert r.status_code == 400 and "return_entropy" in r.text


def rtp(srv, prompt, **config):
    """RTP-LLM's POST / (greedy, MAX_NEW tokens), returning the parsed answer or SSE events."""
    body = {"prompt": prompt, "generate_config": {
        "max_new_tokens": MAX_NEW, "top_k": 1, "ignore_eos": True, "return_input_ids": True,
        "return_output_ids": True, **config}}
    stream = config.get("yield_generator", False)
    r = requests.post(srv.url + "/", json=body, stream=stream, timeout=120)
    assert r.status_code == 200, r.text
    if not stream:
        return r.json()
    events = [line.split(":", 1)[1].strip() for line in r.iter_lines(decode_unicode=True)
              if line.startswith("data:")]
    assert events[-1] == "[done]"
    return [json.loads(e) for e in events[:-1]]


def test_rtp_logits_and_hidden_states_match_transformers(srv, tmp_path):
    """RTP-LLM's return_logits / return_hidden_states on POST /: [[row]] of the raw logits the
    last token was drawn from and of the final hidden state at the position that produced it
    (RTP-LLM's last-step rows); logits_index N gives the N-th token's row; hidden_states_cut_dim
    and normalized_hidden_states cut and L2-normalize. Against transformers at those positions."""
    out = rtp(srv, PROMPTS[0], return_logits=True, return_hidden_states=True)
    indexed = rtp(srv, PROMPTS[0], return_logits=True, logits_index=3)
    cut = rtp(srv, PROMPTS[0], return_hidden_states=True, hidden_states_cut_dim=16,
              normalized_hidden_states=True)
    events = rtp(srv, PROMPTS[0], return_logits=True, yield_generator=True,
                 return_incremental=True)
    prompt_ids, output_ids = out["input_ids"][0], out["output_ids"][0]
    assert len(output_ids) == MAX_NEW and indexed["output_ids"][0] == output_ids
    reference(tmp_path, [prompt_ids + output_ids[:-1]])
    hidden, logits = np.load(tmp_path / "0.npy"), np.load(tmp_path / "0.logits.npy")
    # Output token j (0-based) is drawn at position len(prompt) - 1 + j.
    last = len(prompt_ids) - 1 + MAX_NEW - 1
    assert np.array(out["logits"]).shape == (1, logits.shape[1])
    np.testing.assert_allclose(out["logits"][0], logits[last], atol=ATOL, rtol=1e-4)
    np.testing.assert_allclose(out["hidden_states"][0], hidden[last], atol=ATOL)
    np.testing.assert_allclose(indexed["logits"][0], logits[len(prompt_ids) - 1 + 2], atol=ATOL,
                               rtol=1e-4)
    assert "hidden_states" not in indexed and "logits" not in cut
    want = hidden[last][:16] / np.linalg.norm(hidden[last][:16])
    np.testing.assert_allclose(cut["hidden_states"][0], want, atol=1e-4)
    # Streamed: every event carries the row of its own latest token.
    seen = 0
    for event in events:
        seen += len(event["output_ids"][0])
        np.testing.assert_allclose(event["logits"][0], logits[len(prompt_ids) - 2 + seen],
                                   atol=ATOL, rtol=1e-4)
    assert seen == MAX_NEW
    # The raw row: a repetition penalty changes what is sampled, never the reported logits.
    penalized = rtp(srv, PROMPTS[0], return_logits=True, repetition_penalty=2.0, max_new_tokens=1)
    np.testing.assert_allclose(penalized["logits"][0], logits[len(prompt_ids) - 1], atol=ATOL,
                               rtol=1e-4)

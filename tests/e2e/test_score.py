"""POST /v1/score (SGLang's scoring API) on a causal LM, stories260K: every score is checked against
llama.cpp's (llama-cpp-python) next-token distribution after the same sequence, and against the
server's own /generate token_ids_logprob (a consistency oracle)."""
import math
import pathlib
import sys

import numpy as np
import pytest
import requests

from server_util import STORIES, Server

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[1] / "oracle/model"))
from test_llama_oracle import STORY, llama_cpp_logits, tokenize  # noqa: E402

LABELS = [7, 42, 100, 311]
DELIMITER = 13  # any in-vocabulary token serves as SGLang's multi-item delimiter
TOL = 2e-3  # absolute, on probabilities (our logits agree with llama.cpp's to ~1e-4)


def next_token_logprobs(tokens):
    """llama.cpp's log-softmax over the vocabulary after `tokens`."""
    logits = llama_cpp_logits(str(STORIES), tokens, n_ctx=256)[-1].astype(np.float64)
    m = logits.max()
    return logits - m - math.log(np.exp(logits - m).sum())


def softmax_scores(logprobs, temperature):
    x = np.array(logprobs) / temperature
    e = np.exp(x - x.max())
    return e / e.sum()


@pytest.fixture(scope="module")
def story():
    return tokenize(str(STORIES), STORY)


@pytest.fixture(scope="module")
def server():
    srv = Server(STORIES, "--skip-server-warmup", "--served-model-name", "stories")
    yield srv
    srv.assert_no_leak()
    assert srv.stop() == 0, srv.logs()


@pytest.fixture(scope="module")
def multi_item_server():
    srv = Server(STORIES, "--skip-server-warmup", "--multi-item-scoring-delimiter",
                 str(DELIMITER), "--disable-radix-cache", "--chunked-prefill-size", "-1")
    yield srv
    srv.assert_no_leak()
    assert srv.stop() == 0, srv.logs()


def score(srv, **body):
    return requests.post(srv.url + "/v1/score", json=body, timeout=60)


def test_token_id_scores_match_llama_cpp(server, story):
    query, items = story[:12], [story[12:15], story[20:29], [5, 6, 7]]
    r = score(server, query=query, items=items, label_token_ids=LABELS, model="stories",
              return_token_logprobs=True)
    assert r.status_code == 200, r.text
    body = r.json()
    assert body["object"] == "scoring" and body["model"] == "stories"
    assert len(body["scores"]) == 3
    for item, got, got_lp in zip(items, body["scores"], body["token_logprobs"]):
        ref = next_token_logprobs(query + item)
        want = [math.exp(ref[t]) for t in LABELS]
        assert np.allclose(got, want, atol=TOL, rtol=1e-2), (got, want)
        assert np.allclose(got_lp, [ref[t] for t in LABELS], atol=5e-3)
    assert body["usage"]["prompt_tokens"] == sum(len(query) + len(i) for i in items)
    assert body["pooled_hidden_states"] is None


def test_softmax_temperature_and_per_item_labels(server, story):
    query, items = story[:20], [story[20:24], story[30:33]]
    labels = [[7, 42], [100, 311, 2]]
    r = score(server, query=query, items=items, label_token_ids=labels, apply_softmax=True,
              temperature=0.5)
    assert r.status_code == 200, r.text
    for item, lab, got in zip(items, labels, r.json()["scores"]):
        ref = next_token_logprobs(query + item)
        want = softmax_scores([ref[t] for t in lab], 0.5)
        assert np.allclose(got, want, atol=TOL), (got, want)
        assert abs(sum(got) - 1.0) < 1e-9
    assert r.json()["token_logprobs"] is None


def test_text_items_are_tokenized_with_the_query(server):
    query, items = "Once upon a time, there was a little", [" girl", " dog who liked"]
    r = score(server, query=query, items=items, label_token_ids=LABELS)
    assert r.status_code == 200, r.text
    for item, got in zip(items, r.json()["scores"]):
        ref = next_token_logprobs(tokenize(str(STORIES), query + item))
        assert np.allclose(got, [math.exp(ref[t]) for t in LABELS], atol=TOL)
    # A single string item is one item.
    one = score(server, query=query, items=items[0], label_token_ids=LABELS).json()
    assert np.allclose(one["scores"][0], r.json()["scores"][0], atol=1e-6)


def test_item_first_puts_the_item_before_the_query(server, story):
    query, items = story[40:46], [story[:9], story[:4]]
    r = score(server, query=query, items=items, label_token_ids=LABELS, item_first=True)
    assert r.status_code == 200, r.text
    for item, got in zip(items, r.json()["scores"]):
        ref = next_token_logprobs(item + query)
        assert np.allclose(got, [math.exp(ref[t]) for t in LABELS], atol=TOL)


def test_scores_equal_generate_token_ids_logprob(server, story):
    query, item = story[:15], story[15:19]
    got = score(server, query=query, items=[item], label_token_ids=LABELS,
                return_token_logprobs=True).json()
    gen = requests.post(server.url + "/generate", json={
        "input_ids": query + item, "return_logprob": True, "token_ids_logprob": LABELS,
        "sampling_params": {"max_new_tokens": 1, "temperature": 0}}, timeout=60).json()
    want = [lp for lp, _tid, _text in gen["meta_info"]["output_token_ids_logprobs"][0]]
    assert np.allclose(got["token_logprobs"][0], want, atol=1e-6)


def test_multi_item_scoring_scores_each_item_after_the_query_and_delimiter(multi_item_server,
                                                                          story):
    query, items = story[:10], [story[10:13], story[25:31], story[3:4]]
    r = score(multi_item_server, query=query, items=items, label_token_ids=LABELS,
              apply_softmax=True)
    assert r.status_code == 200, r.text
    body = r.json()
    assert len(body["scores"]) == 3
    for item, got in zip(items, body["scores"]):
        ref = next_token_logprobs(query + [DELIMITER] + item)
        assert np.allclose(got, softmax_scores([ref[t] for t in LABELS], 1.0), atol=TOL)
    # SGLang's usage counts the fused sequence query D item1 D item2 D item3 D.
    assert body["usage"]["prompt_tokens"] == len(query) + sum(len(i) + 1 for i in items) + 1
    refused = score(multi_item_server, query=query, items=items, label_token_ids=LABELS,
                    item_first=True)
    assert refused.status_code == 400 and "item_first" in refused.json()["message"]


@pytest.mark.parametrize("body, fragment", [
    ({"query": [1], "items": [[2]]}, "label_token_ids is required"),
    ({"query": [1], "label_token_ids": [4]}, "items must be provided"),
    ({"query": [1], "items": [[2]], "label_token_ids": []}, "nonempty list"),
    ({"query": [1], "items": [[2]], "label_token_ids": [3, 3]}, "duplicate"),
    ({"query": [1], "items": [[2]], "label_token_ids": [-1]}, "nonnegative"),
    ({"query": [1], "items": [[2]], "label_token_ids": [100000]}, "out of vocabulary"),
    ({"query": [1], "items": [[2], [3]], "label_token_ids": [[4]]}, "one list per item"),
    ({"query": [1], "items": [[2]], "label_token_ids": [4], "temperature": 2.0},
     "temperature requires apply_softmax"),
    ({"query": [1], "items": [[2]], "label_token_ids": [4], "apply_softmax": True,
      "temperature": 0}, "temperature"),
    ({"query": "text", "items": [[2]], "label_token_ids": [4]}, "Invalid combination"),
    ({"query": [1], "items": [[2]], "label_token_ids": [4],
      "return_pooled_hidden_states": True}, "return_pooled_hidden_states"),
    ({"query": [1], "items": [[2]], "label_token_ids": [4],
      "score_extraction_token": "<s>"}, "score_extraction_token"),
    ({"query": [1], "items": [[2]], "label_token_ids": [4], "bogus": 1}, "bogus"),
    ({"query": [1], "items": [[2, 100000]], "label_token_ids": [4]}, "items"),
])
def test_bad_requests_are_400_and_the_server_keeps_serving(server, body, fragment):
    r = score(server, **body)
    assert r.status_code == 400, r.text
    assert fragment in r.json()["message"]
    ok = score(server, query=[1, 5], items=[[6]], label_token_ids=[4])
    assert ok.status_code == 200


def test_no_items_answer_no_scores(server):
    r = score(server, query=[1], items=[], label_token_ids=[4], return_token_logprobs=True)
    assert r.status_code == 200, r.text
    assert r.json()["scores"] == [] and r.json()["token_logprobs"] == []

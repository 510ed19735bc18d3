"""Cross-encoder rerankers and BERT classifiers on /v1/rerank, /classify and /v1/classify, against
transformers in the torch venv (tests/fixtures/cross_encoder_reference.py): BertForSequenceClassification
built from all-MiniLM-L6-v2 (with and without SGLang's sbert_ce_default_activation_function) and a
LlamaForSequenceClassification from stories260K used as a decoder reranker. The pairs are tokenized
by HF's tokenizer(query, document) in the reference (ids and token types), so our pair template,
segment embeddings, pooler and classifier are all checked by the scores."""
import json
import math
import os
import subprocess
import sys

import numpy as np
import pytest
import requests
from bert_reference import MINILM
from model_oracle_helpers import require

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "../../fixtures"))
sys.path.insert(0, os.path.join(os.path.dirname(__file__), "../../e2e"))
from server_util import SHARED, Server  # noqa: E402
from torch_env import torch_python  # noqa: E402

FIXTURES = os.path.join(os.path.dirname(__file__), "../../fixtures")
STORIES_HF = str(SHARED / "models/stories260K/hf")
ATOL = 2e-4
QUERIES = {
    "what is a cat?": ["A cat is a small domesticated carnivorous mammal.",
                       "The stock market fell sharply today.",
                       "Les chats dorment beaucoup.",
                       "Cats purr when they are content, and they hunt mice."],
    "Once upon a time": ["there was a little girl named Lily.", "The end.",
                         "She liked to play in the park with her dog."],
    "¿Dónde está la biblioteca?": ["La biblioteca está cerca del parque.", "猫はかわいい。"],
}
PAIRS = [[q, d] for q, docs in QUERIES.items() for d in docs]


@pytest.fixture(scope="module")
def ref(tmp_path_factory):
    out = tmp_path_factory.mktemp("cross-encoders")
    (out / "pairs.json").write_text(json.dumps(PAIRS))
    proc = subprocess.run(
        [torch_python(), os.path.join(FIXTURES, "cross_encoder_reference.py"), "--bert",
         require(MINILM), "--llama", require(STORIES_HF), "--out", str(out), "--pairs",
         str(out / "pairs.json")],
        capture_output=True, text=True, check=False, timeout=900)
    assert proc.returncode == 0, proc.stderr[-4000:]
    return out, json.loads((out / "reference.json").read_text())


def expected_scores(rows, sigmoid):
    logits = [r["logits"][0] for r in rows]
    return [1 / (1 + math.exp(-x)) if sigmoid else x for x in logits]


@pytest.mark.parametrize("name, sigmoid", [("bert-ce", False), ("bert-ce-sigmoid", True),
                                           ("llama-ce", False)])
def test_rerank_scores_match_transformers(ref, name, sigmoid):
    folder, reference = ref
    rows = reference[name]["pairs"]
    srv = Server(str(folder / name), "--skip-server-warmup")
    try:
        at = 0
        for query, docs in QUERIES.items():
            want = expected_scores(rows[at:at + len(docs)], sigmoid)
            r = requests.post(srv.url + "/v1/rerank", json={"query": query, "documents": docs},
                              timeout=120)
            assert r.status_code == 200, r.text
            got = r.json()
            assert sorted(item["index"] for item in got) == list(range(len(docs)))
            for item in got:
                i = item["index"]
                assert abs(item["score"] - want[i]) < ATOL, (name, item, want)
                assert item["document"] == docs[i]
                assert item["meta_info"]["prompt_tokens"] == len(rows[at + i]["ids"])
            assert [x["score"] for x in got] == sorted((x["score"] for x in got), reverse=True)
            top = requests.post(srv.url + "/v1/rerank", json={
                "query": query, "documents": docs, "top_n": 1, "return_documents": False},
                timeout=120).json()
            assert len(top) == 1 and "document" not in top[0]
            assert top[0]["index"] == int(np.argmax(want))
            at += len(docs)
        srv.assert_no_leak()
    finally:
        assert srv.stop() == 0, srv.logs()


def test_bert_classifier_matches_transformers(ref):
    folder, reference = ref
    singles = np.array(reference["bert-cls3"]["singles"])
    docs = [d for _, d in PAIRS]
    srv = Server(str(folder / "bert-cls3"), "--skip-server-warmup", "--served-model-name", "c")
    try:
        native = requests.post(srv.url + "/classify", json={"text": docs}, timeout=120).json()
        got = np.array([item["embedding"] for item in native])
        assert np.allclose(got, singles, atol=ATOL), np.abs(got - singles).max()
        body = requests.post(srv.url + "/v1/classify", json={"input": docs}, timeout=120).json()
        labels = ["negative", "neutral", "positive"]
        for item, logits in zip(body["data"], singles):
            e = np.exp(logits - logits.max())
            assert np.allclose(item["probs"], e / e.sum(), atol=1e-4)
            assert item["label"] == labels[int(np.argmax(logits))]
        # /v1/score on a classification model (SGLang's SequenceClassification scoring): each
        # item's class logits, or their softmax.
        r = requests.post(srv.url + "/v1/score", json={"items": docs}, timeout=120)
        assert r.status_code == 200, r.text
        assert np.allclose(r.json()["scores"], singles, atol=ATOL)
        assert r.json()["usage"]["prompt_tokens"] == native_tokens(native)
        r = requests.post(srv.url + "/v1/score", json={"items": docs[:3], "apply_softmax": True,
                                                       "temperature": 2.0}, timeout=120)
        for got_row, logits in zip(r.json()["scores"], singles[:3]):
            e = np.exp((logits - logits.max()) / 2.0)
            assert np.allclose(got_row, e / e.sum(), atol=1e-4)
        for bad, fragment in (({"items": docs[:1], "label_token_ids": [1]}, "label_token_ids"),
                              ({"items": docs[:1], "return_token_logprobs": True}, "CausalLM")):
            r = requests.post(srv.url + "/v1/score", json=bad, timeout=60)
            assert r.status_code == 400 and fragment in r.json()["message"], r.text
        # A 3-label classifier has no single relevance logit to rank by... SGLang ranks by the
        # first; so do we.
        r = requests.post(srv.url + "/v1/rerank", json={"query": PAIRS[0][0],
                                                        "documents": QUERIES[PAIRS[0][0]]},
                          timeout=120)
        assert r.status_code == 200, r.text
        want = [row["logits"][0] for row in reference["bert-cls3"]["pairs"][:4]]
        for item in r.json():
            assert abs(item["score"] - want[item["index"]]) < ATOL
    finally:
        assert srv.stop() == 0, srv.logs()


def native_tokens(native):
    return sum(item["meta_info"]["prompt_tokens"] for item in native)


def test_rerank_on_an_embedding_model_is_refused():
    srv = Server(require(MINILM), "--skip-server-warmup")
    try:
        r = requests.post(srv.url + "/v1/rerank", json={"query": "q", "documents": ["d"]},
                          timeout=60)
        assert r.status_code == 400 and "cross-encoder" in r.json()["message"]
        r = requests.post(srv.url + "/v1/score", json={"items": ["d"]}, timeout=60)
        assert r.status_code == 400 and "embedding model" in r.json()["message"]
    finally:
        assert srv.stop() == 0, srv.logs()

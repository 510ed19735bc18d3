"""Decoders served as embedders, classifiers and reward models, against PyTorch references built by
tests/fixtures/pooling_reference.py in the torch venv from stories260K's HF folder:
sentence-transformers' own encode() for embedders (last-token + Normalize, as Qwen3-Embedding
ships, and mean pooling), transformers' LlamaForSequenceClassification for classifiers and reward
models. Texts: the embedding oracle's multilingual corpus (tests/data/embedding_corpus.json)."""
import concurrent.futures
import json
import os
import subprocess
import sys

import numpy as np
import pytest
import requests
from bert_reference import cosines, load_corpus
from model_oracle_helpers import require

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "../../fixtures"))
sys.path.insert(0, os.path.join(os.path.dirname(__file__), "../../e2e"))
from server_util import BUILD, SHARED, STORIES, Server  # noqa: E402
from torch_env import torch_python  # noqa: E402

FIXTURES = os.path.join(os.path.dirname(__file__), "../../fixtures")
STORIES_HF = str(SHARED / "models/stories260K/hf")
MIN_COSINE = 0.99999
ATOL = 2e-4  # float32 against float32 (logits of magnitude ~10)


@pytest.fixture(scope="module")
def ref(tmp_path_factory):
    """The model folders and reference outputs, for the corpus texts that fit stories260K's 512
    positions with room to spare."""
    out = tmp_path_factory.mktemp("pooling")
    texts = [t for t in load_corpus() if len(t.encode()) <= 300]
    (out / "texts.json").write_text(json.dumps(texts))
    proc = subprocess.run(
        [torch_python(), os.path.join(FIXTURES, "pooling_reference.py"), "--base",
         require(STORIES_HF), "--out", str(out), "--texts", str(out / "texts.json")],
        capture_output=True, text=True, check=False, timeout=900)
    assert proc.returncode == 0, proc.stderr[-4000:]
    ids = json.loads((out / "ids.json").read_text())
    keep = [i for i, x in enumerate(ids) if len(x) <= 400]
    assert len(keep) >= 100, len(keep)
    return {"dir": out, "texts": [texts[i] for i in keep], "ids": [ids[i] for i in keep],
            **{name: np.load(out / f"{name}.npy")[keep]
               for name in ("st-last", "st-mean", "classifier", "reward")}}


def serve(model, *args):
    return Server(model, "--skip-server-warmup", "--served-model-name", "m", *args)


def embed(srv, inputs):
    r = requests.post(srv.url + "/v1/embeddings", json={"model": "m", "input": inputs}, timeout=300)
    assert r.status_code == 200, r.text
    body = r.json()
    return np.array([d["embedding"] for d in sorted(body["data"], key=lambda d: d["index"])]), body


def stop(srv):
    srv.assert_no_leak()
    assert srv.stop() == 0, srv.logs()


@pytest.mark.parametrize("model, args", [
    ("hf", ["--is-embedding"]),          # a *ForCausalLM folder with --is-embedding
    ("gguf", ["--is-embedding"]),        # the same model as GGUF
    ("st-last", []),                     # a sentence-transformers folder (headless LlamaModel)
])
def test_last_token_embedders_match_sentence_transformers(ref, model, args):
    path = {"hf": STORIES_HF, "gguf": str(STORIES)}.get(model, str(ref["dir"] / model))
    srv = serve(path, *args)
    try:
        got, body = embed(srv, ref["texts"])  # one call: the inputs batch together
        want = ref["st-last"]
        assert got.shape == want.shape
        assert cosines(got, want).min() >= MIN_COSINE
        assert np.abs(got - want).max() < 1e-4
        assert np.allclose(np.linalg.norm(got, axis=1), 1.0, atol=1e-5)
        assert body["usage"]["prompt_tokens"] == sum(len(i) for i in ref["ids"])
        # Alone, and from token ids, each input gets what it got in the batch.
        for i in (0, 7, len(ref["texts"]) - 1):
            alone, _ = embed(srv, ref["texts"][i])
            assert cosines(alone[0], want[i]) >= MIN_COSINE
            from_ids, _ = embed(srv, ref["ids"][i])
            assert np.abs(from_ids[0] - alone[0]).max() < 1e-6
        info = requests.get(srv.url + "/get_model_info", timeout=10).json()
        assert info["is_generation"] is False
        gen = requests.post(srv.url + "/generate", json={"text": "Hi"}, timeout=10)
        assert gen.status_code == 400 and "--is-embedding" in gen.text
        cls = requests.post(srv.url + "/v1/classify", json={"input": "Hi"}, timeout=10)
        assert cls.status_code == 400 and "classification model" in cls.text
    finally:
        stop(srv)


def test_mean_pooling_folder_matches_sentence_transformers(ref):
    srv = serve(str(ref["dir"] / "st-mean"))
    try:
        got, _ = embed(srv, ref["texts"])
        assert cosines(got, ref["st-mean"]).min() >= MIN_COSINE
        assert np.abs(got - ref["st-mean"]).max() < 1e-4
    finally:
        stop(srv)


def softmax(x):
    e = np.exp(x - x.max(axis=-1, keepdims=True))
    return e / e.sum(axis=-1, keepdims=True)


def test_classifier_matches_transformers(ref):
    srv = serve(str(ref["dir"] / "classifier"))
    try:
        texts, want = ref["texts"], ref["classifier"]
        native = requests.post(srv.url + "/classify", json={"text": texts}, timeout=300).json()
        got = np.array([item["embedding"] for item in native])
        assert np.allclose(got, want, atol=ATOL, rtol=1e-4), np.abs(got - want).max()
        assert [item["meta_info"]["prompt_tokens"] for item in native] == \
            [len(i) for i in ref["ids"]]
        r = requests.post(srv.url + "/v1/classify", json={"model": "m", "input": texts[:40]},
                          timeout=300)
        assert r.status_code == 200, r.text
        body = r.json()
        labels = ["negative", "neutral", "positive"]
        for item, logits in zip(body["data"], want[:40]):
            assert np.allclose(item["probs"], softmax(logits), atol=1e-4)
            assert item["label"] == labels[int(np.argmax(logits))]
            assert item["num_classes"] == 3
        assert body["object"] == "list" and body["model"] == "m"
        assert body["usage"]["prompt_tokens"] == sum(len(i) for i in ref["ids"][:40])
        one = requests.post(srv.url + "/v1/classify", json={"input": ref["ids"][3]}, timeout=60)
        assert np.allclose(one.json()["data"][0]["probs"], softmax(want[3]), atol=1e-4)
        for bad, fragment in (({"input": ""}, "empty"), ({"input": ["a", " "]}, "index 1"),
                              ({"input": "a", "top_k": 2}, "top_k")):
            r = requests.post(srv.url + "/v1/classify", json=bad, timeout=10)
            assert r.status_code == 400 and fragment in r.json()["message"], r.text
    finally:
        stop(srv)


def test_reward_model_scores_match_transformers(ref):
    srv = serve(str(ref["dir"] / "reward"), "--use_reward_model")
    try:
        # LightLLM's route, body as its docs show it.
        r = requests.post(srv.url + "/get_score", json={
            "chat": ref["texts"][5], "parameters": {"frequency_penalty": 1}}, timeout=60)
        assert r.status_code == 200, r.text
        assert abs(r.json()["score"] - float(ref["reward"][5][0])) < ATOL
        assert r.json()["prompt_tokens"] == len(ref["ids"][5])
        bad = requests.post(srv.url + "/get_score", json={"text": "x"}, timeout=10)
        assert bad.status_code == 400 and "text" in bad.json()["message"]
        with concurrent.futures.ThreadPoolExecutor(16) as pool:
            results = list(pool.map(
                lambda t: requests.post(srv.url + "/classify", json={"text": t}, timeout=300),
                ref["texts"][:64]))
        got = np.array([r.json()["embedding"] for r in results])
        assert got.shape == (64, 1)
        assert np.allclose(got, ref["reward"][:64], atol=ATOL, rtol=1e-4)
    finally:
        stop(srv)


def test_use_reward_model_needs_a_one_label_head(ref):
    done = subprocess.run([str(BUILD / "radixserve"), "--model-path", str(ref["dir"] / "classifier"),
                           "--use_reward_model", "--port", "1"],
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 2, done.stderr
    assert "--use_reward_model" in done.stderr and "reward model" in done.stderr


def test_matryoshka_dimensions(ref, tmp_path):
    """dimensions truncates and renormalizes when config.json declares Matryoshka embeddings
    (SGLang's matryoshka_dimensions / is_matryoshka), and is a 400 otherwise."""
    import shutil

    folder = tmp_path / "mrl"
    shutil.copytree(ref["dir"] / "st-last", folder)
    config = json.loads((folder / "config.json").read_text())
    config["matryoshka_dimensions"] = [16, 32]
    (folder / "config.json").write_text(json.dumps(config))
    srv = serve(str(folder))
    try:
        texts = ref["texts"][:20]
        r = requests.post(srv.url + "/v1/embeddings",
                          json={"input": texts, "dimensions": 16}, timeout=120)
        assert r.status_code == 200, r.text
        got = np.array([d["embedding"] for d in r.json()["data"]])
        want = ref["st-last"][:20, :16]
        want = want / np.linalg.norm(want, axis=1, keepdims=True)
        assert got.shape == (20, 16)
        assert np.abs(got - want).max() < 1e-4
        bad = requests.post(srv.url + "/v1/embeddings", json={"input": "x", "dimensions": 8},
                            timeout=60)
        assert bad.status_code == 400 and "only supports [16, 32]" in bad.json()["message"]
    finally:
        stop(srv)
    plain = serve(str(ref["dir"] / "st-last"))
    try:
        r = requests.post(plain.url + "/v1/embeddings", json={"input": "x", "dimensions": 16},
                          timeout=60)
        assert r.status_code == 400 and "does not support matryoshka" in r.json()["message"]
    finally:
        stop(plain)

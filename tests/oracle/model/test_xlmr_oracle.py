"""XLM-RoBERTa (multilingual-e5 / bge-m3 embedders, bge-reranker-v2-m3 cross-encoders) against
transformers, on a small model family made as real ones are (tests/fixtures/xlmr_reference.py,
torch venv): a SentencePiece unigram tokenizer trained with nmt_nfkc and converted by
transformers' XLMRobertaConverter (Precompiled charsmap normalizer, Metaspace, Unigram), random
weights. Token ids equal HF `tokenizers` (the embedding corpus and the tokenizer oracle's corpus);
embeddings (radix_embed, and /v1/embeddings on a server) agree with the transformers forward
(cosine >= 0.99999); /v1/rerank scores equal XLMRobertaForSequenceClassification's logits. The
same for RoBERTa (byte-level BPE, CLS pooling) on its own small model."""
import json
import os
import subprocess
import sys

import numpy as np
import pytest
import requests
from bert_reference import load_corpus
from model_oracle_helpers import radix_logits_binary

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "../../fixtures"))
sys.path.insert(0, os.path.join(os.path.dirname(__file__), "../../e2e"))
sys.path.insert(0, os.path.join(os.path.dirname(__file__), "../tokenizer"))
from server_util import Server  # noqa: E402
from torch_env import torch_python  # noqa: E402

FIXTURES = os.path.join(os.path.dirname(__file__), "../../fixtures")
MIN_COSINE = 0.99999
ATOL = 2e-4
PAIRS = [["what is a cat?", "A cat is a small domesticated carnivorous mammal."],
         ["what is a cat?", "The stock market fell sharply today."],
         ["what is a cat?", "Les chats dorment beaucoup."],
         ["¿Dónde está la biblioteca?", "La biblioteca está cerca del parque."],
         ["¿Dónde está la biblioteca?", "猫はかわいい。 ＦＵＬＬ ｗｉｄｔｈ ①"]]


@pytest.fixture(scope="module")
def family(tmp_path_factory):
    out = tmp_path_factory.mktemp("xlmr")
    (out / "texts.json").write_text(json.dumps(load_corpus(), ensure_ascii=False), encoding="utf-8")
    (out / "pairs.json").write_text(json.dumps(PAIRS, ensure_ascii=False), encoding="utf-8")
    proc = subprocess.run(
        [torch_python(), os.path.join(FIXTURES, "xlmr_reference.py"), "--texts",
         str(out / "texts.json"), "--pairs", str(out / "pairs.json"), "--out", str(out / "fx")],
        capture_output=True, text=True, check=False, timeout=900)
    assert proc.returncode == 0, proc.stderr[-4000:]
    fx = out / "fx"
    return out, fx, json.loads((fx / "reference.json").read_text())


def test_unigram_tokenizer_matches_hf_tokenizers(family):
    from tokenizers import Tokenizer

    import tokenizer_corpus
    from tokenizer_oracle_util import RadixTokenize
    _, fx, _ = family
    texts = load_corpus()
    for name in dir(tokenizer_corpus):
        value = getattr(tokenizer_corpus, name)
        if name.isupper() and isinstance(value, (list, tuple)) and \
                all(isinstance(x, str) for x in value):
            texts += list(value)
    # Graphemes the charsmap rewrites whole or char by char, ligatures, full width, spacing.
    texts += ["e\u0301cole ａ\u0301", "👨‍👩‍👧 family 🇫🇷", "ﬁnance ﬀ ㍿ ①②", "  lead  and   trail  ",
              "\u1100\u1161\u11a8 한국어", "<s> tags </s> <unk> <mask>", "x" * 300, ""]
    ref = Tokenizer.from_file(str(fx / "tokenizer.json"))
    ours = RadixTokenize(fx / "tokenizer.json")
    try:
        got = ours.encode(texts, add_special_tokens=True)
    finally:
        ours.close()
    bad = [(t[:40], g[:12], ref.encode(t).ids[:12]) for t, g in zip(texts, got)
           if g != ref.encode(t).ids]
    assert len(texts) > 400 and not bad, bad[:3]


def radix_embed(out, folder):
    emb_file = out / (folder.name + ".f32")
    proc = subprocess.run(
        [radix_logits_binary().replace("radix_logits", "radix_embed"), "--model", str(folder),
         "--texts-file", str(out / "texts.json"), "--out", str(emb_file), "--threads", "2"],
        capture_output=True, text=True, check=False)
    assert proc.returncode == 0, proc.stderr
    report = json.loads(proc.stdout)
    return report, np.fromfile(emb_file, dtype=np.float32).reshape(report["n"], report["dim"])


def assert_close(emb, want, texts):
    cos = (emb * want).sum(-1) / np.linalg.norm(emb, axis=-1) / np.linalg.norm(want, axis=-1)
    worst = int(np.argmin(cos))
    assert cos.min() >= MIN_COSINE, (worst, texts[worst][:60], float(cos.min()))


def test_embeddings_match_transformers(family):
    out, fx, reference = family
    report, emb = radix_embed(out, fx / "embed")
    assert report["architecture"] == "XLMRobertaModel"
    assert (report["pooling"], report["normalize"]) == ("mean", True)
    want_ids = [t["ids"] for t in reference["texts"]]
    assert report["ids"] == want_ids
    assert max(len(i) for i in want_ids) > 512  # positions past XLM-R's usual 512 too
    assert_close(emb, np.array([t["embedding"] for t in reference["texts"]]), load_corpus())


def test_roberta_matches_transformers(family):
    out, fx, reference = family
    report, emb = radix_embed(out, fx / "roberta")
    assert report["architecture"] == "RobertaModel"
    assert (report["pooling"], report["normalize"]) == ("cls", False)
    assert report["ids"] == [t["ids"] for t in reference["roberta"]]
    want = np.array([t["cls"] for t in reference["roberta"]])
    assert_close(emb, want, load_corpus())
    np.testing.assert_allclose(np.linalg.norm(emb, axis=-1), np.linalg.norm(want, axis=-1),
                               rtol=1e-4)


def test_served_embeddings_and_rerank_match_transformers(family):
    _, fx, reference = family
    texts = load_corpus()[:24]
    srv = Server(str(fx / "embed"), "--skip-server-warmup")
    try:
        r = requests.post(srv.url + "/v1/embeddings", json={"input": texts, "model": "x"},
                          timeout=120)
        assert r.status_code == 200, r.text
        got = np.array([d["embedding"] for d in r.json()["data"]])
        want = np.array([t["embedding"] for t in reference["texts"][:24]])
        assert np.abs((got * want).sum(-1) - 1).max() < 1 - MIN_COSINE
        assert r.json()["usage"]["prompt_tokens"] == \
            sum(len(t["ids"]) for t in reference["texts"][:24])
        srv.assert_no_leak()
    finally:
        assert srv.stop() == 0, srv.logs()
    srv = Server(str(fx / "rerank"), "--skip-server-warmup")
    try:
        queries = {}
        for i, (q, d) in enumerate(PAIRS):
            queries.setdefault(q, []).append((i, d))
        for query, docs in queries.items():
            r = requests.post(srv.url + "/v1/rerank",
                              json={"query": query, "documents": [d for _, d in docs]}, timeout=120)
            assert r.status_code == 200, r.text
            for item in r.json():
                row = reference["pairs"][docs[item["index"]][0]]
                assert abs(item["score"] - row["logit"]) < ATOL, (query, item, row["logit"])
                assert item["meta_info"]["prompt_tokens"] == len(row["ids"])
        srv.assert_no_leak()
    finally:
        assert srv.stop() == 0, srv.logs()

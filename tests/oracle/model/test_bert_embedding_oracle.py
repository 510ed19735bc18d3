"""all-MiniLM-L6-v2 through radix_embed against independent references: token ids equal HF
`tokenizers`, embeddings agree with the NumPy BERT forward in bert_reference.py (cosine
>= 0.99999) on tests/data/embedding_corpus.json (200 sentences: 25+ languages, 3 to 413 tokens,
punctuation, emoji, code), whether the sentences share one batch or go alone."""
import json
import subprocess

import numpy as np
import pytest

from bert_reference import MINILM, NumpyBert, cosines, hf_tokenizer, load_corpus
from model_oracle_helpers import radix_logits_binary, require

MIN_COSINE = 0.99999


def radix_embed_binary():
    return radix_logits_binary().replace("radix_logits", "radix_embed")


def run_radix_embed(tmp_path, texts, *extra):
    tmp_path.mkdir(parents=True, exist_ok=True)
    texts_file = tmp_path / "texts.json"
    texts_file.write_text(json.dumps(texts, ensure_ascii=False), encoding="utf-8")
    out = tmp_path / "emb.f32"
    proc = subprocess.run([radix_embed_binary(), "--model", MINILM, "--texts-file", str(texts_file),
                           "--out", str(out), "--threads", "2", *extra],
                          capture_output=True, text=True, check=False)
    assert proc.returncode == 0, proc.stderr
    report = json.loads(proc.stdout)
    emb = np.fromfile(out, dtype=np.float32).reshape(report["n"], report["dim"])
    return report, emb


@pytest.fixture(scope="module")
def corpus():
    require(MINILM)
    return load_corpus()


@pytest.fixture(scope="module")
def reference(corpus):
    tok = hf_tokenizer(MINILM)
    ids = [tok.encode(text).ids for text in corpus]
    bert = NumpyBert(MINILM)
    return ids, np.stack([bert.embed(i) for i in ids])


def test_corpus_is_the_advertised_mix(corpus, reference):
    ids, _ = reference
    lengths = [len(i) for i in ids]
    assert len(corpus) == 200
    assert min(lengths) <= 5 and max(lengths) > 256
    assert any(ord(ch) > 0x3000 for text in corpus for ch in text)  # CJK among others


@pytest.fixture(scope="module")
def batched(tmp_path_factory, corpus):
    return run_radix_embed(tmp_path_factory.mktemp("batched"), corpus)


def test_token_ids_equal_hf_tokenizers(corpus, reference, batched):
    ids, _ = reference
    report, _ = batched
    mismatches = [(corpus[i], report["ids"][i], ids[i])
                  for i in range(len(corpus)) if report["ids"][i] != ids[i]]
    assert not mismatches, mismatches[:3]


def test_pooling_follows_the_sentence_transformers_files(batched):
    report, _ = batched
    assert report["architecture"] == "BertModel"
    assert (report["pooling"], report["normalize"]) == ("mean", True)


def _check(emb, expected, corpus):
    cos = cosines(emb, expected)
    worst = int(np.argmin(cos))
    assert cos.min() >= MIN_COSINE, (worst, corpus[worst][:80], float(cos.min()))
    np.testing.assert_allclose(np.linalg.norm(emb, axis=-1), 1.0, atol=1e-5)


def test_embeddings_in_one_batch_agree_with_numpy_bert(corpus, reference, batched):
    _check(batched[1], reference[1], corpus)


def test_embeddings_alone_agree_with_numpy_bert(tmp_path, corpus, reference):
    _, emb = run_radix_embed(tmp_path, corpus, "--batch", "1")
    _check(emb, reference[1], corpus)


def test_reference_erf_gelu_is_not_the_tanh_approximation():
    """The reference's erf is accurate enough to tell the two GELUs apart."""
    import math

    from bert_reference import _erf

    x = np.linspace(-6, 6, 2001)
    exact = np.array([math.erf(v) for v in x])
    assert np.abs(_erf(x) - exact).max() < 2e-7
    gelu = 0.5 * x * (1 + exact)
    tanh_gelu = 0.5 * x * (1 + np.tanh(math.sqrt(2 / math.pi) * (x + 0.044715 * x ** 3)))
    assert np.abs(gelu - tanh_gelu).max() > 1e-4

"""Embedding server (all-MiniLM-L6-v2, an encoder, so --is-embedding is implied) driven by the
official openai SDK and plain HTTP, checked against the NumPy BERT reference of the model oracle
(tests/oracle/model/bert_reference.py) and token counts from HF `tokenizers`."""
import base64
import concurrent.futures
import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "../oracle/model"))
from bert_reference import MINILM, NumpyBert, cosines, hf_tokenizer, load_corpus  # noqa: E402

import numpy as np  # noqa: E402
import openai  # noqa: E402
import pytest  # noqa: E402
import requests  # noqa: E402

from server_util import STORIES, Server  # noqa: E402

MIN_COSINE = 0.99999
# A slice of the oracle corpus: several languages, emoji, code, one long paragraph.
TEXTS = [t for i, t in enumerate(load_corpus()) if i % 9 == 0][:20]


@pytest.fixture(scope="module")
def reference():
    if not os.path.isdir(MINILM):
        pytest.fail(f"{MINILM} is absent (scripts/fetch_models fetches it)")
    return NumpyBert(MINILM), hf_tokenizer(MINILM)


@pytest.fixture(scope="module")
def server():
    s = Server(MINILM, "--is-embedding", "--served-model-name", "minilm")
    yield s
    s.stop()


@pytest.fixture(scope="module")
def client(server):
    return openai.OpenAI(base_url=server.url + "/v1", api_key="unused")


def expected(reference, texts):
    bert, tok = reference
    ids = [tok.encode(t).ids for t in texts]
    return ids, np.stack([bert.embed(i) for i in ids])


def test_sdk_float_embeddings_match_numpy_bert(client, reference):
    ids, want = expected(reference, TEXTS)
    resp = client.embeddings.create(model="minilm", input=TEXTS, encoding_format="float")
    got = np.array([d.embedding for d in sorted(resp.data, key=lambda d: d.index)])
    assert got.shape == want.shape
    assert cosines(got, want).min() >= MIN_COSINE
    assert resp.usage.prompt_tokens == sum(len(i) for i in ids)
    assert resp.model == "minilm"


def test_sdk_base64_embeddings_match_numpy_bert(client, reference):
    _, want = expected(reference, TEXTS[:3])
    # Without encoding_format the SDK asks for base64 and decodes it itself.
    decoded = client.embeddings.create(model="minilm", input=TEXTS[:3])
    got = np.array([d.embedding for d in decoded.data])
    assert cosines(got, want).min() >= MIN_COSINE
    raw = client.embeddings.create(model="minilm", input=TEXTS[:3], encoding_format="base64")
    got = np.stack([np.frombuffer(base64.b64decode(d.embedding), dtype="<f4") for d in raw.data])
    assert cosines(got, want).min() >= MIN_COSINE


def test_langchain_openai_embeddings(server, reference):
    """LangChain's OpenAIEmbeddings, as a RAG stack points it at an OpenAI-compatible server
    (check_embedding_ctx_length=False: its default pre-tokenizes with tiktoken files fetched from
    the internet, which no server-side setting can change)."""
    from langchain_openai import OpenAIEmbeddings

    _, want = expected(reference, TEXTS[:6])
    emb = OpenAIEmbeddings(model="minilm", base_url=server.url + "/v1", api_key="unused",
                           check_embedding_ctx_length=False)
    docs = emb.embed_documents(TEXTS[:6])
    assert cosines(np.array(docs), want).min() >= MIN_COSINE
    query = emb.embed_query(TEXTS[0])
    assert cosines(query, want[0]) >= MIN_COSINE


def test_token_id_inputs(client, reference):
    ids, want = expected(reference, TEXTS[:2])
    one = client.embeddings.create(model="minilm", input=ids[0], encoding_format="float")
    assert cosines(one.data[0].embedding, want[0]) >= MIN_COSINE
    two = client.embeddings.create(model="minilm", input=ids, encoding_format="float")
    assert cosines([d.embedding for d in two.data], want).min() >= MIN_COSINE
    assert two.usage.prompt_tokens == len(ids[0]) + len(ids[1])


def test_concurrent_requests_all_match(client, reference):
    _, want = expected(reference, TEXTS)

    def one(i):
        r = client.embeddings.create(model="minilm", input=TEXTS[i], encoding_format="float")
        return r.data[0].embedding

    with concurrent.futures.ThreadPoolExecutor(16) as pool:
        got = list(pool.map(one, range(len(TEXTS))))
    assert cosines(got, want).min() >= MIN_COSINE


def test_bad_requests_are_400(client, server):
    with pytest.raises(openai.BadRequestError, match="does not support matryoshka"):
        client.embeddings.create(model="minilm", input="hi", dimensions=64)
    with pytest.raises(openai.BadRequestError, match="context length"):
        client.embeddings.create(model="minilm", input="word " * 600)
    for body in ({"input": []}, {"input": [[1, 2], "x", 3]}, {"input": [99999999]},
                 {"input": "x", "encoding_format": "int8"}, {"input": "x", "user": "u"}, {}):
        r = requests.post(server.url + "/v1/embeddings", json=body, timeout=30)
        assert r.status_code == 400, (body, r.text)
        assert r.json()["object"] == "error"


def test_native_encode(server, reference):
    ids, want = expected(reference, TEXTS[:2])
    r = requests.post(server.url + "/encode", json={"text": TEXTS[0]}, timeout=60)
    assert r.status_code == 200, r.text
    assert cosines(r.json()["embedding"], want[0]) >= MIN_COSINE
    assert r.json()["meta_info"]["prompt_tokens"] == len(ids[0])
    r = requests.post(server.url + "/encode", json={"input_ids": ids}, timeout=60)
    assert r.status_code == 200, r.text
    assert cosines([x["embedding"] for x in r.json()], want).min() >= MIN_COSINE


def test_generation_routes_name_is_embedding(server):
    info = requests.get(server.url + "/get_model_info", timeout=10).json()
    assert info["is_generation"] is False
    for route, body in (("/generate", {"text": "hi"}),
                        ("/v1/completions", {"model": "minilm", "prompt": "hi"}),
                        ("/v1/chat/completions",
                         {"model": "minilm", "messages": [{"role": "user", "content": "hi"}]})):
        r = requests.post(server.url + route, json=body, timeout=10)
        assert r.status_code == 400, (route, r.text)
        assert "--is-embedding" in r.text


def test_auto_truncate_cuts_to_the_context_keeping_sep(reference):
    bert, tok = reference
    text = " ".join(TEXTS)
    ids = tok.encode(text).ids
    assert len(ids) > 64
    cut = ids[:63] + [ids[-1]]
    s = Server(MINILM, "--context-length", "64", "--allow-auto-truncate")
    try:
        r = requests.post(s.url + "/v1/embeddings", json={"input": text}, timeout=60).json()
        assert r["usage"]["prompt_tokens"] == 64
        assert cosines(r["data"][0]["embedding"], bert.embed(cut)) >= MIN_COSINE
    finally:
        s.stop()


def test_embedding_routes_on_a_generation_server_name_is_embedding():
    s = Server(STORIES)
    try:
        for route, body in (("/v1/embeddings", {"input": "hi"}), ("/encode", {"text": "hi"})):
            r = requests.post(s.url + route, json=body, timeout=10)
            assert r.status_code == 400, r.text
            assert "--is-embedding" in r.text
        assert requests.get(s.url + "/get_model_info", timeout=10).json()["is_generation"] is True
    finally:
        s.stop()

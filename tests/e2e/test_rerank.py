"""POST /v1/rerank with an LLM reranker (Qwen3-Reranker style: the chat template asks for "yes" or
"no") on SmolLM2 (its float32 GGUF, so that both sides compute the same float model). Each document's score is checked against llama.cpp (llama-cpp-python): the
prompt rendered by Python's jinja2 from the same template, tokenized and run by llama.cpp, and
p(yes) / (p(yes) + p(no)) computed from its next-token logits."""
import math
import pathlib
import sys

import jinja2
import numpy as np
import pytest
import requests

from server_util import SMOLLM2, Server

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[1] / "oracle/model"))
from model_oracle_helpers import SMOLLM2_F32_GGUF, require  # noqa: E402
from test_llama_oracle import _without_extra_buffer_types  # noqa: E402

# Qwen3-Reranker's prompt layout, in ChatML as SmolLM2 was trained on.
TEMPLATE = (
    "<|im_start|>system\nJudge whether the Document meets the requirements based on the Query "
    "and the Instruct provided. Note that the answer can only be \"yes\" or \"no\".<|im_end|>\n"
    "<|im_start|>user\n<Instruct>: {{ instruct | default('Given a web search query, retrieve "
    "relevant passages that answer the query') }}\n<Query>: {{ messages[0]['content'] }}\n"
    "<Document>: {{ messages[1]['content'] }}<|im_end|>\n<|im_start|>assistant\n"
)
QUERY = "What is the capital of France?"
DOCS = ["Paris is the capital and largest city of France.",
        "Bananas are rich in potassium.",
        "The Eiffel Tower is in Paris, France's capital.",
        "Berlin is the capital of Germany."]
TOL = 2e-3  # float32 against float32


@pytest.fixture(scope="module")
def llama():
    llama_cpp = pytest.importorskip("llama_cpp")
    _without_extra_buffer_types(llama_cpp)
    return llama_cpp.Llama(model_path=require(SMOLLM2_F32_GGUF), n_ctx=512, logits_all=True, n_threads=2,
                           verbose=False)


def reference_scores(llama, docs, instruct=None):
    template = jinja2.Environment().from_string(TEMPLATE)
    yes = llama.tokenize(b"yes", add_bos=False, special=False)
    no = llama.tokenize(b"no", add_bos=False, special=False)
    assert len(yes) == 1 and len(no) == 1
    scores = []
    for doc in docs:
        kwargs = {"instruct": instruct} if instruct else {}
        prompt = template.render(messages=[{"role": "user", "content": QUERY},
                                           {"role": "user", "content": doc}], **kwargs)
        llama.reset()
        llama.eval(llama.tokenize(prompt.encode(), add_bos=True, special=True))
        logits = np.array(llama.scores[llama.n_tokens - 1], dtype=np.float64)
        ly, ln = logits[yes[0]], logits[no[0]]
        scores.append(1.0 / (1.0 + math.exp(ln - ly)))
    return scores


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    path = tmp_path_factory.mktemp("rerank") / "reranker.jinja"
    path.write_text(TEMPLATE)
    srv = Server(require(SMOLLM2_F32_GGUF), "--skip-server-warmup", "--chat-template", str(path))
    yield srv
    srv.assert_no_leak()
    assert srv.stop() == 0, srv.logs()


def rerank(srv, **body):
    return requests.post(srv.url + "/v1/rerank", json=body, timeout=120)


def test_scores_match_llama_cpp_and_sort_best_first(server, llama):
    want = reference_scores(llama, DOCS)
    r = rerank(server, query=QUERY, documents=DOCS)
    assert r.status_code == 200, r.text
    got = r.json()
    assert sorted(item["index"] for item in got) == list(range(len(DOCS)))
    for item in got:
        assert abs(item["score"] - want[item["index"]]) < TOL, (item, want)
        assert item["document"] == DOCS[item["index"]]
    assert [item["score"] for item in got] == sorted((i["score"] for i in got), reverse=True)


def test_instruct_top_n_and_return_documents(server, llama):
    instruct = "Find sentences about fruit"
    want = reference_scores(llama, DOCS, instruct)
    r = rerank(server, query=QUERY, documents=DOCS, instruct=instruct, top_n=2,
               return_documents=False)
    assert r.status_code == 200, r.text
    got = r.json()
    assert len(got) == 2 and all("document" not in item for item in got)
    best = sorted(range(len(DOCS)), key=lambda i: -want[i])
    for item in got:
        assert abs(item["score"] - want[item["index"]]) < TOL
    if want[best[1]] - want[best[2]] > 2 * TOL:
        assert {item["index"] for item in got} == set(best[:2])


@pytest.mark.parametrize("body, fragment", [
    ({"query": "", "documents": ["a"]}, "Query cannot be empty"),
    ({"query": "  ", "documents": ["a"]}, "whitespace"),
    ({"query": "q", "documents": []}, "Documents cannot be empty"),
    ({"query": "q", "documents": ["a", " "]}, "whitespace"),
    ({"query": "q", "documents": ["a"], "top_n": 0}, "top_n"),
    ({"query": [{"type": "text", "text": "q"}], "documents": ["a"]}, "Multimodal"),
    ({"query": "q", "documents": ["a"], "user": "x"}, "user"),
])
def test_bad_requests_are_400(server, body, fragment):
    r = rerank(server, **body)
    assert r.status_code == 400, r.text
    assert fragment in r.json()["message"]


def test_a_chat_model_without_a_reranker_template_refuses():
    srv = Server(SMOLLM2, "--skip-server-warmup")
    try:
        r = rerank(srv, query=QUERY, documents=DOCS[:1])
        assert r.status_code == 400 and "chat template" in r.json()["message"]
    finally:
        assert srv.stop() == 0, srv.logs()

"""SGLang's sessions against a real server: /open_session, /close_session and /generate's
session_params (id, rid, offset, replace, drop_previous_output), streaming sessions and timeouts.

The reference for a session request is the same request sent without a session, its prompt
spelled out in full as SGLang's Session.create_req builds it: the continued request's prompt, its
output (unless drop_previous_output), cut at offset, then the new tokens. Greedy decoding makes
the two answers comparable token for token."""
import threading
import time

import pytest
import requests

from server_util import SMOLLM2, Server


@pytest.fixture(scope="module")
def server():
    s = Server(SMOLLM2, "--skip-server-warmup")
    yield s
    s.stop()


def tokenize(server, text):
    r = requests.post(server.url + "/tokenize", json={"prompt": text, "add_special_tokens": False},
                      timeout=30)
    assert r.status_code == 200, r.text
    return r.json()["tokens"]


def gen(server, ids, session=None, rid=None, max_new=8, expect=200):
    body = {"input_ids": ids, "sampling_params": {"max_new_tokens": max_new, "temperature": 0}}
    if session is not None:
        body["session_params"] = session
    if rid is not None:
        body["rid"] = rid
    r = requests.post(server.url + "/generate", json=body, timeout=120)
    assert r.status_code == expect, r.text
    return r.json()


def open_session(server, **fields):
    r = requests.post(server.url + "/open_session", json={"capacity_of_str_len": 1000, **fields},
                      timeout=30)
    assert r.status_code == 200, r.text
    return r.json()


def test_open_session_returns_an_id_and_refuses_a_duplicate(server):
    sid = open_session(server)
    assert isinstance(sid, str) and len(sid) == 32
    assert open_session(server, session_id="fixed-id") == "fixed-id"
    r = requests.post(server.url + "/open_session",
                      json={"capacity_of_str_len": 10, "session_id": "fixed-id"}, timeout=30)
    assert r.status_code == 400
    assert "same id is still open" in r.json()["error"]["message"]
    r = requests.post(server.url + "/open_session", json={}, timeout=30)
    assert r.status_code == 400  # capacity_of_str_len is required
    assert requests.post(server.url + "/close_session", json={"session_id": sid},
                         timeout=30).status_code == 200
    assert requests.post(server.url + "/close_session", json={"session_id": "fixed-id"},
                         timeout=30).status_code == 200


def test_a_continued_request_equals_its_full_prompt(server):
    a = tokenize(server, "The three primary colors are")
    b = tokenize(server, " Also, the sky is")
    c = tokenize(server, " In summary")
    sid = open_session(server)
    first = gen(server, a, {"id": sid}, rid="s1-t1")
    o1 = first["output_ids"]
    assert o1 == gen(server, a)["output_ids"]

    second = gen(server, b, {"id": sid, "rid": "s1-t1"}, rid="s1-t2")
    full = a + o1 + b
    ref = gen(server, full)
    assert second["output_ids"] == ref["output_ids"] and second["text"] == ref["text"]
    assert second["meta_info"]["prompt_tokens"] == len(full)
    # The history's KV comes from the radix cache (the first turn's prompt and output).
    assert second["meta_info"]["cached_tokens"] >= len(a)

    dropped = gen(server, b, {"id": sid, "rid": "s1-t1", "drop_previous_output": True},
                  rid="s1-t3")
    assert dropped["output_ids"] == gen(server, a + b)["output_ids"]

    cut = gen(server, c, {"id": sid, "rid": "s1-t2", "offset": 3}, rid="s1-t4")
    assert cut["output_ids"] == gen(server, (full + second["output_ids"])[:3] + c)["output_ids"]
    neg = gen(server, c, {"id": sid, "rid": "s1-t2", "offset": -2}, rid="s1-t5")
    assert neg["output_ids"] == gen(server, (full + second["output_ids"])[:-2] + c)["output_ids"]

    # replace drops the named request's children: t2's branch is gone afterwards.
    gen(server, c, {"id": sid, "rid": "s1-t1", "replace": True}, rid="s1-t6")
    r = gen(server, c, {"id": sid, "rid": "s1-t2"}, rid="s1-t7", expect=400)
    assert r["error"]["message"] == "Invalid request session id"
    # Without a rid a request starts from nothing.
    assert gen(server, c, {"id": sid}, rid="s1-t8")["output_ids"] == gen(server, c)["output_ids"]

    assert requests.post(server.url + "/close_session", json={"session_id": sid},
                         timeout=30).status_code == 200
    r = gen(server, c, {"id": sid, "rid": "s1-t1"}, expect=400)
    assert r["error"]["message"] == f"Invalid request: session id {sid} does not exist"
    server.assert_no_leak()


def test_appending_to_an_unfinished_request_is_refused(server):
    a = tokenize(server, "Tell me a very long story about dragons.")
    sid = open_session(server)
    body = {"input_ids": a, "rid": "s2-long", "session_params": {"id": sid},
            "sampling_params": {"max_new_tokens": 400, "temperature": 0, "ignore_eos": True},
            "stream": True}
    started = threading.Event()

    def run():
        with requests.post(server.url + "/generate", json=body, stream=True, timeout=300) as r:
            for _ in r.iter_lines():
                started.set()

    t = threading.Thread(target=run)
    t.start()
    assert started.wait(60)
    r = gen(server, a, {"id": sid, "rid": "s2-long"}, expect=400)
    assert r["error"]["message"] == "Session request is appending to a request that hasn't finished."
    # replace on it aborts the running request.
    gen(server, a[:3], {"id": sid, "rid": "s2-long", "replace": True}, rid="s2-next")
    t.join(timeout=60)
    assert not t.is_alive()
    requests.post(server.url + "/close_session", json={"session_id": sid}, timeout=30)
    server.assert_no_leak()


def test_streaming_session_continues_the_last_request(server):
    a = tokenize(server, "My favourite fruit is")
    b = tokenize(server, " and my favourite vegetable is")
    sid = open_session(server, streaming=True)
    first = gen(server, a, {"id": sid}, rid="s3-t1")
    second = gen(server, b, {"id": sid}, rid="s3-t2")
    full = a + first["output_ids"] + b
    assert second["output_ids"] == gen(server, full)["output_ids"]
    r = gen(server, b, {"id": sid, "offset": 2}, expect=400)
    assert r["error"]["message"] == "Streaming sessions do not support offset."
    requests.post(server.url + "/close_session", json={"session_id": sid}, timeout=30)


def test_session_timeout_closes_it(server):
    a = tokenize(server, "Hello")
    sid = open_session(server, timeout=0.3)
    gen(server, a, {"id": sid}, rid="s4-t1", max_new=1)
    time.sleep(0.8)
    r = gen(server, a, {"id": sid, "rid": "s4-t1"}, expect=400)
    assert "does not exist" in r["error"]["message"]


def test_session_params_shape_errors(server):
    a = tokenize(server, "Hello")
    r = requests.post(server.url + "/generate",
                      json={"input_ids": [a, a], "session_params": {"id": "x"}}, timeout=30)
    assert r.status_code == 400
    r = requests.post(server.url + "/generate",
                      json={"input_ids": a, "session_params": {"id": "x", "bogus": 1}}, timeout=30)
    assert r.status_code == 400 and "bogus" in r.text
    # No id: served outside any session, as SGLang does.
    assert gen(server, a, {"rid": None}, max_new=1)["output_ids"]

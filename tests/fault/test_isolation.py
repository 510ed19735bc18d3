"""Request ids: empty and duplicate ids are refused, and one client's id can never abort another
client's request (contract 3)."""
import json
import socket
import struct
import time

import pytest

from fault_util import (CHAT, COMPLETIONS, STORIES, TIMEOUT, Stream, assert_error, finish_module,
                        post, start_server)

# Tokens of the victim's generation. stories260K decodes ~400-1300 tokens/s on 2 shared cores, so
# with its context stretched to 4096 the victim runs for 1.5-5 s: long enough for an attacker to
# connect, be admitted and drop. (The model's output quality past 512 tokens is irrelevant.)
LONG = 2000


@pytest.fixture(scope="module")
def srv():
    srv = start_server(STORIES, "--context-length", "4096", "--max-total-tokens", "32768",
                       "--chat-template", "chatml")
    yield srv
    finish_module(srv)


def victim_body(rid=None):
    body = {"text": "Write a very long story about a dragon and a princess.", "stream": True,
            "sampling_params": {"max_new_tokens": LONG, "ignore_eos": True, "temperature": 0}}
    if rid is not None:
        body["rid"] = rid
    return body


def abrupt_attacker(server, rid):
    """Streams with `rid` over a raw socket, reads until its request is admitted (first event or
    an error answer), then resets the connection (SO_LINGER 0: RST, no orderly close)."""
    payload = json.dumps(victim_body(rid)).encode()
    s = socket.create_connection(("127.0.0.1", server.port), timeout=TIMEOUT)
    try:
        s.sendall(b"POST /generate HTTP/1.1\r\nHost: 127.0.0.1\r\n"
                  b"Content-Type: application/json\r\nContent-Length: %d\r\n\r\n" % len(payload)
                  + payload)
        seen = b""
        while b"data:" not in seen and b"\r\n\r\n{" not in seen:
            chunk = s.recv(65536)
            if not chunk:
                break
            seen += chunk
        s.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
    finally:
        s.close()
    return time.time()


@pytest.mark.parametrize("attacker", ["prefix1", "prefix8", "prefix_all_but_one", "1", "0"])
def test_other_rid_cannot_abort_victim(srv, attacker):
    victim = Stream(srv, victim_body())
    rid = victim.wait_first()["meta_info"]["id"]
    rid_attack = {"prefix1": rid[:1], "prefix8": rid[:8], "prefix_all_but_one": rid[:-1],
                  "1": "1", "0": "0"}[attacker]
    dropped_at = abrupt_attacker(srv, rid_attack)
    victim.join()
    assert victim.ended_at > dropped_at + 0.2, "victim ended before the attacker dropped; " \
        "make LONG larger"
    final = victim.final()
    assert final["meta_info"]["finish_reason"]["type"] == "length", final["meta_info"]
    assert final["meta_info"]["completion_tokens"] == LONG


def assert_duplicate_refused(response):
    """400, or (a stream, as SGLang answers one) 200 with an error event then [DONE]."""
    if response.status_code == 200 and response.headers.get("content-type", "").startswith(
            "text/event-stream"):
        events = [line[5:].strip() for line in response.text.splitlines()
                  if line.startswith("data:")]
        assert events and events[-1] == "[DONE]", events[-3:]
        assert any("error" in e and "Duplicate request ID" in e for e in events[:-1]), events
        assert not any('"finish_reason"' in e for e in events[:-1]), events
        return
    assert_error(response, 400, "Duplicate request ID")


def test_duplicate_running_rid_is_refused(srv):
    victim = Stream(srv, victim_body("dup-rid-1"))
    victim.wait_first()
    for path, body in (
            ("/generate", {"text": "hi", "rid": "dup-rid-1",
                           "sampling_params": {"max_new_tokens": 1}}),
            ("/generate", {"text": "hi", "rid": "dup-rid-1", "stream": True,
                           "sampling_params": {"max_new_tokens": 1}}),
            (CHAT, {"messages": [{"role": "user", "content": "hi"}], "max_tokens": 1,
                    "rid": "dup-rid-1"}),
            (CHAT, {"messages": [{"role": "user", "content": "hi"}], "max_tokens": 1,
                    "rid": "dup-rid-1", "stream": True}),
            (COMPLETIONS, {"prompt": "hi", "max_tokens": 1, "rid": "dup-rid-1"})):
        assert_duplicate_refused(post(srv, path, body))
    assert victim.ended_at is None, "the duplicate aborted the running request"
    # End the victim early (saves time) with an exact abort.
    assert post(srv, "/abort_request", {"rid": "dup-rid-1"}).status_code == 200
    victim.join()
    final = victim.final()
    assert final["meta_info"]["finish_reason"]["type"] == "abort", final["meta_info"]


def test_rid_reusable_after_finish(srv):
    body = {"text": "hi", "rid": "reuse-me", "sampling_params": {"max_new_tokens": 1}}
    assert post(srv, "/generate", body).status_code == 200
    r = post(srv, "/generate", body)
    assert r.status_code == 200, r.text[:300]


@pytest.mark.parametrize("path, body", [
    ("/generate", {"text": "hi", "rid": "", "sampling_params": {"max_new_tokens": 1}}),
    ("/generate", {"text": "hi", "rid": "", "stream": True,
                   "sampling_params": {"max_new_tokens": 1}}),
    ("/generate", {"text": ["a", "b"], "rid": ["x", ""], "sampling_params": {"max_new_tokens": 1}}),
    (CHAT, {"messages": [{"role": "user", "content": "hi"}], "max_tokens": 1, "rid": ""}),
    (COMPLETIONS, {"prompt": "hi", "max_tokens": 1, "rid": ""}),
])
def test_empty_rid_is_refused(srv, path, body):
    assert_error(post(srv, path, body), 400, "rid")


@pytest.mark.parametrize("body", [
    {"text": ["a", "b"], "rid": ["same", "same"], "sampling_params": {"max_new_tokens": 1}},
    {"input_ids": [[5], [6], [7]], "rid": ["p", "q", "p"],
     "sampling_params": {"max_new_tokens": 1}},
])
def test_duplicate_rids_in_batch(srv, body):
    assert_error(post(srv, "/generate", body), 400)


def cached_tokens(server, path, body):
    r = post(server, path, body)
    assert r.status_code == 200, r.text[:300]
    data = r.json()
    if path == "/generate":
        return data["meta_info"]["cached_tokens"], data["meta_info"]["prompt_tokens"]
    usage = data["usage"]
    details = usage.get("prompt_tokens_details") or {}
    return details.get("cached_tokens", 0), usage["prompt_tokens"]


def test_extra_key_separates_cache_namespaces(srv):
    """One tenant's cached prompt is never served as another tenant's prefix (SGLang's extra_key /
    cache_salt namespaces of the radix cache)."""
    prompt = "The secret recipe of tenant A starts with flour, sugar and " * 4
    body = {"text": prompt, "sampling_params": {"max_new_tokens": 1, "temperature": 0}}
    cached, total = cached_tokens(srv, "/generate", {**body, "extra_key": "tenant-a"})
    assert total > 32
    # The same prompt again in A's namespace reuses it; in B's or the shared one it does not.
    cached, _ = cached_tokens(srv, "/generate", {**body, "extra_key": "tenant-a"})
    assert cached >= total - 2, (cached, total)
    cached, _ = cached_tokens(srv, "/generate", {**body, "extra_key": "tenant-b"})
    assert cached == 0, cached
    cached, _ = cached_tokens(srv, "/generate", body)
    assert cached <= 1, cached  # at most the BOS token that every shared-namespace prompt has
    # A batch gives one key per prompt.
    r = post(srv, "/generate", {"text": [prompt, prompt], "extra_key": ["tenant-a", "tenant-c"],
                                "sampling_params": {"max_new_tokens": 1}})
    assert r.status_code == 200, r.text[:300]
    first, second = r.json()
    assert first["meta_info"]["cached_tokens"] >= total - 2
    assert second["meta_info"]["cached_tokens"] == 0
    assert_error(post(srv, "/generate", {**body, "extra_key": 5}), 400, "extra_key")


def test_cache_salt_separates_openai_requests(srv):
    prompt = "A salted prompt that only its owner may reuse from the cache, " * 4
    body = {"model": "default", "prompt": prompt, "max_tokens": 1, "temperature": 0}
    r = post(srv, COMPLETIONS, {**body, "cache_salt": "s1"})
    assert r.status_code == 200, r.text[:300]
    r = post(srv, "/generate", {"text": prompt, "extra_key": "s1",
                                "sampling_params": {"max_new_tokens": 1}})
    assert r.status_code == 200, r.text[:300]
    # cache_salt + extra_key is the namespace: the native request with extra_key "s1" reused it.
    assert r.json()["meta_info"]["cached_tokens"] > 0
    r = post(srv, "/generate", {"text": prompt, "extra_key": "s2",
                                "sampling_params": {"max_new_tokens": 1}})
    assert r.json()["meta_info"]["cached_tokens"] == 0


def test_native_cache_salt_separates_namespaces(srv):
    """SGLang 0.5.23's GenerateReqInput.cache_salt: a second tenant key on /generate."""
    prompt = "Native salted prompt that only the salt owner may reuse from the cache, " * 4
    body = {"text": prompt, "sampling_params": {"max_new_tokens": 1, "temperature": 0}}
    _, total = cached_tokens(srv, "/generate", {**body, "cache_salt": "n1"})
    cached, _ = cached_tokens(srv, "/generate", {**body, "cache_salt": "n1"})
    assert cached >= total - 2, (cached, total)
    cached, _ = cached_tokens(srv, "/generate", {**body, "cache_salt": "n2"})
    assert cached == 0, cached
    assert_error(post(srv, "/generate", {**body, "cache_salt": 7}), 400, "cache_salt")

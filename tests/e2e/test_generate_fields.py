"""Every field of SGLang 0.5.23's GenerateReqInput (read from the installed sglang wheel's
io_struct.py with Python's ast, not from a list of ours) is accepted by /generate at its default
value, so current SGLang clients' requests pass; a feature radixserve does not have, asked for,
is a 400 naming the field (never silently ignored); a field SGLang does not know is a 400."""
import ast
import importlib.util
import pathlib

import pytest
import requests

from server_util import STORIES, Server

# What each field means when a client actually uses it, where radixserve implements it.
IMPLEMENTED = {"text", "input_ids", "sampling_params", "rid", "return_logprob",
               "logprob_start_len", "top_logprobs_num", "token_ids_logprob",
               "return_text_in_logprobs", "stream", "priority", "extra_key", "cache_salt",
               "routed_dp_rank", "data_parallel_rank", "return_hidden_states",
               "return_entropy", "log_metrics", "no_logs"}
# Routing and tracing metadata (cannot change one server's answer).
METADATA = {"http_worker_ipc", "external_trace_header", "received_time", "routing_key",
            "conversation_id", "session_id", "input_embeds"}


def sglang_fields():
    spec = importlib.util.find_spec("sglang")
    assert spec is not None, "the sglang package is missing: run scripts/setup"
    source = pathlib.Path(spec.origin).parent / "srt" / "managers" / "io_struct.py"
    tree = ast.parse(source.read_text())
    [cls] = [n for n in tree.body if isinstance(n, ast.ClassDef) and n.name == "GenerateReqInput"]
    fields = {}
    for item in cls.body:
        if isinstance(item, ast.AnnAssign) and isinstance(item.target, ast.Name):
            default = None
            if isinstance(item.value, ast.Constant):
                default = item.value.value
            fields[item.target.id] = default
    assert len(fields) > 50, fields
    return fields


@pytest.fixture(scope="module")
def srv():
    server = Server(STORIES)
    yield server
    assert server.stop() == 0, server.logs()


def generate(srv, body):
    return requests.post(srv.url + "/generate", json=body, timeout=60)


def test_every_sglang_field_at_its_default_is_accepted(srv):
    body = {"text": "Once upon a time", "sampling_params": {"max_new_tokens": 2}}
    for name, default in sglang_fields().items():
        if name in ("text", "input_ids", "input_embeds", "sampling_params", "rid"):
            continue
        r = generate(srv, {**body, name: default})
        assert r.status_code == 200, (name, default, r.text)
    srv.assert_no_leak()


def test_unsupported_features_are_refused_by_name(srv):
    body = {"text": "Once upon a time", "sampling_params": {"max_new_tokens": 2}}
    for name, default in sglang_fields().items():
        if name in IMPLEMENTED or name in METADATA:
            continue
        value = True if default in (None, False) else (1 if default == 0 else None)
        r = generate(srv, {**body, name: value})
        assert r.status_code == 400, (name, value, r.text)
        assert name in r.text, (name, r.text)


def test_unknown_field_is_refused(srv):
    r = generate(srv, {"text": "x", "not_a_field": 1})
    assert r.status_code == 400 and "not_a_field" in r.text

"""Every field of SGLang 0.5.23's ChatCompletionRequest and CompletionRequest (read from the
installed sglang wheel's protocol.py with Python's ast, not from a list of ours) is accepted at its
default value; a feature radixserve does not have, asked for, is a 400 naming the field; a field
nobody defines is OpenAI's 400 "Unrecognized request argument supplied". The extension fields
that have an effect are checked against independent references: token ids against the HF
tokenizer and chat template (transformers), greedy answers against the plain request."""
import ast
import importlib.util
import json
import pathlib
import sys

import pytest
import requests

from server_util import SMOLLM2, Server

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[1] / "fixtures"))
from torch_env import smollm2_tokenizer_dir  # noqa: E402

# Fields whose non-default value has an effect here (tested below or in their feature's tests).
USED = {"model", "messages", "prompt", "stream", "stream_options", "n", "best_of", "echo",
        "suffix", "max_tokens", "max_completion_tokens", "temperature", "top_p",
        "frequency_penalty", "presence_penalty", "logit_bias", "logprobs", "top_logprobs", "seed",
        "stop", "response_format", "tools", "tool_choice", "parallel_tool_calls",
        "reasoning_effort", "thinking", "top_k", "min_p", "min_tokens", "repetition_penalty",
        "stop_token_ids", "stop_regex", "no_stop_trim", "ignore_eos", "skip_special_tokens",
        "json_schema", "regex", "ebnf", "continue_final_message", "separate_reasoning",
        "stream_reasoning", "chat_template_kwargs", "input_ids", "rid", "priority", "extra_key",
        "cache_salt", "lora_path", "custom_labels", "routed_dp_rank", "data_parallel_rank",
        "bootstrap_host", "bootstrap_port", "bootstrap_room", "return_hidden_states",
        "return_token_ids", "return_prompt_token_ids", "return_meta_info",
        "return_cached_tokens_details", "return_input_ids_in_sglext",
        "return_output_ids_in_sglext"}
# Bookkeeping that does not change the answer (OpenAI and SGLang ignore it too).
METADATA = {"user", "session_id"}
# Needs a value of its own shape to be "asked for".
ASKED = {"return_flat_raw_top_logprobs_b64": None}

CHAT = {"model": "default", "messages": [{"role": "user", "content": "Name a colour."}],
        "max_tokens": 8, "temperature": 0}
COMPLETION = {"model": "default", "prompt": "The capital of France is", "max_tokens": 8,
              "temperature": 0}


def sglang_fields(name):
    spec = importlib.util.find_spec("sglang")
    assert spec is not None, "the sglang package is missing: run scripts/setup"
    source = pathlib.Path(spec.origin).parent / "srt" / "entrypoints" / "openai" / "protocol.py"
    classes = {n.name: n for n in ast.parse(source.read_text()).body
               if isinstance(n, ast.ClassDef)}

    def collect(cls):
        fields = {}
        for base in cls.bases:
            if isinstance(base, ast.Name) and base.id in classes:
                fields.update(collect(classes[base.id]))
        for item in cls.body:
            if (isinstance(item, ast.AnnAssign) and isinstance(item.target, ast.Name)
                    and not item.target.id.startswith("_")):
                default = None
                value = item.value
                if isinstance(value, ast.Call):  # Field(default=...)
                    value = next((k.value for k in value.keywords if k.arg == "default"), None)
                if isinstance(value, ast.Constant):
                    default = value.value
                fields[item.target.id] = default
        return fields

    fields = collect(classes[name])
    assert len(fields) > 45, fields
    return fields


ROUTES = [("/v1/chat/completions", "ChatCompletionRequest", CHAT),
          ("/v1/completions", "CompletionRequest", COMPLETION)]


@pytest.fixture(scope="module")
def srv():
    server = Server(SMOLLM2, "--skip-server-warmup")
    yield server
    assert server.stop() == 0, server.logs()


@pytest.fixture(scope="module")
def hf():
    import transformers
    return transformers.AutoTokenizer.from_pretrained(smollm2_tokenizer_dir())


def post(srv, route, body):
    return requests.post(srv.url + route, json=body, timeout=120)


@pytest.mark.parametrize("route,model,base", ROUTES)
def test_every_sglang_field_at_its_default_is_accepted(srv, route, model, base):
    for name, default in sglang_fields(model).items():
        if name in base or name in ("stream_options",):
            continue
        r = post(srv, route, {**base, name: default})
        assert r.status_code == 200, (name, default, r.text)
    srv.assert_no_leak()


@pytest.mark.parametrize("route,model,base", ROUTES)
def test_features_radixserve_does_not_have_are_refused_by_name(srv, route, model, base):
    refused = 0
    for name, default in sglang_fields(model).items():
        if name in USED or name in METADATA:
            continue
        value = ASKED.get(name, True if default in (None, False) else
                          (1 if default == 0 else None))
        if name == "return_flat_raw_top_logprobs_b64":
            continue  # only shapes a refused field: both values are its default
        r = post(srv, route, {**base, name: value})
        assert r.status_code == 400, (name, value, r.text)
        assert name in r.text, (name, r.text)
        refused += 1
    assert refused > 5


@pytest.mark.parametrize("route,base", [(r, b) for r, _, b in ROUTES])
def test_a_field_nobody_defines_is_refused_as_openai_does(srv, route, base):
    for name in ("guided_json", "not_a_field"):
        r = post(srv, route, {**base, name: {"type": "object"}})
        assert r.status_code == 400, r.text
        error = r.json()  # SGLang's flat ErrorResponse
        assert error["message"] == f"Unrecognized request argument supplied: {name}"
        assert error["param"] == name


def test_metadata_fields_leave_the_answer_alone(srv):
    want = post(srv, "/v1/chat/completions", CHAT).json()["choices"][0]["message"]["content"]
    r = post(srv, "/v1/chat/completions", {**CHAT, "user": "u-1", "metadata": {"k": "v"},
                                           "safety_identifier": "s", "prompt_cache_key": "p",
                                           "session_id": "s-1"})
    assert r.status_code == 200, r.text
    assert r.json()["choices"][0]["message"]["content"] == want


def test_completion_token_ids_match_the_hf_tokenizer(srv, hf):
    r = post(srv, "/v1/completions", {**COMPLETION, "return_token_ids": True})
    assert r.status_code == 200, r.text
    choice = r.json()["choices"][0]
    assert choice["prompt_token_ids"] == hf(COMPLETION["prompt"])["input_ids"]
    assert hf.decode(choice["token_ids"]) == choice["text"]
    assert len(choice["token_ids"]) == r.json()["usage"]["completion_tokens"]
    # Streamed: each chunk carries its new ids, the first the prompt's.
    r = requests.post(srv.url + "/v1/completions", stream=True, timeout=120,
                      json={**COMPLETION, "return_token_ids": True, "stream": True})
    ids, prompts = [], []
    for line in r.iter_lines():
        if line.startswith(b"data: {"):
            c = json.loads(line[6:])["choices"][0]
            ids += c.get("token_ids", [])
            if "prompt_token_ids" in c:
                prompts.append(c["prompt_token_ids"])
    assert ids == choice["token_ids"]
    assert prompts == [choice["prompt_token_ids"]]


def test_chat_token_ids_and_meta_info_match_the_hf_chat_template(srv, hf):
    want_prompt = hf.apply_chat_template(CHAT["messages"], add_generation_prompt=True,
                                         tokenize=True)
    if isinstance(want_prompt, dict) or hasattr(want_prompt, "input_ids"):
        want_prompt = want_prompt["input_ids"]
    r = post(srv, "/v1/chat/completions", {
        **CHAT, "return_token_ids": True, "return_meta_info": True,
        "return_input_ids_in_sglext": True, "return_output_ids_in_sglext": True})
    assert r.status_code == 200, r.text
    out = r.json()
    choice = out["choices"][0]
    assert choice["prompt_token_ids"] == want_prompt
    assert hf.decode(choice["response_token_ids"], skip_special_tokens=True).strip() == \
        choice["message"]["content"].strip()
    meta = choice["meta_info"]
    assert meta["prompt_tokens"] == len(want_prompt) == out["usage"]["prompt_tokens"]
    assert meta["completion_tokens"] == len(choice["response_token_ids"])
    assert meta["id"] == out["id"]
    assert out["sglext"]["input_ids"] == want_prompt
    assert out["sglext"]["output_ids"] == [choice["response_token_ids"]]
    # return_prompt_token_ids alone: the prompt only. Per-choice extras refuse streaming, as
    # SGLang's do.
    only = post(srv, "/v1/chat/completions", {**CHAT, "return_prompt_token_ids": True}).json()
    assert only["choices"][0]["prompt_token_ids"] == want_prompt
    assert "response_token_ids" not in only["choices"][0] and "sglext" not in only
    for key in ("return_token_ids", "return_prompt_token_ids", "return_meta_info"):
        r = post(srv, "/v1/chat/completions", {**CHAT, "stream": True, key: True})
        assert r.status_code == 400 and key in r.text, r.text


def test_chat_input_ids_replace_the_rendered_prompt(srv, hf):
    """SGLang's input_ids: the client's own prompt ids are what the model reads."""
    other = [{"role": "user", "content": "Count to five."}]
    ids = hf.apply_chat_template(other, add_generation_prompt=True, tokenize=True)
    if isinstance(ids, dict) or hasattr(ids, "input_ids"):
        ids = ids["input_ids"]
    want = post(srv, "/v1/chat/completions", {**CHAT, "messages": other}).json()
    got = post(srv, "/v1/chat/completions", {**CHAT, "input_ids": ids,
                                             "return_prompt_token_ids": True}).json()
    assert got["choices"][0]["message"]["content"] == want["choices"][0]["message"]["content"]
    assert got["choices"][0]["prompt_token_ids"] == ids
    r = post(srv, "/v1/chat/completions", {**CHAT, "input_ids": [10**9]})
    assert r.status_code == 400 and "input_ids" in r.text, r.text


@pytest.mark.parametrize("route,base", [(r, b) for r, _, b in ROUTES])
def test_cached_tokens_details_count_the_reused_prefix(srv, route, base):
    unique = "Tell me about the history of the lighthouse keepers of the northern coast. " * 4
    body = dict(base)
    if "messages" in body:
        body["messages"] = [{"role": "user", "content": unique}]
    else:
        body["prompt"] = unique
    body["return_cached_tokens_details"] = True
    body["extra_key"] = f"isolated-{route}"  # nothing cached in this namespace yet
    first = post(srv, route, body).json()
    assert first["sglext"]["cached_tokens_details"] == {"device": 0, "host": 0}
    second = post(srv, route, body).json()
    details = second["sglext"]["cached_tokens_details"]
    assert details["host"] == 0
    # Everything but the last (page-unaligned) part of the prompt came from the radix cache.
    assert 0 < details["device"] < second["usage"]["prompt_tokens"]
    assert "sglext" not in post(srv, route, {**body, "return_cached_tokens_details": False}).json()
    # Streamed: a chunk without choices carries it before [DONE].
    r = requests.post(srv.url + route, stream=True, timeout=120, json={**body, "stream": True})
    chunks = [json.loads(line[6:]) for line in r.iter_lines() if line.startswith(b"data: {")]
    [ext] = [c["sglext"] for c in chunks if "sglext" in c]
    assert ext["cached_tokens_details"]["device"] == details["device"]


def test_routed_dp_rank_is_checked_against_the_replicas(srv):
    for route, _, base in ROUTES:
        for field in ("routed_dp_rank", "data_parallel_rank"):
            assert post(srv, route, {**base, field: 0}).status_code == 200
            r = post(srv, route, {**base, field: 1})
            assert r.status_code == 400 and field in r.text, r.text


def test_custom_labels_field_on_completions(srv):
    r = post(srv, "/v1/completions", {**COMPLETION, "custom_labels": {"tier": 3}})
    assert r.status_code == 400 and "tier" in r.text, r.text

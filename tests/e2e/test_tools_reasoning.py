"""Tool calling and reasoning on /v1/chat/completions, and SGLang's /parse_function_call and
/separate_reasoning, against the real binary on SmolLM2 (issue 16).

References, independent of radixserve: the official `openai` SDK's types for responses and
streamed chunks, Python `jsonschema` for the arguments of constrained calls (each call's
arguments must validate against its function's schema), and SGLang's own parsers (imported as
tests/oracle/chat does) for what /parse_function_call and /separate_reasoning return. SmolLM2
does not write tool-call markup by itself, so the auto-parser paths are driven by an extra-body
`regex` that forces the model's output into a known tool-call text: the parser then has to turn
exactly that text into tool_calls, streamed or not.
"""
import json
import pathlib
import re
import subprocess
import sys

import jsonschema
import openai
import pytest
import requests

from server_util import SMOLLM2, Server

SGLANG_PARSERS = pathlib.Path(__file__).resolve().parents[1] / "oracle" / "chat" / "sglang_parsers.py"


def sglang(cases):
    """SGLang's own parsers on `cases` (tests/oracle/chat/sglang_parsers.py, in a subprocess);
    fails the test when SGLang's parsers cannot be imported."""
    proc = subprocess.run([sys.executable, str(SGLANG_PARSERS)], input=json.dumps(cases).encode(),
                          capture_output=True, timeout=120)
    assert proc.returncode == 0, proc.stderr.decode()[-2000:]
    return json.loads(proc.stdout)


def sglang_tool_calls(parser, tools, text):
    [out] = sglang([{"tool_parser": parser, "tools": tools, "text": text}])
    assert "error" not in out, out
    return {"normal_text": out["normal_text"],
            "calls": [{"name": c["name"], "parameters": c["arguments"]} for c in out["calls"]]}


def sglang_separate_reasoning(parser, text):
    [out] = sglang([{"reasoning_parser": parser, "text": text}])
    assert "error" not in out, out
    return {"text": out["normal_text"], "reasoning_text": out["reasoning_text"]}

WEATHER = {
    "type": "object",
    "properties": {
        "city": {"type": "string", "maxLength": 12},
        "unit": {"enum": ["celsius", "fahrenheit"]},
    },
    "required": ["city", "unit"],
    "additionalProperties": False,
}
TIME = {
    "type": "object",
    "properties": {"zone": {"enum": ["UTC", "CET", "PST"]}},
    "required": ["zone"],
    "additionalProperties": False,
}
TOOLS = [
    {"type": "function", "function": {"name": "get_weather", "description": "Weather in a city",
                                      "parameters": WEATHER}},
    {"type": "function", "function": {"name": "get_time", "description": "Time in a zone",
                                      "parameters": TIME}},
]
SCHEMAS = {"get_weather": WEATHER, "get_time": TIME}
ASK = [{"role": "user", "content": "What is the weather in Paris?"}]
HERMES_CALL = '<tool_call>\n{"name": "get_weather", "arguments": {"city": "Paris", "unit": ' \
              '"celsius"}}\n</tool_call>'


@pytest.fixture(scope="module")
def smol():
    if not SMOLLM2.exists():
        pytest.fail(f"{SMOLLM2} missing: run scripts/setup")
    srv = Server(SMOLLM2, "--max-running-requests", "8", "--tool-call-parser", "hermes",
                 "--reasoning-parser", "deepseek-r1")
    yield srv
    assert srv.stop() == 0, srv.logs()


@pytest.fixture(scope="module")
def plain():
    """No parsers: tools still render, required / named still constrain."""
    srv = Server(SMOLLM2, "--max-running-requests", "8")
    yield srv
    assert srv.stop() == 0, srv.logs()


def client_of(server):
    return openai.OpenAI(base_url=server.url + "/v1", api_key="unused", max_retries=0)


def assert_valid_calls(calls, allowed=("get_weather", "get_time")):
    assert calls, "no tool calls"
    for call in calls:
        assert call.type == "function"
        assert call.id.startswith("call_") and len(call.id) == 29, call.id
        assert call.function.name in allowed, call.function.name
        jsonschema.validate(json.loads(call.function.arguments), SCHEMAS[call.function.name])


def streamed(client, **kwargs):
    """Streams a chat completion; returns (content, reasoning, calls by index, finish_reason)."""
    content, reasoning, calls, finish = "", "", {}, None
    for chunk in client.chat.completions.create(stream=True, **kwargs):
        for choice in chunk.choices:
            delta = choice.delta
            content += delta.content or ""
            reasoning += getattr(delta, "reasoning_content", None) or \
                (delta.model_extra or {}).get("reasoning_content") or ""
            for call in delta.tool_calls or []:
                entry = calls.setdefault(call.index, {"id": None, "name": "", "arguments": ""})
                if call.id:
                    entry["id"] = call.id
                if call.function and call.function.name:
                    entry["name"] += call.function.name
                if call.function and call.function.arguments:
                    entry["arguments"] += call.function.arguments
            finish = choice.finish_reason or finish
    return content, reasoning, calls, finish


@pytest.mark.parametrize("server_name", ["smol", "plain"])
def test_required_tool_choice_always_calls_with_valid_arguments(server_name, request):
    server = request.getfixturevalue(server_name)
    client = client_of(server)
    for temperature in (0, 1.0):
        out = client.chat.completions.create(
            model="default", messages=ASK, tools=TOOLS, tool_choice="required",
            temperature=temperature, seed=3, max_tokens=120,
            extra_body={"separate_reasoning": False})
        choice = out.choices[0]
        assert choice.finish_reason == "tool_calls", choice
        assert choice.message.content == ""
        assert_valid_calls(choice.message.tool_calls)
    server.assert_no_leak()


def test_named_function_and_single_call(smol):
    client = client_of(smol)
    out = client.chat.completions.create(
        model="default", messages=ASK, tools=TOOLS, max_tokens=120, temperature=0.7, seed=5,
        tool_choice={"type": "function", "function": {"name": "get_time"}},
        parallel_tool_calls=False, extra_body={"separate_reasoning": False})
    calls = out.choices[0].message.tool_calls
    assert len(calls) == 1
    assert_valid_calls(calls, allowed=("get_time",))


def test_required_streaming_matches_the_schema_and_the_non_streamed_form(smol):
    client = client_of(smol)
    kwargs = dict(model="default", messages=ASK, tools=TOOLS, tool_choice="required",
                  temperature=0, max_tokens=120, extra_body={"separate_reasoning": False})
    whole = client.chat.completions.create(**kwargs).choices[0].message.tool_calls
    content, _, calls, finish = streamed(client, **kwargs)
    assert finish == "tool_calls" and content == ""
    assert [(c["name"], c["arguments"]) for _, c in sorted(calls.items())] == \
        [(c.function.name, c.function.arguments) for c in whole]
    for call in calls.values():
        assert call["id"].startswith("call_")
        jsonschema.validate(json.loads(call["arguments"]), SCHEMAS[call["name"]])


def test_auto_with_the_hermes_parser(smol):
    """The output is forced (extra-body regex) to Hermes tool-call markup; the parser must turn
    it into tool_calls, streamed deltas concatenating to the same call."""
    client = client_of(smol)
    kwargs = dict(model="default", messages=ASK, tools=TOOLS, temperature=0, max_tokens=80,
                  extra_body={"regex": re.escape(HERMES_CALL), "separate_reasoning": False})
    choice = client.chat.completions.create(**kwargs).choices[0]
    assert choice.finish_reason == "tool_calls"
    assert (choice.message.content or "") == ""
    [call] = choice.message.tool_calls
    assert call.function.name == "get_weather"
    assert json.loads(call.function.arguments) == {"city": "Paris", "unit": "celsius"}
    # SGLang's own Hermes parser reads the same text the same way.
    [ref] = sglang_tool_calls("hermes", TOOLS, HERMES_CALL)["calls"]
    assert (ref["name"], ref["parameters"]) == (call.function.name, call.function.arguments)

    content, _, calls, finish = streamed(client, **kwargs)
    assert finish == "tool_calls" and content == ""
    assert [(c["name"], c["arguments"]) for c in calls.values()] == \
        [(call.function.name, call.function.arguments)]


def test_tool_choice_none_leaves_text_alone(smol):
    out = client_of(smol).chat.completions.create(
        model="default", messages=ASK, tools=TOOLS, tool_choice="none", temperature=0,
        max_tokens=60, extra_body={"regex": re.escape(HERMES_CALL), "separate_reasoning": False})
    choice = out.choices[0]
    assert choice.message.tool_calls is None
    assert choice.message.content == HERMES_CALL
    assert choice.finish_reason == "stop"


def test_tool_markup_keeps_special_tokens(smol):
    """As SGLang: when a tool may be called the text keeps special tokens (tool-call markup is
    often one); otherwise skip_special_tokens drops them. Checked on SmolLM2's <|im_start|>, a
    control token in the GGUF's own vocabulary (read with the gguf package), forced by
    logit_bias."""
    from gguf import GGUFReader
    reader = GGUFReader(SMOLLM2)
    tokens = reader.fields["tokenizer.ggml.tokens"]
    types = reader.fields["tokenizer.ggml.token_type"]
    names = [bytes(tokens.parts[i]).decode() for i in tokens.data]
    im_start = names.index("<|im_start|>")
    assert int(types.parts[types.data[im_start]][0]) == 3  # CONTROL: skipped as special
    kwargs = dict(model="default", messages=ASK, temperature=0, max_tokens=2,
                  logit_bias={str(im_start): 100}, extra_body={"separate_reasoning": False})
    client = client_of(smol)
    with_tools = client.chat.completions.create(tools=TOOLS, **kwargs).choices[0].message
    assert with_tools.content == "<|im_start|><|im_start|>"
    for choice in ({"tools": TOOLS, "tool_choice": "none"}, {}):
        message = client.chat.completions.create(**choice, **kwargs).choices[0].message
        assert (message.content or "") == ""


def test_tool_results_render_through_the_template(smol):
    messages = ASK + [
        # What agent frameworks send after a tool call: content null (empty, as SGLang reads it).
        {"role": "assistant", "content": None, "tool_calls": [
            {"id": "call_1", "type": "function",
             "function": {"name": "get_weather", "arguments": '{"city": "Paris"}'}}]},
        {"role": "tool", "tool_call_id": "call_1", "content": "18 degrees and sunny"},
    ]
    out = client_of(smol).chat.completions.create(
        model="default", messages=messages, tools=TOOLS, temperature=0, max_tokens=16,
        extra_body={"separate_reasoning": False})
    assert out.choices[0].message.content
    # Malformed history arguments are a 400 naming the problem.
    bad = json.loads(json.dumps(messages))
    bad[1]["tool_calls"][0]["function"]["arguments"] = "{not json"
    r = requests.post(smol.url + "/v1/chat/completions", timeout=60, json={
        "model": "default", "messages": bad, "tools": TOOLS, "max_tokens": 4})
    assert r.status_code == 400 and "arguments" in r.text, r.text


@pytest.mark.parametrize("body,words", [
    ({"tools": TOOLS, "tool_choice": {"type": "function", "function": {"name": "nope"}}},
     "not found"),
    ({"tool_choice": "required"}, "Tools cannot be empty"),
    ({"tools": TOOLS, "tool_choice": "sometimes"}, "tool_choice"),
    ({"tools": [{"type": "function", "function": {"parameters": {}}}]}, "name"),
    ({"tools": "get_weather"}, "tools"),
    ({"tools": TOOLS, "tool_choice": "required",
      "response_format": {"type": "json_object"}}, "cannot be combined"),
    ({"tools": TOOLS, "parallel_tool_calls": "yes"}, "parallel_tool_calls"),
])
def test_bad_tool_requests_are_400(smol, body, words):
    r = requests.post(smol.url + "/v1/chat/completions", timeout=60, json={
        "model": "default", "messages": ASK, "max_tokens": 4, **body})
    assert r.status_code == 400, r.text
    assert words in r.text, r.text
    smol.assert_no_leak()


def test_reasoning_content_is_separated(smol):
    """deepseek-r1 forces reasoning (the template opened <think>); the output is forced to
    thinking, </think>, then an answer."""
    client = client_of(smol)
    forced = "I should look at the sky.</think>It is sunny."
    kwargs = dict(model="default", messages=ASK, temperature=0, max_tokens=60,
                  extra_body={"regex": re.escape(forced)})
    msg = client.chat.completions.create(**kwargs).choices[0].message
    reasoning = (msg.model_extra or {}).get("reasoning_content") or \
        getattr(msg, "reasoning_content", None)
    assert reasoning == "I should look at the sky."
    assert msg.content == "It is sunny."
    ref = sglang_separate_reasoning("deepseek-r1", forced)
    assert (ref["reasoning_text"], ref["text"]) == (reasoning, msg.content)

    content, streamed_reasoning, _, finish = streamed(client, **kwargs)
    assert (streamed_reasoning, content) == (reasoning, msg.content)
    assert finish == "stop"

    # separate_reasoning: false keeps everything in content.
    kwargs["extra_body"]["separate_reasoning"] = False
    msg = client.chat.completions.create(**kwargs).choices[0].message
    assert msg.content == forced


def test_parse_function_call_route_matches_sglang(smol):
    texts = [HERMES_CALL, "Sure. " + HERMES_CALL,
             '<tool_call>\n{"name": "get_time", "arguments": {"zone": "UTC"}}\n</tool_call>\n'
             '<tool_call>\n{"name": "get_weather", "arguments": {"city": "Rome", "unit": '
             '"fahrenheit"}}\n</tool_call>', "no calls here"]
    for text in texts:
        r = requests.post(smol.url + "/parse_function_call", timeout=30, json={
            "text": text, "tool_call_parser": "hermes", "tools": TOOLS})
        assert r.status_code == 200, r.text
        ref = sglang_tool_calls("hermes", TOOLS, text)
        got = r.json()
        assert got["normal_text"] == ref["normal_text"], (text, got, ref)
        assert [{"name": c["name"], "parameters": c["parameters"]} for c in got["calls"]] == \
            ref["calls"], (text, got, ref)
        for call in got["calls"]:
            assert TOOLS[call["tool_index"]]["function"]["name"] == call["name"], got
    r = requests.post(smol.url + "/parse_function_call", timeout=30, json={
        "text": "x", "tool_call_parser": "nope", "tools": TOOLS})
    assert r.status_code == 400 and "nope" in r.text


def test_separate_reasoning_route_matches_sglang(smol):
    for parser, text in [("deepseek-r1", "think hard</think>answer"),
                         ("qwen3", "<think>a plan</think>the answer"),
                         ("qwen3", "no thinking at all")]:
        r = requests.post(smol.url + "/separate_reasoning", timeout=30, json={
            "text": text, "reasoning_parser": parser})
        assert r.status_code == 200, r.text
        assert r.json() == sglang_separate_reasoning(parser, text), (parser, text)
    r = requests.post(smol.url + "/separate_reasoning", timeout=30, json={
        "text": "x", "reasoning_parser": "nope"})
    assert r.status_code == 400 and "nope" in r.text


def qwen3_folder(tmp_path_factory):
    """A tiny dummy-weight Qwen3 folder with the real Qwen3 tokenizer and chat template."""
    from test_schema_corpus import QWEN3_CONFIG, QWEN3_TOKENIZER
    folder = tmp_path_factory.mktemp("qwen3")
    (folder / "config.json").write_text(json.dumps(QWEN3_CONFIG))
    for name in ("tokenizer.json", "tokenizer_config.json"):
        if not (QWEN3_TOKENIZER / name).exists():
            pytest.fail(f"{QWEN3_TOKENIZER / name} missing: run scripts/setup")
        (folder / name).symlink_to(QWEN3_TOKENIZER / name)
    return folder


@pytest.fixture(scope="module")
def qwen3(tmp_path_factory):
    """A tiny dummy-weight Qwen3 with the real Qwen3 tokenizer and chat template, whose
    end-of-thinking </think> is one token (test_schema_corpus.py builds the same folder)."""
    srv = Server(qwen3_folder(tmp_path_factory), "--load-format", "dummy",
                 "--reasoning-parser", "qwen3")
    yield srv
    assert srv.stop() == 0, srv.logs()


def test_constraint_applies_after_the_thinking(qwen3):
    """With thinking on, a response_format constraint starts after </think>: the (heavily biased)
    </think> token is allowed first although the JSON grammar would refuse it, and the answer
    after it follows the schema."""
    from test_schema_corpus import QWEN3_TOKENIZER
    added = json.loads((QWEN3_TOKENIZER / "tokenizer.json").read_text())["added_tokens"]
    [think_end] = [t["id"] for t in added if t["content"] == "</think>"]
    schema = {"type": "object", "properties": {"ok": {"type": "boolean"}}, "required": ["ok"],
              "additionalProperties": False}
    body = {"model": "default", "messages": [{"role": "user", "content": "Answer in JSON."}],
            "max_tokens": 40, "temperature": 0,
            "chat_template_kwargs": {"enable_thinking": True},
            "logit_bias": {str(think_end): 100},
            "response_format": {"type": "json_schema",
                                "json_schema": {"name": "answer", "schema": schema}}}
    r = requests.post(qwen3.url + "/v1/chat/completions", json=body, timeout=120)
    assert r.status_code == 200, r.text
    choice = r.json()["choices"][0]
    assert choice["finish_reason"] == "stop", choice
    jsonschema.validate(json.loads(choice["message"]["content"]), schema)
    # The raw text holds the end-of-thinking marker the grammar alone would have refused.
    raw = requests.post(qwen3.url + "/v1/chat/completions", timeout=120,
                        json={**body, "separate_reasoning": False}).json()
    text = raw["choices"][0]["message"]["content"]
    assert "</think>" in text, text
    jsonschema.validate(json.loads(text.split("</think>", 1)[1]), schema)
    # Thinking off: the whole output is constrained (no </think> can appear).
    off = requests.post(qwen3.url + "/v1/chat/completions", timeout=120, json={
        **body, "chat_template_kwargs": {"enable_thinking": False}}).json()
    content = off["choices"][0]["message"]["content"]
    assert "</think>" not in content
    jsonschema.validate(json.loads(content), schema)
    qwen3.assert_no_leak()


@pytest.mark.parametrize("fields,enable", [
    ({"reasoning_effort": "none"}, False),
    ({"reasoning_effort": "low"}, True),
    ({"reasoning": {"effort": "none"}}, False),
    ({"thinking": {"type": "disabled"}}, False),
    ({"thinking": {"type": "enabled"}}, True),
    # The client's own kwargs win.
    ({"reasoning_effort": "high", "chat_template_kwargs": {"enable_thinking": False}}, False),
])
def test_reasoning_switches_reach_the_chat_template(qwen3, fields, enable):
    """SGLang's reasoning_effort / reasoning / thinking fields set the template's enable_thinking
    (where chat_template_kwargs does not): the prompt ids equal the HF tokenizer's rendering of
    Qwen3's template with that switch (transformers, an independent renderer)."""
    import transformers
    from test_schema_corpus import QWEN3_TOKENIZER
    hf = transformers.AutoTokenizer.from_pretrained(str(QWEN3_TOKENIZER))
    messages = [{"role": "user", "content": "Is the sky blue?"}]
    want = hf.apply_chat_template(messages, add_generation_prompt=True, tokenize=True,
                                  enable_thinking=enable)
    if isinstance(want, dict) or hasattr(want, "input_ids"):
        want = want["input_ids"]
    r = requests.post(qwen3.url + "/v1/chat/completions", timeout=120, json={
        "model": "default", "messages": messages, "max_tokens": 1,
        "return_prompt_token_ids": True, **fields})
    assert r.status_code == 200, r.text
    assert r.json()["choices"][0]["prompt_token_ids"] == want


@pytest.fixture(scope="module")
def qwen3_tools(tmp_path_factory):
    """The dummy-weight Qwen3 of `qwen3`, serving the qwen25 tool-call parser, whose call opener
    <tool_call> is one (non-special) token of the real Qwen3 tokenizer."""
    folder = qwen3_folder(tmp_path_factory)
    added = json.loads((folder / "tokenizer.json").read_text())["added_tokens"]
    [opener] = [t["id"] for t in added if t["content"] == "<tool_call>"]
    srv = Server(folder, "--load-format", "dummy", "--tool-call-parser", "qwen25")
    yield srv, opener
    assert srv.stop() == 0, srv.logs()


def strict_tools(strict=True):
    tools = json.loads(json.dumps(TOOLS))
    for tool in tools:
        tool["function"]["strict"] = strict
    return tools


def test_strict_tools_under_auto_constrain_the_calls(qwen3_tools):
    """tool_choice "auto" with strict functions: the model's own call markup is constrained (as
    SGLang's structural tag does), so a random-weight model pushed to open calls (logit_bias on
    <tool_call>) still writes calls whose arguments validate against each function's schema
    (checked with jsonschema); streamed calls equal the non-streamed ones."""
    server, opener = qwen3_tools
    client = client_of(server)
    kwargs = dict(model="default", messages=ASK, temperature=0, max_tokens=160,
                  logit_bias={str(opener): 30},
                  extra_body={"chat_template_kwargs": {"enable_thinking": False}})
    strict = client.chat.completions.create(tools=strict_tools(), **kwargs).choices[0]
    calls = strict.message.tool_calls or []
    assert_valid_calls(calls)
    _, _, streamed_calls, finish = streamed(client, tools=strict_tools(), **kwargs)
    assert finish == strict.finish_reason
    # A call cut short by max_tokens has streamed what it had; the non-streamed answer drops it.
    sent = [(c["name"], c["arguments"]) for c in streamed_calls.values()]
    assert sent[:len(calls)] == [(c.function.name, c.function.arguments) for c in calls]
    assert len(sent) <= len(calls) + (strict.finish_reason == "length")
    # The same request with strict false is not constrained: the model writes something else.
    loose = client.chat.completions.create(tools=strict_tools(False), **kwargs).choices[0]
    assert (loose.message.content, loose.message.tool_calls) != \
        (strict.message.content, strict.message.tool_calls)
    # parallel_tool_calls false keeps the first call, streamed or not.
    one = client.chat.completions.create(tools=strict_tools(), parallel_tool_calls=False,
                                         **kwargs).choices[0]
    assert [(c.function.name, c.function.arguments) for c in one.message.tool_calls] == \
        [(calls[0].function.name, calls[0].function.arguments)]
    _, _, one_streamed, _ = streamed(client, tools=strict_tools(), parallel_tool_calls=False,
                                     **kwargs)
    assert [(c["name"], c["arguments"]) for c in one_streamed.values()] == \
        [(calls[0].function.name, calls[0].function.arguments)]
    assert one.finish_reason == strict.finish_reason
    # A strict auto call cannot also take another output constraint.
    r = requests.post(server.url + "/v1/chat/completions", timeout=60, json={
        **{k: v for k, v in kwargs.items() if k != "extra_body"}, "tools": strict_tools(),
        "regex": "[a-z]+"})
    assert r.status_code == 400 and "Strict tools" in r.text, r.text
    server.assert_no_leak()


def test_strict_tools_need_a_constrainable_format():
    """Formats whose calls are not "opener + JSON arguments + closer" cannot be held to a schema
    under "auto": a clear 400 naming the function and the parser; required still works."""
    srv = Server(SMOLLM2, "--tool-call-parser", "pythonic")
    try:
        body = {"model": "default", "messages": ASK, "max_tokens": 8, "tools": strict_tools()}
        r = requests.post(srv.url + "/v1/chat/completions", json=body, timeout=60)
        assert r.status_code == 400, r.text
        message = r.json()["message"]
        assert "get_weather" in message and "pythonic" in message, message
        r = requests.post(srv.url + "/v1/chat/completions", timeout=60,
                          json={**body, "tool_choice": "required", "max_tokens": 60})
        assert r.status_code == 200, r.text
        r = requests.post(srv.url + "/v1/chat/completions", timeout=60,
                          json={**body, "tools": strict_tools(False)})
        assert r.status_code == 200, r.text
    finally:
        assert srv.stop() == 0, srv.logs()

"""Constrained decoding end to end against the real binary (issue 16).

Every constrained output is checked by an independent validator: Python's `jsonschema` for JSON
schemas, `re.fullmatch` for regexes (EBNF grammars here describe regular languages, so an
equivalent Python regex checks them), Python's `re.search` for stop_regex, and the official
`openai` SDK's own Pydantic parsing for `chat.completions.parse`. stories260K (fast, but a poor
JSON writer) exercises the native API under every sampling mode; SmolLM2 the OpenAI routes.
"""
import concurrent.futures
import json
import re

import jsonschema
import openai
import pydantic
import pytest
import requests

from e2e_util import run_radixserve
from server_util import SMOLLM2, STORIES, Server

# Bounded everywhere (enums, integer ranges, maxLength, no extra properties), so that even
# stories260K finishes the object inside the token budget.
PERSON = {
    "type": "object",
    "properties": {
        "name": {"type": "string", "minLength": 1, "maxLength": 8},
        "age": {"type": "integer", "minimum": 0, "maximum": 120},
        "pet": {"enum": ["cat", "dog", "none"]},
        "tall": {"type": "boolean"},
    },
    "required": ["name", "age", "pet", "tall"],
    "additionalProperties": False,
}
WORDS = r"[A-Z][a-z]{1,7}( [a-z]{1,7}){2,4}\."
GBNF = r'''root ::= animal " " verb " " count "."
animal ::= "cat" | "dog" | "bird"
verb ::= "eats" | "sees"
count ::= [1-9] [0-9]?'''
GBNF_EQUIVALENT = r"(cat|dog|bird) (eats|sees) [1-9][0-9]?\."


def stop_on_last_token(body):
    """SGLang reports grammar termination as a stop matched on the last output token."""
    finish = body["meta_info"]["finish_reason"]
    assert finish["type"] == "stop", finish
    assert finish["matched"] == body["output_ids"][-1], (finish, body["output_ids"][-1:])


def generate(server, sampling, text="Once upon a time", **extra):
    r = requests.post(server.url + "/generate",
                      json={"text": text, "sampling_params": sampling, **extra}, timeout=120)
    assert r.status_code == 200, r.text
    return r.json()


def sse_events(response):
    return [line[len(b"data: "):].decode() for line in response.iter_lines()
            if line.startswith(b"data: ")]


@pytest.fixture(scope="module")
def stories():
    srv = Server(STORIES, "--max-running-requests", "32")
    yield srv
    assert srv.stop() == 0, srv.logs()


@pytest.fixture(scope="module")
def smol():
    if not SMOLLM2.exists():
        pytest.fail(f"{SMOLLM2} missing: run scripts/setup")
    srv = Server(SMOLLM2, "--max-running-requests", "16")
    yield srv
    assert srv.stop() == 0, srv.logs()


@pytest.fixture(scope="module")
def client(smol):
    return openai.OpenAI(base_url=smol.url + "/v1", api_key="unused")


# ---- native /generate on stories260K --------------------------------------------------------

@pytest.mark.parametrize("sampling", [
    {"temperature": 0},
    {"temperature": 1.0, "sampling_seed": 11},
    {"temperature": 0.8, "top_p": 0.9, "top_k": 50, "sampling_seed": 12},
])
def test_json_schema(stories, sampling):
    body = generate(stories, {"max_new_tokens": 400, "json_schema": json.dumps(PERSON),
                              **sampling})
    jsonschema.validate(json.loads(body["text"]), PERSON)
    stop_on_last_token(body)
    stories.assert_no_leak()


@pytest.mark.parametrize("sampling", [
    {"temperature": 0},
    {"temperature": 1.0, "sampling_seed": 3},
    {"temperature": 1.0, "min_p": 0.05, "frequency_penalty": 0.5, "sampling_seed": 4},
])
def test_regex(stories, sampling):
    body = generate(stories, {"max_new_tokens": 128, "regex": WORDS, **sampling})
    assert re.fullmatch(WORDS, body["text"]), body["text"]
    stop_on_last_token(body)
    stories.assert_no_leak()


def test_ebnf(stories):
    for seed in range(4):
        body = generate(stories, {"max_new_tokens": 64, "ebnf": GBNF, "temperature": 1.0,
                                  "sampling_seed": seed})
        assert re.fullmatch(GBNF_EQUIVALENT, body["text"]), body["text"]
        stop_on_last_token(body)
    stories.assert_no_leak()


def test_structural_tag_compiles_and_generates(stories):
    tag = {"structures": [{"begin": "<n>", "schema": {"type": "integer", "minimum": 0,
                                                       "maximum": 9}, "end": "</n>"}],
           "triggers": ["<n>"]}
    body = generate(stories, {"max_new_tokens": 48, "temperature": 0,
                              "structural_tag": json.dumps(tag)})
    # Free text; wherever a tag opens, it holds one digit and closes.
    for tail in body["text"].split("<n>")[1:]:
        assert (re.match(r"[0-9]</n>", tail) or re.fullmatch(r"([0-9](<(/n?)?)?)?", tail)), \
            body["text"]
    stories.assert_no_leak()


def test_n_samples_and_logprobs(stories):
    r = requests.post(stories.url + "/generate", json={
        "text": "The dog", "return_logprob": True, "top_logprobs_num": 3,
        "sampling_params": {"n": 4, "max_new_tokens": 128, "temperature": 1.0,
                            "regex": WORDS}}, timeout=120)
    assert r.status_code == 200, r.text
    bodies = r.json()
    assert len(bodies) == 4
    for body in bodies:
        assert re.fullmatch(WORDS, body["text"]), body["text"]
        stop_on_last_token(body)
        logprobs = body["meta_info"]["output_token_logprobs"]
        assert [entry[1] for entry in logprobs] == body["output_ids"]
        # Masked tokens have no probability: every sampled token's logprob is finite.
        assert all(entry[0] is not None and entry[0] > -1e30 for entry in logprobs)
    stories.assert_no_leak()


def test_streaming(stories):
    with requests.post(stories.url + "/generate", json={
            "text": "Once upon a time", "stream": True,
            "sampling_params": {"max_new_tokens": 400, "temperature": 0,
                                "json_schema": json.dumps(PERSON)}},
            stream=True, timeout=120) as r:
        assert r.status_code == 200
        events = sse_events(r)
    assert events[-1] == "[DONE]"
    chunks = [json.loads(e) for e in events[:-1]]
    texts = [c["text"] for c in chunks]
    for earlier, later in zip(texts, texts[1:]):
        assert later.startswith(earlier)
    jsonschema.validate(json.loads(texts[-1]), PERSON)
    assert chunks[-1]["meta_info"]["finish_reason"]["type"] == "stop"
    # Same text as the non-streamed request.
    full = generate(stories, {"max_new_tokens": 400, "temperature": 0,
                              "json_schema": json.dumps(PERSON)})
    assert full["text"] == texts[-1]
    stories.assert_no_leak()


def test_mixed_batch_leaves_free_requests_unchanged(stories):
    prompts = ["Once upon a time", "The little cat", "Tom and Sue went", "One day"]
    free = {"max_new_tokens": 24, "temperature": 0, "ignore_eos": True}
    alone = [generate(stories, free, text=p)["text"] for p in prompts]

    constrained = [
        {"max_new_tokens": 400, "temperature": 0, "json_schema": json.dumps(PERSON)},
        {"max_new_tokens": 128, "temperature": 1.0, "regex": WORDS, "sampling_seed": 5},
        {"max_new_tokens": 64, "temperature": 0.7, "ebnf": GBNF, "sampling_seed": 6},
    ]

    def run(i):
        if i % 2 == 0:
            return "free", i // 2 % len(prompts), generate(stories, free,
                                                          text=prompts[i // 2 % len(prompts)])
        kind = i // 2 % len(constrained)
        return "constrained", kind, generate(stories, constrained[kind], text=prompts[kind])

    with concurrent.futures.ThreadPoolExecutor(16) as pool:
        results = list(pool.map(run, range(24)))
    # One native batch mixing both kinds as well.
    batch = requests.post(stories.url + "/generate", json={
        "text": [prompts[0], prompts[1], prompts[2]],
        "sampling_params": [free, constrained[1], constrained[0]]}, timeout=120).json()
    results += [("free", 0, batch[0]), ("constrained", 1, batch[1]), ("constrained", 0, batch[2])]

    for kind, index, body in results:
        if kind == "free":
            assert body["text"] == alone[index]
        elif index == 0:
            jsonschema.validate(json.loads(body["text"]), PERSON)
        elif index == 1:
            assert re.fullmatch(WORDS, body["text"]), body["text"]
        else:
            assert re.fullmatch(GBNF_EQUIVALENT, body["text"]), body["text"]
    stories.assert_no_leak()


def test_stop_regex(stories):
    base = {"max_new_tokens": 48, "temperature": 0, "ignore_eos": True}
    full = generate(stories, base)["text"]
    words = re.findall(r"[a-z]{3,}", full)
    assert len(words) >= 3, full
    pattern = words[2][:2] + r"[a-z]+\b"
    first = re.search(pattern, full)
    body = generate(stories, {**base, "stop_regex": pattern})
    assert body["meta_info"]["finish_reason"] == {"type": "stop", "matched": pattern}
    assert body["text"] == full[:first.start()]
    # no_stop_trim keeps the match; a list of patterns stops at the earliest match.
    kept = generate(stories, {**base, "stop_regex": [r"\d{9}", pattern], "no_stop_trim": True})
    assert kept["text"] == full[:first.end()]
    assert kept["meta_info"]["finish_reason"]["matched"] == pattern
    # Streaming never shows text past the cut.
    with requests.post(stories.url + "/generate", json={
            "text": "Once upon a time", "stream": True,
            "sampling_params": {**base, "stop_regex": pattern}}, stream=True, timeout=60) as r:
        chunks = [json.loads(e) for e in sse_events(r)[:-1]]
    assert all(full[:first.start()].startswith(c["text"]) for c in chunks)
    assert chunks[-1]["text"] == full[:first.start()]
    stories.assert_no_leak()


@pytest.mark.parametrize("sampling, mentions", [
    ({"regex": "[0-9"}, "regex"),
    ({"regex": "(?<=a)b"}, "regex"),
    ({"json_schema": "{not json"}, "json_schema"),
    ({"json_schema": json.dumps({"type": "strin"})}, "json_schema"),
    ({"json_schema": json.dumps({"type": "integer", "minimum": 5, "maximum": 1})}, "json_schema"),
    ({"ebnf": "root ::= missing_rule"}, "missing_rule"),
    ({"ebnf": "rot ::= \"a\""}, "root"),
    ({"structural_tag": json.dumps({"structures": []})}, "structural_tag"),
    ({"stop_regex": "(unclosed"}, "stop_regex"),
    ({"regex": "a+", "json_schema": "{}"}, "Only one of regex, json_schema, or ebnf"),
    ({"regex": "a+", "structural_tag": json.dumps({"structures": [], "triggers": []})},
     "structural_tag cannot be combined"),
])
def test_invalid_constraints_are_400(stories, sampling, mentions):
    r = requests.post(stories.url + "/generate", json={
        "text": "Once", "sampling_params": {"max_new_tokens": 8, **sampling}}, timeout=30)
    assert r.status_code == 400, r.text
    assert mentions in r.json()["error"]["message"], r.text
    stories.assert_no_leak()


def test_invalid_constraint_of_a_stream_is_400_before_the_stream(stories):
    """Grammars compile off the I/O thread before the call is accepted, so a streaming request
    with a bad constraint still gets a plain 400, not a 200 stream with an error event."""
    r = requests.post(stories.url + "/generate", json={
        "text": "Once", "stream": True,
        "sampling_params": {"max_new_tokens": 8, "regex": "(unclosed"}}, timeout=30)
    assert r.status_code == 400, r.text
    assert "regex" in r.json()["error"]["message"], r.text
    r = requests.post(stories.url + "/v1/completions", json={
        "model": "m", "prompt": "Once", "stream": True, "max_tokens": 8,
        "json_schema": "{not json"}, timeout=30)
    assert r.status_code == 400, r.text
    stories.assert_no_leak()


def test_server_info_reports_llguidance(stories):
    assert stories.server_info()["grammar_backend"] == "llguidance"


def test_jump_forward_appends_forced_keys(stories):
    """Long forced property names cost no sampling steps; logprob requests sample every token."""
    schema = {"type": "object",
              "properties": {"the_name_of_the_little_animal": {"enum": ["cat", "dog"]},
                             "how_many_years_old_it_is_now": {"type": "integer", "minimum": 1,
                                                              "maximum": 9}},
              "required": ["the_name_of_the_little_animal", "how_many_years_old_it_is_now"],
              "additionalProperties": False}
    sampling = {"max_new_tokens": 200, "temperature": 0, "json_schema": json.dumps(schema)}

    def forced():
        return stories.server_info()["internal_states"][0]["jump_forward_tokens"]

    before = forced()
    with requests.post(stories.url + "/generate", json={
            "text": "Once upon a time", "stream": True, "sampling_params": sampling},
            stream=True, timeout=120) as r:
        chunks = [json.loads(e) for e in sse_events(r)[:-1]]
    body = chunks[-1]
    jsonschema.validate(json.loads(body["text"]), schema)
    stop_on_last_token(body)
    tokens = body["meta_info"]["completion_tokens"]
    # One event per forward step: far fewer than tokens, the keys' tokens came for free.
    assert len(chunks) * 2 < tokens, (len(chunks), tokens)
    # Most of the output was forced (the keys are long). Not exactly tokens - len(chunks): a slow
    # reader can get two steps' events in one chunk.
    assert tokens // 2 <= forced() - before <= tokens, (forced() - before, tokens)

    before = forced()
    body = generate(stories, sampling, return_logprob=True)
    jsonschema.validate(json.loads(body["text"]), schema)
    assert len(body["meta_info"]["output_token_logprobs"]) == len(body["output_ids"])
    assert forced() == before
    stories.assert_no_leak()


# ---- server arguments -------------------------------------------------------------------------

def test_grammar_backend_none_refuses_constrained_requests():
    srv = Server(STORIES, "--grammar-backend", "none")
    try:
        assert srv.server_info()["grammar_backend"] == "none"
        r = requests.post(srv.url + "/generate", json={
            "text": "Once", "sampling_params": {"max_new_tokens": 8, "regex": "a+"}}, timeout=30)
        assert r.status_code == 400, r.text
        assert "--grammar-backend none" in r.json()["error"]["message"]
        r = requests.post(srv.url + "/v1/completions", json={
            "prompt": "Once", "max_tokens": 8,
            "response_format": {"type": "json_object"}}, timeout=30)
        assert r.status_code == 400, r.text
        assert "--grammar-backend none" in r.json()["message"]
        # Unconstrained requests (and stop_regex, which needs no grammar) still work.
        r = requests.post(srv.url + "/generate", json={
            "text": "Once", "sampling_params": {"max_new_tokens": 8, "stop_regex": "zzz"}},
            timeout=30)
        assert r.status_code == 200, r.text
        srv.assert_no_leak()
    finally:
        assert srv.stop() == 0, srv.logs()


@pytest.mark.parametrize("args", [["--grammar-backend", "xgrammar"],
                                  ["--grammar-backend", "outlines"],
                                  ["--output_constraint_mode", "xgrammar"],
                                  []])
def test_backend_names_map_to_llguidance(radixserve_bin, args):
    out = run_radixserve(radixserve_bin, "--model-path", STORIES, *args, "--print-config")
    assert out.returncode == 0, out.stderr
    assert json.loads(out.stdout)["grammar_backend"] == "llguidance"
    mapped = [line for line in out.stderr.splitlines() if "grammar engine is llguidance" in line]
    assert len(mapped) == (1 if args else 0), out.stderr


def test_whitespace_options():
    schema = json.dumps(PERSON)
    compact = Server(STORIES, "--constrained-json-disable-any-whitespace")
    try:
        body = generate(compact, {"max_new_tokens": 200, "temperature": 0, "json_schema": schema})
        value = json.loads(body["text"])
        jsonschema.validate(value, PERSON)
        assert body["text"] == json.dumps(value, separators=(",", ":"), ensure_ascii=False)
        compact.assert_no_leak()
    finally:
        assert compact.stop() == 0, compact.logs()
    spaced = Server(STORIES, "--constrained-json-whitespace-pattern", "[ ]")
    try:
        for seed in range(3):
            body = generate(spaced, {"max_new_tokens": 300, "temperature": 1.0,
                                     "sampling_seed": seed, "json_schema": schema})
            value = json.loads(body["text"])
            jsonschema.validate(value, PERSON)
            # Outside strings, only single spaces separate tokens.
            outside = re.sub(r'"(?:[^"\\]|\\.)*"', '""', body["text"])
            assert "\n" not in outside and "  " not in outside, body["text"]
        spaced.assert_no_leak()
    finally:
        assert spaced.stop() == 0, spaced.logs()


def test_default_whitespace_is_bounded(stories):
    for seed in range(3):
        body = generate(stories, {"max_new_tokens": 400, "temperature": 1.0,
                                  "sampling_seed": 20 + seed, "json_schema": json.dumps(PERSON)})
        jsonschema.validate(json.loads(body["text"]), PERSON)
        outside = re.sub(r'"(?:[^"\\]|\\.)*"', '""', body["text"])
        for run in re.findall(r"[ \t\r\n]+", outside):
            assert re.fullmatch(r"\r?\n[ \t]{0,20}|[ \t]{1,4}", run), repr(run)
    stories.assert_no_leak()


# ---- OpenAI routes on SmolLM2 -----------------------------------------------------------------

class City(pydantic.BaseModel):
    name: str = pydantic.Field(max_length=40)
    country: str = pydantic.Field(max_length=40)
    population: int = pydantic.Field(ge=0, le=100_000_000)


def test_sdk_parse_with_pydantic(client, smol):
    out = client.chat.completions.parse(
        model="default", response_format=City, temperature=0, max_tokens=200,
        messages=[{"role": "user", "content": "Describe Paris as JSON."}])
    choice = out.choices[0]
    assert choice.finish_reason == "stop"
    assert isinstance(choice.message.parsed, City), choice.message.content
    jsonschema.validate(json.loads(choice.message.content), City.model_json_schema())
    # Properties come in the schema's order (the request's key order is kept).
    assert list(json.loads(choice.message.content)) == ["name", "country", "population"]
    smol.assert_no_leak()


def test_chat_json_schema_stream_n_and_logprobs(client, smol):
    schema = {"type": "object",
              "properties": {"color": {"enum": ["red", "green", "blue"]},
                             "count": {"type": "integer", "minimum": 1, "maximum": 9}},
              "required": ["color", "count"], "additionalProperties": False}
    response_format = {"type": "json_schema",
                       "json_schema": {"name": "pick", "schema": schema, "strict": True}}
    messages = [{"role": "user", "content": "Pick a color and a number."}]
    out = client.chat.completions.create(model="default", messages=messages, n=3,
                                         temperature=1.0, seed=3, max_tokens=64, logprobs=True,
                                         top_logprobs=2, response_format=response_format)
    assert len(out.choices) == 3
    # One logprob entry per generated token (the constrained distribution's).
    assert sum(len(c.logprobs.content) for c in out.choices) == out.usage.completion_tokens
    for choice in out.choices:
        jsonschema.validate(json.loads(choice.message.content), schema)
        assert choice.finish_reason == "stop"
    stream = client.chat.completions.create(model="default", messages=messages, stream=True,
                                            temperature=0, max_tokens=64,
                                            response_format=response_format)
    pieces, finish = [], None
    for chunk in stream:
        for choice in chunk.choices:
            pieces.append(choice.delta.content or "")
            finish = choice.finish_reason or finish
    jsonschema.validate(json.loads("".join(pieces)), schema)
    assert finish == "stop"
    smol.assert_no_leak()


def test_chat_json_object_and_extra_body(client, smol):
    messages = [{"role": "user", "content": "Give a JSON object describing a cat."}]
    out = client.chat.completions.create(model="default", messages=messages, temperature=0,
                                         max_tokens=120, response_format={"type": "json_object"})
    content = out.choices[0].message.content
    if out.choices[0].finish_reason == "stop":
        assert isinstance(json.loads(content), dict), content
    else:
        assert content.startswith("{")
    regex = r"(yes|no), because [a-z ]{1,40}\."
    out = client.chat.completions.create(model="default", temperature=0, max_tokens=64,
                                         messages=[{"role": "user", "content": "Is water wet?"}],
                                         extra_body={"regex": regex})
    assert re.fullmatch(regex, out.choices[0].message.content), out.choices[0].message.content
    assert out.choices[0].finish_reason == "stop"
    schema = {"type": "object", "properties": {"ok": {"type": "boolean"}}, "required": ["ok"],
              "additionalProperties": False}
    out = client.chat.completions.create(model="default", temperature=0, max_tokens=32,
                                         messages=[{"role": "user", "content": "Answer ok."}],
                                         extra_body={"json_schema": schema})
    jsonschema.validate(json.loads(out.choices[0].message.content), schema)
    smol.assert_no_leak()


def test_completions_constraints(client, smol):
    out = client.completions.create(model="default", prompt="The year the war ended:",
                                    max_tokens=16, temperature=0,
                                    extra_body={"regex": r" [12][0-9]{3}\."})
    assert re.fullmatch(r" [12][0-9]{3}\.", out.choices[0].text), out.choices[0].text
    assert out.choices[0].finish_reason == "stop"
    out = client.completions.create(model="default", prompt="Colors: red, green,", max_tokens=40,
                                    temperature=0, extra_body={"ebnf": 'root ::= " " [a-z]+ ","'},
                                    n=2)
    for choice in out.choices:
        assert re.fullmatch(r" [a-z]+,", choice.text), choice.text
    base = client.completions.create(model="default", prompt="1, 2, 3, 4,", max_tokens=16,
                                     temperature=0).choices[0].text
    cut = client.completions.create(model="default", prompt="1, 2, 3, 4,", max_tokens=16,
                                    temperature=0, extra_body={"stop_regex": r"[6-9]"})
    first = re.search(r"[6-9]", base)
    assert first, base
    assert cut.choices[0].text == base[:first.start()]
    assert cut.choices[0].finish_reason == "stop"
    smol.assert_no_leak()


@pytest.mark.parametrize("route, body, mentions", [
    ("/v1/chat/completions",
     {"response_format": {"type": "json_schema", "json_schema": {"name": "x"}}},
     "schema_ is required for json_schema response format request."),
    ("/v1/chat/completions", {"response_format": {"type": "xml"}}, "response_format type 'xml'"),
    ("/v1/chat/completions", {"regex": "[a-"}, "regex"),
    ("/v1/completions", {"response_format": {"type": "json_schema",
                                             "json_schema": {"schema": {"type": "nope"}}}},
     "json_schema"),
    ("/v1/completions", {"stop_regex": ["ok", "(("]}, "stop_regex"),
])
def test_openai_invalid_constraints_are_400(smol, route, body, mentions):
    payload = {"model": "default", "max_tokens": 8, **body}
    if route == "/v1/chat/completions":
        payload["messages"] = [{"role": "user", "content": "hi"}]
    else:
        payload["prompt"] = "hi"
    r = requests.post(smol.url + route, json=payload, timeout=30)
    assert r.status_code == 400, r.text
    assert mentions in r.json()["message"], r.text
    smol.assert_no_leak()

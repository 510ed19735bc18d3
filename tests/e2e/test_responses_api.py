"""OpenAI's Responses API (POST /v1/responses, GET/DELETE /v1/responses/{id}) against the real
binary on SmolLM2 (issue 17).

References, independent of the route under test: the official `openai` SDK (its typed models parse
every answer, and `client.responses.stream()` rebuilds the response from the events, refusing
streams whose items, parts and indexes do not line up), `jsonschema` for constrained output and
tool arguments, and the chat route given the equivalent chat messages (its tokens are checked
against llama.cpp elsewhere): a Responses request must produce exactly what its chat translation
produces.
"""
import json
import re
import time

import jsonschema
import openai
import pytest
import requests

from server_util import SMOLLM2, Server

WEATHER = {
    "type": "object",
    "properties": {"city": {"type": "string", "maxLength": 12},
                   "unit": {"enum": ["celsius", "fahrenheit"]}},
    "required": ["city", "unit"],
    "additionalProperties": False,
}
TOOL = {"type": "function", "name": "get_weather", "description": "Weather in a city",
        "parameters": WEATHER}
CHAT_TOOL = {"type": "function", "function": {"name": "get_weather",
                                              "description": "Weather in a city",
                                              "parameters": WEATHER}}


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
    srv = Server(SMOLLM2, "--max-running-requests", "8")
    yield srv
    assert srv.stop() == 0, srv.logs()


def client_of(server):
    return openai.OpenAI(base_url=server.url + "/v1", api_key="unused", max_retries=0)


def chat_text(client, messages, **kwargs):
    out = client.chat.completions.create(model="default", messages=messages, temperature=0,
                                         **kwargs)
    return out.choices[0]


def test_text_in_text_out_matches_the_chat_route(plain):
    client = client_of(plain)
    r = client.responses.create(model="default", input="Name three colors.", temperature=0,
                                max_output_tokens=24, instructions="Answer briefly.")
    ref = chat_text(client, [{"role": "system", "content": "Answer briefly."},
                             {"role": "user", "content": "Name three colors."}], max_tokens=24)
    assert r.object == "response" and r.id.startswith("resp_")
    assert r.output_text == ref.message.content
    [item] = r.output
    assert item.type == "message" and item.role == "assistant"
    assert item.content[0].type == "output_text"
    assert r.status == ("incomplete" if ref.finish_reason == "length" else "completed")
    if r.status == "incomplete":
        assert r.incomplete_details.reason == "max_output_tokens"
    assert r.usage.output_tokens == 24 or r.status == "completed"
    assert r.usage.total_tokens == r.usage.input_tokens + r.usage.output_tokens
    assert r.instructions == "Answer briefly." and r.max_output_tokens == 24
    assert r.temperature == 0

    # Input as message items with content parts reads the same.
    r2 = client.responses.create(
        model="default", temperature=0, max_output_tokens=24, instructions="Answer briefly.",
        input=[{"role": "user", "content": [{"type": "input_text", "text": "Name three "},
                                            {"type": "input_text", "text": "colors."}]}])
    assert r2.output_text == r.output_text
    plain.assert_no_leak()


def test_stream_events_rebuild_the_same_response(plain):
    client = client_of(plain)
    kwargs = dict(model="default", input="Write a sentence about the sea.", temperature=0,
                  max_output_tokens=30)
    whole = client.responses.create(**kwargs)
    events = list(client.responses.create(stream=True, **kwargs))
    assert [e.sequence_number for e in events] == list(range(len(events)))
    assert events[0].type == "response.created" and events[1].type == "response.in_progress"
    last = events[-1]
    assert last.type == ("response.completed" if whole.status == "completed"
                         else "response.incomplete")
    assert last.response.output_text == whole.output_text
    deltas = "".join(e.delta for e in events if e.type == "response.output_text.delta")
    assert deltas == whole.output_text
    assert last.response.id == events[0].response.id

    # The SDK's stream helper checks that items, parts and indexes line up (and needs a
    # completed response: the stop string ends it).
    kwargs.update(max_output_tokens=200, extra_body={"stop": [","]})
    whole = client.responses.create(**kwargs)
    assert whole.status == "completed"
    with client.responses.stream(**kwargs) as stream:
        text = "".join(e.delta for e in stream if e.type == "response.output_text.delta")
        final = stream.get_final_response()
    assert text == final.output_text == whole.output_text


def test_stream_events_carry_their_type_as_the_sse_event_name(plain):
    """Each Responses stream event is framed as OpenAI frames it: an `event: <type>` line, then
    the data whose "type" it names; no [DONE] marker."""
    body = {"model": "default", "input": "Say hi.", "stream": True, "max_output_tokens": 4,
            "temperature": 0}
    with requests.post(plain.url + "/v1/responses", json=body, stream=True, timeout=120) as r:
        assert r.status_code == 200
        text = r.content.decode()
    frames = [f for f in text.split("\n\n") if f.strip()]
    assert len(frames) >= 3
    for frame in frames:
        lines = frame.split("\n")
        assert lines[0].startswith("event: ") and lines[1].startswith("data: "), frame
        assert json.loads(lines[1][len("data: "):])["type"] == lines[0][len("event: "):]
    assert frames[0].startswith("event: response.created")
    assert frames[-1].split("\n")[0] in ("event: response.completed",
                                          "event: response.incomplete")


def test_previous_response_id_continues_the_conversation(plain):
    client = client_of(plain)
    first = client.responses.create(model="default", input="My name is Ada. Say hello.",
                                    temperature=0, max_output_tokens=16)
    second = client.responses.create(model="default", input="What is my name?", temperature=0,
                                     max_output_tokens=16, previous_response_id=first.id)
    ref = chat_text(client, [{"role": "user", "content": "My name is Ada. Say hello."},
                             {"role": "assistant", "content": first.output_text},
                             {"role": "user", "content": "What is my name?"}], max_tokens=16)
    assert second.output_text == ref.message.content
    assert second.previous_response_id == first.id

    got = client.responses.retrieve(first.id)
    assert got.id == first.id and got.output_text == first.output_text
    client.responses.delete(first.id)
    with pytest.raises(openai.NotFoundError):
        client.responses.retrieve(first.id)
    with pytest.raises(openai.NotFoundError):
        client.responses.create(model="default", input="again", previous_response_id=first.id)

    unstored = client.responses.create(model="default", input="hi", max_output_tokens=4,
                                       store=False)
    assert unstored.store is False
    with pytest.raises(openai.NotFoundError):
        client.responses.retrieve(unstored.id)
    # Only background responses can be cancelled.
    with pytest.raises(openai.BadRequestError):
        client.responses.cancel(second.id)


def test_input_items_list_pages_like_openai(plain):
    """GET /v1/responses/{id}/input_items through the SDK: newest first by default, pages of
    `limit` that the SDK's auto-pagination (after=last_id) walks to the end."""
    client = client_of(plain)
    turns = [{"role": "user", "content": "Count: one."},
             {"role": "assistant", "content": "two"},
             {"role": "user", "content": "three?"}]
    resp = client.responses.create(model="default", input=turns, temperature=0,
                                   max_output_tokens=4)
    newest_first = client.responses.input_items.list(resp.id)
    assert [item.role for item in newest_first.data] == ["user", "assistant", "user"]
    texts = [item.content[0].text for item in newest_first.data]
    assert texts == ["three?", "two", "Count: one."]
    assert newest_first.has_more is False

    page = client.responses.input_items.list(resp.id, limit=2, order="asc")
    assert [item.content[0].text for item in page.data] == ["Count: one.", "two"]
    assert page.has_more is True
    walked = [item.content[0].text
              for item in client.responses.input_items.list(resp.id, limit=1, order="asc")]
    assert walked == ["Count: one.", "two", "three?"]
    ids = [item.id for item in newest_first.data]
    assert len(set(ids)) == 3

    bad = requests.get(f"{plain.url}/v1/responses/{resp.id}/input_items?limit=0", timeout=30)
    assert bad.status_code == 400 and "limit" in bad.text
    gone = requests.get(f"{plain.url}/v1/responses/resp_nope/input_items", timeout=30)
    assert gone.status_code == 404


def test_background_responses_are_polled_and_cancelled(plain):
    """background: true answers "queued" at once; GET polls until the result is stored, which
    equals the same request run in the foreground; cancel aborts a long one."""
    client = client_of(plain)
    kwargs = dict(model="default", input="Name three colors.", temperature=0,
                  max_output_tokens=24)
    foreground = client.responses.create(**kwargs)
    queued = client.responses.create(background=True, **kwargs)
    assert queued.status == "queued" and queued.background is True
    deadline = time.time() + 60
    got = client.responses.retrieve(queued.id)
    while got.status in ("queued", "in_progress") and time.time() < deadline:
        time.sleep(0.05)
        got = client.responses.retrieve(queued.id)
    assert got.status in ("completed", "incomplete")
    assert got.output_text == foreground.output_text
    with pytest.raises(openai.BadRequestError):
        client.responses.cancel(queued.id)  # finished: nothing to cancel

    long = client.responses.create(background=True, model="default", input="Count upward.",
                                   max_output_tokens=2000, extra_body={"ignore_eos": True})
    cancelled = client.responses.cancel(long.id)
    assert cancelled.status == "cancelled"
    time.sleep(0.5)
    assert client.responses.retrieve(long.id).status == "cancelled"
    plain.assert_no_leak()

    reply = requests.post(plain.url + "/v1/responses", timeout=30, json={
        "model": "default", "input": "hi", "background": True, "store": False})
    assert reply.status_code == 400 and "background" in reply.text


def test_background_streams_resume_from_any_event(plain):
    """background + stream (OpenAI's resumable background streaming): the creating request
    streams the events live; GET ...?stream=true&starting_after=N (the SDK's
    retrieve(stream=True)) replays the events after N; a client that goes away does not end the
    response, and it resumes where it left; the result equals the foreground run."""
    client = client_of(plain)
    kwargs = dict(model="default", input="Write a sentence about the sea.", temperature=0,
                  max_output_tokens=30)
    foreground = client.responses.create(**kwargs)
    events = list(client.responses.create(background=True, stream=True, **kwargs))
    assert [e.sequence_number for e in events] == list(range(len(events)))
    assert events[0].type == "response.created" and events[0].response.background is True
    assert events[-1].type in ("response.completed", "response.incomplete")
    assert events[-1].response.output_text == foreground.output_text
    rid = events[0].response.id
    again = list(client.responses.retrieve(rid, stream=True, starting_after=2))
    assert [e.model_dump() for e in again] == [e.model_dump() for e in events[3:]]
    assert len(list(client.responses.retrieve(rid, stream=True))) == len(events)
    assert client.responses.retrieve(rid).output_text == foreground.output_text

    # A client that leaves after a few events: the response runs to its end regardless.
    body = {"model": "default", "input": "Count upward.", "max_output_tokens": 200,
            "temperature": 0, "ignore_eos": True, "background": True, "stream": True}
    seen = []
    with requests.post(plain.url + "/v1/responses", json=body, stream=True, timeout=120) as r:
        assert r.status_code == 200
        for line in r.iter_lines():
            if line.startswith(b"data: "):
                seen.append(json.loads(line[6:]))
            if len(seen) == 4:
                break
    long_id = seen[0]["response"]["id"]
    deadline = time.time() + 120
    got = client.responses.retrieve(long_id)
    while got.status in ("queued", "in_progress") and time.time() < deadline:
        time.sleep(0.1)
        got = client.responses.retrieve(long_id)
    assert got.status == "incomplete" and got.usage.output_tokens == 200
    rest = list(client.responses.retrieve(long_id, stream=True, starting_after=3))
    assert rest[0].sequence_number == 4 and rest[-1].type == "response.incomplete"
    text = "".join(e["delta"] for e in seen if e["type"] == "response.output_text.delta") + \
        "".join(e.delta for e in rest if e.type == "response.output_text.delta")
    assert text == got.output_text

    # Only background streams can be streamed again; a sequence number must be a number.
    for query, param in ((f"{foreground.id}?stream=true", "stream"),
                         (f"{rid}?stream=true&starting_after=x", "starting_after")):
        reply = requests.get(f"{plain.url}/v1/responses/{query}", timeout=30)
        assert reply.status_code == 400 and param in reply.text, reply.text
    plain.assert_no_leak()


def test_function_calls_and_their_outputs(smol):
    client = client_of(smol)
    ask = "What is the weather in Paris?"
    r = client.responses.create(model="default", input=ask, tools=[TOOL], tool_choice="required",
                                temperature=0, max_output_tokens=120,
                                extra_body={"separate_reasoning": False})
    calls = [item for item in r.output if item.type == "function_call"]
    assert calls, r.output
    for call in calls:
        assert call.name == "get_weather" and call.call_id
        jsonschema.validate(json.loads(call.arguments), WEATHER)
    ref = chat_text(client, [{"role": "user", "content": ask}], tools=[CHAT_TOOL],
                    tool_choice="required", max_tokens=120,
                    extra_body={"separate_reasoning": False})
    assert [(c.name, c.arguments) for c in calls] == \
        [(c.function.name, c.function.arguments) for c in ref.message.tool_calls]

    # Streamed: the same calls, through the SDK's checking stream helper.
    with client.responses.stream(model="default", input=ask, tools=[TOOL], tool_choice="required",
                                 temperature=0, max_output_tokens=120,
                                 extra_body={"separate_reasoning": False}) as stream:
        final = stream.get_final_response()
    assert [(c.name, c.arguments) for c in final.output if c.type == "function_call"] == \
        [(c.name, c.arguments) for c in calls]

    # The call and its output go back as input items: the same prompt as the chat history.
    call = calls[0]
    follow = [{"role": "user", "content": ask},
              {"type": "function_call", "call_id": call.call_id, "name": call.name,
               "arguments": call.arguments},
              {"type": "function_call_output", "call_id": call.call_id, "output": "21 C, sunny"}]
    r2 = client.responses.create(model="default", input=follow, tools=[TOOL], temperature=0,
                                 max_output_tokens=20, extra_body={"separate_reasoning": False})
    ref2 = chat_text(client, [
        {"role": "user", "content": ask},
        {"role": "assistant", "content": "", "tool_calls": [
            {"id": call.call_id, "type": "function",
             "function": {"name": call.name, "arguments": call.arguments}}]},
        {"role": "tool", "tool_call_id": call.call_id, "content": "21 C, sunny"}],
        tools=[CHAT_TOOL], max_tokens=20, extra_body={"separate_reasoning": False})
    assert r2.output_text == (ref2.message.content or "")
    # max_tool_calls caps the calls returned.
    capped = client.responses.create(model="default", input=ask, tools=[TOOL],
                                     tool_choice="required", temperature=0,
                                     max_output_tokens=120, max_tool_calls=1,
                                     extra_body={"separate_reasoning": False})
    assert len([i for i in capped.output if i.type == "function_call"]) == 1
    smol.assert_no_leak()


def test_reasoning_becomes_a_reasoning_item(smol):
    client = client_of(smol)
    forced = "I should look at the sky.</think>It is sunny."
    kwargs = dict(model="default", input="Is it sunny?", temperature=0, max_output_tokens=60,
                  extra_body={"regex": re.escape(forced)})
    r = client.responses.create(**kwargs)
    reasoning, message = r.output
    assert reasoning.type == "reasoning"
    assert reasoning.content[0].text == "I should look at the sky."
    assert message.type == "message" and r.output_text == "It is sunny."
    assert r.usage.output_tokens_details.reasoning_tokens > 0

    with client.responses.stream(**kwargs) as stream:
        thinking = "".join(e.delta for e in stream if e.type == "response.reasoning_text.delta")
        final = stream.get_final_response()
    assert thinking == "I should look at the sky."
    assert final.output_text == "It is sunny."
    assert [i.type for i in final.output] == ["reasoning", "message"]


def test_json_schema_output(plain):
    client = client_of(plain)
    schema = {"type": "object", "properties": {"name": {"type": "string", "maxLength": 20},
                                               "age": {"type": "integer", "minimum": 0,
                                                       "maximum": 150}},
              "required": ["name", "age"], "additionalProperties": False}
    # Sampled, so every field is bounded: the whole object fits well inside the cap.
    r = client.responses.create(
        model="default", input="Invent a person.", temperature=0.8, max_output_tokens=120,
        text={"format": {"type": "json_schema", "name": "person", "schema": schema,
                         "strict": True}})
    assert r.status == "completed", r
    jsonschema.validate(json.loads(r.output_text), schema)
    assert r.text.format.type == "json_schema"


def test_logprobs_ride_on_the_output_text(plain):
    client = client_of(plain)
    r = client.responses.create(model="default", input="Count: one, two,", temperature=0,
                                max_output_tokens=8, top_logprobs=2,
                                include=["message.output_text.logprobs"])
    part = r.output[0].content[0]
    assert len(part.logprobs) == r.usage.output_tokens
    assert "".join(lp.token for lp in part.logprobs) == part.text
    for lp in part.logprobs:
        assert len(lp.top_logprobs) == 2 and lp.logprob <= 0
        # Greedy: the chosen token is the most likely one.
        assert lp.logprob >= max(t.logprob for t in lp.top_logprobs) - 1e-5


@pytest.mark.parametrize("body, field", [
    ({"input": "hi", "tools": [{"type": "web_search"}]}, "tools[0]"),
    ({"input": [{"role": "user", "content": [{"type": "input_image", "image_url": "x"}]}]},
     "input[0].content"),
    ({"input": "hi", "include": ["reasoning.encrypted_content"]}, "include"),
    ({"input": "hi", "truncation": "auto"}, "truncation"),
    ({"input": "hi", "conversation": "conv_1"}, "conversation"),
    ({"input": "hi", "frobnicate": 1}, "frobnicate"),
    ({"input": "hi", "reasoning": {"summary": "auto"}}, "reasoning.summary"),
    ({"input": [{"type": "item_reference", "id": "x"}]}, "input[0]"),
    ({"model": "default"}, None),
])
def test_what_cannot_take_effect_is_refused(plain, body, field):
    r = requests.post(plain.url + "/v1/responses", json={"model": "default", **body}, timeout=30)
    assert r.status_code == 400, r.text
    error = r.json()
    assert error["object"] == "error" and error["message"]
    if field is not None:
        assert field in error["message"] or error.get("param") == field, error
    assert requests.get(plain.url + "/health", timeout=10).status_code == 200
    assert requests.get(plain.url + "/v1/responses/resp_nope", timeout=10).status_code == 404

"""Oracle for OpenAI-style messages (text parts, null fields) prepared the SGLang way: templates
that loop over message content get the parts list, all others get the text parts joined with a
space and null fields dropped. The template's content format is decided here independently with
jinja2's own parser (SGLang's AST rule), then transformers renders the prepared messages."""

import jinja2
import jinja2.nodes
import pytest

from test_chat_templates import hf_tokenizer, ours, reference, template_cases


def _accesses_content(node):
    if isinstance(node, (jinja2.nodes.Filter, jinja2.nodes.Test)):
        return node.node is not None and _accesses_content(node.node)
    if isinstance(node, jinja2.nodes.Getitem) and isinstance(node.arg, jinja2.nodes.Slice):
        return _accesses_content(node.node)
    if isinstance(node, jinja2.nodes.Getitem):
        key_ok = isinstance(node.arg, jinja2.nodes.Const) and node.arg.value == "content"
    elif isinstance(node, jinja2.nodes.Getattr):
        key_ok = node.attr == "content"
    else:
        return False
    base = node.node
    return key_ok and isinstance(base, jinja2.nodes.Name) and base.name in ("message", "msg", "m")


def content_format(source):
    if any(word in source for word in ("image", "audio", "video", "vision")):
        return "openai"
    ast = jinja2.Environment(extensions=["jinja2.ext.loopcontrols"]).parse(source)
    loops = ast.find_all(jinja2.nodes.For)
    return "openai" if any(_accesses_content(loop.iter) for loop in loops) else "string"


def prepare(message, fmt):
    out = {k: v for k, v in message.items() if v is not None}
    if not isinstance(out.get("content"), list):
        return out
    parts = [p for p in out["content"] if isinstance(p, dict)]
    if fmt == "string":
        texts = [p["text"] for p in parts if p.get("type") in ("text", "input_text")]
        out["content"] = " ".join(texts)
        return out
    kept = []
    for p in parts:
        if p.get("type") in ("text", "input_text"):
            kept.append({"type": "text", "text": p["text"]})
        elif p.get("type") in ("image_url", "input_image"):
            kept.append({"type": "image"})
    del out["content"]
    out["content"] = kept
    return out


MESSAGES = [
    {"role": "system", "content": [{"type": "text", "text": "Be brief."}]},
    {
        "role": "user",
        "name": None,
        "content": [
            {"type": "text", "text": "Describe"},
            {"type": "text", "text": "this in two words."},
        ],
    },
    {
        "role": "assistant",
        "content": None,
        "tool_calls": [
            {"id": "c1", "type": "function", "function": {"name": "look", "arguments": "{}"}}
        ],
    },
    {"role": "tool", "tool_call_id": "c1", "content": "a red apple"},
    {"role": "user", "content": [{"type": "text", "text": "So?"}]},
]


@pytest.mark.parametrize("model", template_cases())
def test_text_parts_and_null_fields(render, model):
    tok = hf_tokenizer(model)
    fmt = content_format(tok.chat_template)
    prepared = [prepare(m, fmt) for m in MESSAGES]
    expected_ok, expected = reference(tok, prepared, add_generation_prompt=True)
    got_ok, got = ours(render, model, MESSAGES, add_generation_prompt=True, prepare_messages=True)
    assert got_ok == expected_ok, (expected, got)
    if expected_ok:
        assert got == expected

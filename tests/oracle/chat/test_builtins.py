"""Builtin --chat-template names. Each builtin renders like transformers renders its source, and
the builtins that mirror a real model template produce that model's exact prompts."""

import jinja2
import pytest

from test_chat_templates import CONVERSATIONS, hf_tokenizer, ours, reference, smollm2

BUILTINS = ["chatml", "llama-2", "llama-3", "gemma-it"]
ALIASES = {"llama-2-chat": "llama-2", "llama-3-instruct": "llama-3", "gemma": "gemma-it"}
PLAIN = ["single", "unicode", "multi_turn_system", "multi_turn_no_system", "ends_with_assistant"]


def render_builtin(render, name, messages, **kwargs):
    return render({"chat_template_arg": name, "messages": messages, **kwargs})


# A real template and the builtin that must match it (on conversations it accepts).
MIRRORS = [("llama3", "llama-3"), ("gemma3", "gemma-it"), ("smollm2", "chatml")]


@pytest.mark.parametrize("add_generation_prompt", [False, True])
@pytest.mark.parametrize("conversation", PLAIN)
@pytest.mark.parametrize("model,builtin", MIRRORS)
def test_builtin_matches_real_template(render, model, builtin, conversation, add_generation_prompt):
    messages = CONVERSATIONS[conversation]
    if builtin == "chatml" and messages[0]["role"] != "system":
        pytest.skip("by design: SmolLM2 inserts its own default system prompt")
    if model == "llama3" and not add_generation_prompt:
        # Meta's Llama 3 template always appends the assistant header; the builtin obeys the flag.
        pytest.skip("by design: reference ignores add_generation_prompt=False")
    tok = smollm2()[0] if model == "smollm2" else hf_tokenizer(model)
    expected_ok, expected = reference(tok, messages, add_generation_prompt=add_generation_prompt)
    got_ok, got = render_builtin(
        render, builtin, messages, add_generation_prompt=add_generation_prompt
    )
    assert got_ok == expected_ok, (expected, got)
    if expected_ok:
        assert got == expected


def llama2_reference(messages, add_generation_prompt):
    """Meta's Llama 2 chat layout, written out from its published description."""
    if messages[0]["role"] == "system":
        system, turns = messages[0]["content"], messages[1:]
    else:
        system, turns = None, messages
    out = ""
    for i, m in enumerate(turns):
        if (m["role"] == "user") != (i % 2 == 0):
            return None
        if m["role"] == "user":
            text = m["content"]
            if i == 0 and system is not None:
                text = f"<<SYS>>\n{system}\n<</SYS>>\n\n{text}"
            out += f"<s>[INST] {text.strip()} [/INST]"
        else:
            out += f" {m['content'].strip()} </s>"
    return out


@pytest.mark.parametrize("conversation", PLAIN + ["roles_not_alternating"])
def test_llama2_layout(render, conversation):
    messages = CONVERSATIONS[conversation]
    expected = llama2_reference(messages, True)
    got_ok, got = render_builtin(render, "llama-2", messages, add_generation_prompt=True)
    if expected is None:
        assert not got_ok and "alternate" in got
    else:
        assert got_ok, got
        assert got == expected


@pytest.mark.parametrize("alias,name", sorted(ALIASES.items()))
def test_aliases(render, alias, name):
    messages = CONVERSATIONS["multi_turn_system"]
    assert render_builtin(render, alias, messages) == render_builtin(render, name, messages)


def test_unknown_builtin_lists_names(render):
    ok, message = render_builtin(render, "no-such-template", [])
    assert not ok
    for name in BUILTINS:
        assert name in message


@pytest.mark.parametrize("source", ["{% for m in messages %}", "{{ 1 + }}", "{% endif %}"])
def test_syntax_errors_are_errors_in_both(render, source):
    with pytest.raises(jinja2.TemplateSyntaxError):
        jinja2.Environment().from_string(source)
    ok, message = render({"template": source, "messages": []})
    assert not ok and "does not compile" in message


def test_named_template_list(render, tmp_path):
    """tokenizer_config.json may hold a list of named templates; "default" unless one is named."""
    import json

    config = {
        "bos_token": "<s>",
        "chat_template": [
            {
                "name": "default",
                "template": "D{% for m in messages %}[{{ m.content }}]{% endfor %}",
            },
            {"name": "tool_use", "template": "T{{ tools | length }}{{ bos_token }}"},
        ],
    }
    path = tmp_path / "tokenizer_config.json"
    path.write_text(json.dumps(config))
    messages = CONVERSATIONS["single"]
    assert render({"tokenizer_config": str(path), "messages": messages}) == (True, "D[Hello!]")
    assert render(
        {
            "tokenizer_config": str(path),
            "template_name": "tool_use",
            "messages": messages,
            "tools": [1, 2],
        }
    ) == (True, "T2<s>")
    ok, message = render(
        {"tokenizer_config": str(path), "template_name": "rag", "messages": messages}
    )
    assert not ok and "tool_use" in message

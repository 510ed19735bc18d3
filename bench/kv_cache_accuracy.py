#!/usr/bin/env python3
"""KV cache element type: teacher-forced accuracy against an fp16 KV cache (docs/kv_cache.md).

Runs radix_logits over the oracle texts (tests/oracle/model: TECH + STORY, first --tokens tokens)
once per --kv-cache-dtype and prints top-1 agreement and mean |dlogprob| of the next tokens
against the fp16 run; --kv-scales K,V pairs add fp8_e4m3 runs with those scales.

  RADIX_BUILD_DIR=<build> ~/.cache/radixserve/venv/bin/python bench/kv_cache_accuracy.py \\
      [--model PATH] [--tokens 512] [--kv-scales 0.25,0.25 4,0.25]
"""
import argparse
import pathlib
import sys
import tempfile

ORACLE = pathlib.Path(__file__).resolve().parents[1] / "tests/oracle/model"
sys.path.insert(0, str(ORACLE))
from model_oracle_helpers import SMOLLM2_GGUF, run_radix  # noqa: E402
from test_kv_fp8_oracle import agreement  # noqa: E402
from test_llama_oracle import STORY, TECH, tokenize  # noqa: E402


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--model", default=SMOLLM2_GGUF)
    parser.add_argument("--tokens", type=int, default=512)
    parser.add_argument("--dtypes", default="bf16,fp8_e4m3,fp8_e5m2,int8")
    parser.add_argument("--kv-scales", nargs="*", default=[])
    args = parser.parse_args()
    tokens = tokenize(args.model, TECH + " " + STORY)[:args.tokens]
    tmp = pathlib.Path(tempfile.mkdtemp())

    def run(*extra):
        return run_radix(args.model, tokens, tmp, "--threads", "2", *extra)

    fp16 = run("--kv-cache-dtype", "fp16")
    runs = [(d, ()) for d in args.dtypes.split(",")]
    runs += [("fp8_e4m3", ("--kv-scales", s)) for s in args.kv_scales]
    print(f"{args.model}, {len(tokens)} tokens, against an fp16 KV cache")
    print("| KV dtype | top-1 | mean |dlogprob| |\n|---|---|---|")
    for dtype, extra in runs:
        top1, dlp = agreement(fp16, run("--kv-cache-dtype", dtype, *extra), tokens)
        label = dtype + (f" (scales {extra[1]})" if extra else "")
        print(f"| {label} | {top1:.3f} | {dlp:.3f} |", flush=True)


if __name__ == "__main__":
    main()

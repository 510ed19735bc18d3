"""FP8 and int8 KV cache accuracy: SmolLM2 Q4_1 teacher-forced on ~320 tokens of text with the KV
cache stored as fp8_e4m3 / fp8_e5m2 (scale 1.0) or int8 (per-token, per-head scales), against the same run with an fp16 KV cache: top-1
agreement and mean |dlogprob| of the text's next tokens, with bounds.

The whole difference between the runs is the KV element type, so the comparison isolates it; the
fp16 run itself is checked against llama.cpp by test_llama_oracle.py. docs/kv_cache.md has the
full measurement (440 tokens, bf16 next to fp8, Q4_1 and the dequantized F32 model)."""
import numpy as np

from model_oracle_helpers import GEMMA3_F32_GGUF, SMOLLM2_GGUF, log_softmax, require, run_radix
from test_llama_oracle import STORY, TECH, tokenize


def agreement(ref, other, tokens):
    """(top-1 agreement, mean |dlogprob| of the next tokens) of `other` against `ref`."""
    nxt = np.array(tokens[1:])
    rows = np.arange(len(nxt))
    ref_lp = log_softmax(ref[:-1])[rows, nxt]
    lp = log_softmax(other[:-1])[rows, nxt]
    return (other.argmax(-1) == ref.argmax(-1)).mean(), np.abs(lp - ref_lp).mean()


def test_smollm2_fp8_kv_against_fp16_kv(tmp_path):
    model = require(SMOLLM2_GGUF)
    tokens = tokenize(model, TECH + " " + STORY)[:320]

    def run(dtype):
        return run_radix(model, tokens, tmp_path, "--threads", "2", "--kv-cache-dtype", dtype)

    fp16 = run("fp16")
    results = {dtype: agreement(fp16, run(dtype), tokens)
               for dtype in ("fp8_e4m3", "fp8_e5m2", "int8")}
    for dtype, (top1, dlp) in results.items():
        print(f"SmolLM2 Q4_1, {len(tokens)} tokens, {dtype} KV vs fp16 KV: top-1 {top1:.4f}, "
              f"mean |dlogprob| {dlp:.4f}")
    # Measured: e4m3 0.906 / 0.107, e5m2 0.897 / 0.166. Q4_1 weights meet activations rounded
    # through Q8 (as llama.cpp does), so any small change moves some logits by ~0.05
    # (test_llama_oracle.py): even a bf16 KV cache scores ~0.97 / 0.06 against fp16 here. The
    # bounds leave a margin over the measured values (docs/kv_cache.md).
    assert results["fp8_e4m3"][0] >= 0.85 and results["fp8_e4m3"][1] <= 0.15
    assert results["fp8_e5m2"][0] >= 0.84 and results["fp8_e5m2"][1] <= 0.24
    # E4M3 keeps 3 mantissa bits, E5M2 2: E5M2 loses more.
    assert results["fp8_e5m2"][1] > results["fp8_e4m3"][1]
    # int8 with a scale per token and head keeps about 7 bits of each head's range: closer to
    # fp16 than either fp8 format.
    assert results["int8"][0] >= 0.88 and results["int8"][1] < results["fp8_e4m3"][1]



def test_gemma3_int8_and_fp8_kv_against_fp16_kv(tmp_path):
    """Gemma 3 270M (F32 GGUF: the KV rounding is the only difference between the runs), with
    its sliding-window and global layers, over the same text."""
    model = require(GEMMA3_F32_GGUF)
    tokens = tokenize(model, TECH + " " + STORY)[:320]

    def run(dtype):
        return run_radix(model, tokens, tmp_path, "--threads", "2", "--kv-cache-dtype", dtype)

    fp16 = run("fp16")
    results = {dtype: agreement(fp16, run(dtype), tokens) for dtype in ("fp8_e4m3", "int8")}
    for dtype, (top1, dlp) in results.items():
        print(f"Gemma 3 270M F32, {len(tokens)} tokens, {dtype} KV vs fp16 KV: top-1 {top1:.4f}, "
              f"mean |dlogprob| {dlp:.4f}")
    # Measured on 440 tokens: e4m3 0.950 / 0.074, int8 0.952 / 0.065 (docs/kv_cache.md).
    assert results["fp8_e4m3"][0] >= 0.90 and results["fp8_e4m3"][1] <= 0.11
    assert results["int8"][0] >= 0.90 and results["int8"][1] <= 0.10

"""Gemma 3 270M Q4_K_M logits against llama.cpp on the same GGUF file, teacher-forced on a few
hundred tokens of English text."""
import numpy as np
import pytest

from model_oracle_helpers import (GEMMA3_F32_GGUF, GEMMA3_GGUF, log_softmax, require,
                                  run_radix)
from test_llama_oracle import TECH, llama_cpp_logits, tokenize


def test_gemma3_f32_matches_llama_cpp(tmp_path):
    """Weights dequantized to float32 for both sides. The remaining ~1e-2 logit difference is
    llama.cpp's GELU, which reads a float16 lookup table; ours computes tanh-GELU in float32."""
    model = require(GEMMA3_F32_GGUF)
    tokens = tokenize(model, TECH)
    ref = llama_cpp_logits(model, tokens, 512)
    ours = run_radix(model, tokens, tmp_path, "--threads", "2")
    top1 = (ours.argmax(-1) == ref.argmax(-1)).mean()
    max_diff = np.abs(ours - ref).max()
    print(f"Gemma 3 dequantized F32: {len(tokens)} tokens, top-1 {top1:.4f}, max |dlogit| {max_diff:.3f}")
    assert top1 >= 0.995
    assert max_diff < 0.1


# As for SmolLM2 Q4_1 (default Q8_0/Q8_K activation rounding like llama.cpp), plus llama.cpp's
# float16 GELU table. Measured on this text: top-1 0.931, mean |dlogprob| 0.091 (0.926 with the
# int8 kernels; 0.926 / 0.077 with --exact-activations).
@pytest.mark.xfail(reason="top-1 ~0.93 < 0.98: activation rounding amplifies llama.cpp's float16 "
                          "GELU and float differences", strict=False)
def test_gemma3_q4_k_m_matches_llama_cpp(tmp_path):
    model = require(GEMMA3_GGUF)
    tokens = tokenize(model, TECH)
    assert len(tokens) >= 200
    ref = llama_cpp_logits(model, tokens, 512)
    ours = run_radix(model, tokens, tmp_path, "--threads", "2")
    top1 = (ours.argmax(-1) == ref.argmax(-1)).mean()
    nxt = np.array(tokens[1:])
    lp_ours = log_softmax(ours[:-1])[np.arange(len(nxt)), nxt]
    lp_ref = log_softmax(ref[:-1])[np.arange(len(nxt)), nxt]
    mean_lp = np.abs(lp_ours - lp_ref).mean()
    print(f"Gemma 3 270M Q4_K_M: {len(tokens)} tokens, top-1 agreement {top1:.4f}, "
          f"mean |dlogprob| {mean_lp:.4f}")
    assert top1 >= 0.98
    assert mean_lp < 0.05

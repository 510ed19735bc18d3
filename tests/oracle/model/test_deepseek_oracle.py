"""DeepSeek-V2-Lite-like and DeepSeek-V3-like models (GGUF arch deepseek2: MLA, MoE with shared
experts, YaRN) against llama.cpp (llama-cpp-python) on the same random-weight file
(deepseek_checkpoint.py): teacher-forced logits at every position of a 481-token prompt (YaRN's
original context is 128), and llama.cpp's own greedy continuation; the F32 files check the
architecture exactly, in the current split form (attn_k_b / attn_v_b) and the legacy one
(attn_kv_b), a Q8_0 file also the quantized path. Then the HF forms of the same weights: against
transformers' DeepseekV2ForCausalLM / DeepseekV3ForCausalLM, and against the GGUF forms. The
checkpoints themselves are validated too: llama.cpp on the GGUF and transformers on the HF folder
agree, so both are the same model.

The seeds are chosen so that on this prompt no routing decision is close to a tie (the k-th and
(k+1)-th router logits of "lite" differ by >= 1e-3, V3's group and expert scores by >= 3e-4):
float rounding differences cannot flip an expert choice."""

import numpy as np
import pytest

from deepseek_checkpoint import SHAPES, dequantized, write_gguf, write_hf
from model_oracle_helpers import (assert_rounding_bounded_agreement, run_radix,
                                  transformers_logits)
from test_llama_oracle import STORY, llama_cpp_logits, tokenize
from test_moe_oracle import llama_cpp_greedy


VARIANTS = ["lite", "v3"]
SEEDS = {"lite": 4, "v3": 7}
# Each override reaches one peculiarity of the variant (HF config keys, which the GGUF path maps
# too): the routed scaling factor, and V3's group-limited routing.
OVERRIDES = {"lite": ['{"routed_scaling_factor": 1.0}'],
             "v3": ['{"routed_scaling_factor": 1.0}', '{"n_group": 1, "topk_group": 1}']}


def compare(ours, ref, label, max_abs=1e-3):
    top1 = (ours.argmax(-1) == ref.argmax(-1)).mean()
    max_diff = np.abs(ours - ref).max()
    print(f"{label}: {len(ours)} tokens, top-1 {top1:.4f}, max |dlogit| {max_diff:.2e}")
    assert top1 == 1.0
    assert max_diff < max_abs
    return max_diff


@pytest.mark.parametrize("variant", VARIANTS)
def test_deepseek_checkpoint_is_one_model(tmp_path, variant):
    """The oracle's premise: llama.cpp on the GGUF (split and legacy forms) and transformers on the
    HF folder compute the same logits (measured: ~1e-5), so the rotary layout, the kv_b split,
    the YaRN temperature and the routing semantics of both files agree."""
    model = str(tmp_path / f"deepseek-{variant}.gguf")
    w = write_gguf(model, "F32", seed=SEEDS[variant], variant=variant)
    legacy = str(tmp_path / f"deepseek-{variant}-legacy.gguf")
    write_gguf(legacy, "F32", variant=variant, legacy_kv_b=True, weights=w)
    hf = tmp_path / "hf"
    write_hf(str(hf), w, variant)
    tokens = tokenize(model, STORY)
    ref = transformers_logits(hf, tokens, tmp_path)
    compare(llama_cpp_logits(model, tokens, 512), ref, f"deepseek {variant} llama.cpp vs "
            "transformers")
    compare(llama_cpp_logits(legacy, tokens, 512), ref, f"deepseek {variant} legacy llama.cpp "
            "vs transformers")


@pytest.mark.parametrize("variant", VARIANTS)
def test_deepseek_f32_matches_llama_cpp(tmp_path, variant):
    model = str(tmp_path / f"deepseek-{variant}.gguf")
    write_gguf(model, "F32", seed=SEEDS[variant], variant=variant)
    tokens = tokenize(model, STORY)
    assert len(tokens) > 3 * SHAPES[variant]["yarn_original"]
    ref = llama_cpp_logits(model, tokens, 512)
    ours = run_radix(model, tokens, tmp_path, "--threads", "2")
    max_diff = compare(ours, ref, f"deepseek {variant} F32")
    # The test reaches the model's peculiarities: without the routed scaling, or (V3) without
    # group-limited routing, the logits move far past the tolerance.
    for override in OVERRIDES[variant]:
        moved = run_radix(model, tokens, tmp_path, "--threads", "2",
                          "--json-model-override-args", override)
        assert np.abs(moved - ref).max() > max(100 * max_diff, 0.1), override

    # Greedy: llama.cpp's own continuation, decoded token by token (its decode path, the latent
    # KV cache included), is our argmax everywhere.
    prompt = tokens[:40]
    cont = llama_cpp_greedy(model, prompt, 24)
    seq = prompt + cont
    ours = run_radix(model, seq, tmp_path, "--threads", "2")
    assert ours[len(prompt) - 1: -1].argmax(-1).tolist() == cont


@pytest.mark.parametrize("variant", VARIANTS)
def test_deepseek_legacy_kv_b_matches(tmp_path, variant):
    """A GGUF converted before the MLA split (one attn_kv_b, key_length = qk_nope + rope, no
    *_mla keys) computes what the split file computes, and what llama.cpp computes on it."""
    split = str(tmp_path / f"deepseek-{variant}.gguf")
    w = write_gguf(split, "F32", seed=SEEDS[variant], variant=variant)
    legacy = str(tmp_path / f"deepseek-{variant}-legacy.gguf")
    write_gguf(legacy, "F32", variant=variant, legacy_kv_b=True, weights=w)
    tokens = tokenize(split, STORY)
    a = run_radix(split, tokens, tmp_path, "--threads", "2")
    b = run_radix(legacy, tokens, tmp_path, "--threads", "2")
    diff = np.abs(a - b).max()
    print(f"deepseek {variant} legacy vs split: max |dlogit| {diff:.2e}")
    assert diff < 1e-4
    compare(b, llama_cpp_logits(legacy, tokens, 512), f"deepseek {variant} legacy F32")


@pytest.mark.parametrize("variant", VARIANTS)
def test_deepseek_q8_0_matches_llama_cpp(tmp_path, variant):
    """Q8_0 matrices meet Q8_0-rounded activations as in llama.cpp: agreement is bounded by int8
    rounding flips (see test_moe_oracle's Q8_0 test)."""
    model = str(tmp_path / f"deepseek-{variant}-q8_0.gguf")
    w = write_gguf(model, "Q8_0", seed=SEEDS[variant], variant=variant)
    tokens = tokenize(model, STORY)
    ref = llama_cpp_logits(model, tokens, 512)
    ours = run_radix(model, tokens, tmp_path, "--threads", "2")
    assert_rounding_bounded_agreement(ours, ref, tokens, f"deepseek {variant} Q8_0",
                                      router_flips=1 if variant == "v3" else 0)
    # The format decodes right: with exact float activations the Q8_0 file computes what
    # llama.cpp computes on an F32 file of the decoded weights (gguf-py's Q8_0 dequantizer).
    decoded = str(tmp_path / f"deepseek-{variant}-decoded.gguf")
    write_gguf(decoded, "F32", variant=variant, weights=dequantized(w, "Q8_0"))
    ref_decoded = llama_cpp_logits(decoded, tokens, 512)
    exact = run_radix(model, tokens, tmp_path, "--threads", "2", "--exact-activations")
    diff = np.abs(exact - ref_decoded).max()
    print(f"deepseek {variant} Q8_0 exact activations vs llama.cpp on the decoded F32 file: "
          f"{diff:.2e}")
    assert diff < 1e-3


@pytest.mark.parametrize("variant", VARIANTS)
def test_deepseek_hf_matches_transformers_and_gguf(tmp_path, variant):
    """The HF folder (the published checkpoints' names: per-expert tensors, kv_b_proj unsplit,
    e_score_correction_bias; the real configs' keys, rope_scaling in the legacy "type" form)
    against transformers, and against the GGUF of the same weights."""
    model = str(tmp_path / f"deepseek-{variant}.gguf")
    w = write_gguf(model, "F32", seed=SEEDS[variant], variant=variant)
    hf = tmp_path / "hf"
    write_hf(str(hf), w, variant)
    tokens = tokenize(model, STORY)[:200]
    ours = run_radix(str(hf), tokens, tmp_path, "--threads", "2")
    compare(ours, transformers_logits(hf, tokens, tmp_path), f"deepseek {variant} HF vs "
            "transformers")
    diff = np.abs(ours - run_radix(model, tokens, tmp_path, "--threads", "2")).max()
    print(f"deepseek {variant} HF vs GGUF: max |dlogit| {diff:.2e}")
    assert diff < 1e-3

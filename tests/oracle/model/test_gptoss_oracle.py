"""gpt-oss (GGUF arch gpt-oss) against llama.cpp (llama-cpp-python) on the same random-weight file
(gptoss_checkpoint.py): teacher-forced logits at every position of a 481-token prompt (the
sliding window is 24), and llama.cpp's own greedy continuation; the F32 file checks the
architecture exactly, the MXFP4 one (experts in MXFP4, as the real gpt-oss GGUFs ship) also the
format and llama.cpp's Q8_0 rounding of the activations that meet it. Then the HF forms of the
same weights: float experts against transformers' GptOssForCausalLM, and both float and MXFP4
(U8 blocks and scales, as OpenAI publishes gpt-oss) against the GGUF forms."""
import subprocess

import numpy as np
import pytest

from gptoss_checkpoint import SHAPE, dequantized, write_gguf, write_hf
from model_oracle_helpers import (assert_rounding_bounded_agreement, radix_logits_binary,
                                  run_radix, transformers_logits)
from test_llama_oracle import STORY, llama_cpp_logits, tokenize
from test_moe_oracle import llama_cpp_greedy



def test_gptoss_f32_matches_llama_cpp(tmp_path):
    model = str(tmp_path / "gptoss-f32.gguf")
    write_gguf(model, "F32", seed=1)
    tokens = tokenize(model, STORY)
    assert len(tokens) > 10 * SHAPE["window"]
    ref = llama_cpp_logits(model, tokens, 512)
    ours = run_radix(model, tokens, tmp_path, "--threads", "2")
    top1 = (ours.argmax(-1) == ref.argmax(-1)).mean()
    max_diff = np.abs(ours - ref).max()
    print(f"gpt-oss F32: {len(tokens)} tokens, top-1 {top1:.4f}, max |dlogit| {max_diff:.2e}")
    assert top1 == 1.0
    assert max_diff < 1e-3
    # The test reaches each of the model's peculiarities: without the SwiGLU clamp, or without
    # the sliding window, the logits move far past the tolerance.
    for override in ('{"swiglu_limit": 1000.0}', '{"sliding_window": null}'):
        moved = run_radix(model, tokens, tmp_path, "--threads", "2",
                          "--json-model-override-args", override)
        assert np.abs(moved - ref).max() > 100 * max_diff, override

    # Greedy: llama.cpp's own continuation, decoded token by token (its decode path, the sliding
    # window cache included), is our argmax everywhere.
    prompt = tokens[:40]
    cont = llama_cpp_greedy(model, prompt, 24)
    seq = prompt + cont
    ours = run_radix(model, seq, tmp_path, "--threads", "2")
    assert ours[len(prompt) - 1: -1].argmax(-1).tolist() == cont


def test_gptoss_mxfp4_matches_llama_cpp(tmp_path):
    """MXFP4 experts meet Q8_0-rounded activations as in llama.cpp: agreement is bounded by int8
    rounding flips (see test_moe_oracle's Q8_0 test)."""
    model = str(tmp_path / "gptoss-mxfp4.gguf")
    w = write_gguf(model, "MXFP4", seed=2)
    tokens = tokenize(model, STORY)
    ref = llama_cpp_logits(model, tokens, 512)
    ours = run_radix(model, tokens, tmp_path, "--threads", "2")
    assert_rounding_bounded_agreement(ours, ref, tokens, "gpt-oss MXFP4")
    # The format decodes right: with exact float activations the MXFP4 file computes what
    # llama.cpp computes on an F32 file of the decoded weights (gguf-py's MXFP4 dequantizer).
    decoded = str(tmp_path / "gptoss-decoded.gguf")
    write_gguf(decoded, "F32", weights=dequantized(w, "MXFP4"))
    ref_decoded = llama_cpp_logits(decoded, tokens, 512)
    exact = run_radix(model, tokens, tmp_path, "--threads", "2", "--exact-activations")
    diff = np.abs(exact - ref_decoded).max()
    print(f"gpt-oss MXFP4 exact activations vs llama.cpp on the decoded F32 file: {diff:.2e}")
    assert diff < 1e-3


def test_gptoss_hf_matches_transformers(tmp_path):
    """The HF folder (transformers' layout: experts stacked input-first, gate and up interleaved;
    gpt-oss's own config, YaRN without truncation) against transformers' GptOssForCausalLM."""
    model = str(tmp_path / "gptoss-f32.gguf")
    w = write_gguf(model, "F32", seed=3)
    hf = tmp_path / "hf"
    write_hf(str(hf), w)
    tokens = tokenize(model, STORY)[:200]
    ref = transformers_logits(hf, tokens, tmp_path)
    ours = run_radix(str(hf), tokens, tmp_path, "--threads", "2")
    top1 = (ours.argmax(-1) == ref.argmax(-1)).mean()
    max_diff = np.abs(ours - ref).max()
    print(f"gpt-oss HF vs transformers: {len(tokens)} tokens, top-1 {top1:.4f}, "
          f"max |dlogit| {max_diff:.2e}")
    assert top1 == 1.0
    assert max_diff < 1e-3


@pytest.mark.parametrize("mxfp4", [False, True])
def test_gptoss_hf_equals_gguf(tmp_path, mxfp4):
    """The HF folder of a GGUF's weights computes what the GGUF computes (YaRN truncated as
    llama.cpp does): float experts against the F32 file, and the published checkpoints' MXFP4
    blocks and scales against the MXFP4 file (same codes and exponents; exact activations)."""
    quant = "MXFP4" if mxfp4 else "F32"
    model = str(tmp_path / f"gptoss-{quant}.gguf")
    w = write_gguf(model, quant, seed=4)
    hf = tmp_path / "hf"
    write_hf(str(hf), w, mxfp4=mxfp4, truncate=True)
    tokens = tokenize(model, STORY)[:160]
    a = run_radix(model, tokens, tmp_path, "--exact-activations")
    b = run_radix(str(hf), tokens, tmp_path)
    diff = np.abs(a - b).max()
    print(f"gpt-oss {quant} HF vs GGUF: max |dlogit| {diff:.2e}")
    assert diff < 1e-3


def test_gptoss_hf_malformed_experts_are_refused(tmp_path):
    """A checkpoint whose MXFP4 scales disagree with their blocks, or whose blocks are not U8,
    is refused with a message naming the tensor (no crash, no silent garbage)."""
    from safetensors.numpy import load_file, save_file
    model = str(tmp_path / "gptoss.gguf")
    w = write_gguf(model, "F32", seed=5)
    tokens = tokenize(model, STORY)[:16]
    tokens_file = tmp_path / "tokens.txt"
    tokens_file.write_text(",".join(str(t) for t in tokens))
    for name, broken in (("down_proj_scales", lambda t: t[:, :, :1]),
                         ("gate_up_proj_blocks", lambda t: t.astype(np.int8))):
        hf = tmp_path / f"hf-{name}"
        write_hf(str(hf), w, mxfp4=True)
        tensors = load_file(str(hf / "model.safetensors"))
        key = f"model.layers.1.mlp.experts.{name}"
        tensors[key] = np.ascontiguousarray(broken(tensors[key]))
        save_file(tensors, str(hf / "model.safetensors"))
        proc = subprocess.run([radix_logits_binary(), "--model", str(hf), "--tokens-file",
                               str(tokens_file), "--logits-out", str(tmp_path / "l.f32")],
                              capture_output=True, text=True)
        assert proc.returncode != 0
        assert name in proc.stderr and proc.returncode in (1, 2), proc.stderr[-2000:]

"""Qwen3-MoE (GGUF arch qwen3moe), Qwen2-MoE (qwen2moe: shared expert with a sigmoid gate), OLMoE
(olmoe) and Mixtral (GGUF arch llama with experts) against llama.cpp (llama-cpp-python) on the same random-weight
file (moe_checkpoint.py): teacher-forced logits at every position, and llama.cpp's own greedy
continuation; then the HF safetensors form of the same weights against the GGUF form."""
import json
import subprocess

import numpy as np
import pytest

from model_oracle_helpers import assert_rounding_bounded_agreement, radix_logits_binary, run_radix
from moe_checkpoint import SHAPE, dequantized, write_gguf, write_hf
from test_llama_oracle import STORY, _without_extra_buffer_types, llama_cpp_logits, tokenize


def llama_cpp_greedy(model_path, prompt, n, lora_path=None, n_ctx=256):
    """n tokens of llama.cpp's own greedy decoding (one token per step: its decode path), with a
    GGUF LoRA adapter at scale 1 when lora_path is given."""
    llama_cpp = pytest.importorskip("llama_cpp")
    _without_extra_buffer_types(llama_cpp)
    llm = llama_cpp.Llama(model_path=model_path, lora_path=lora_path, n_ctx=n_ctx, n_threads=2,
                          verbose=False,
                          type_k=llama_cpp.GGML_TYPE_F32, type_v=llama_cpp.GGML_TYPE_F32)
    out = []
    for tok in llm.generate(prompt, top_k=1, top_p=1.0, temp=0.0, repeat_penalty=1.0):
        out.append(tok)
        if len(out) == n:
            break
    return out


def routing_spread(w, tokens):
    """How many experts the layer-0 router picks over these tokens (sanity: not one expert)."""
    x = w["token_embd.weight"][tokens]
    x = x / np.sqrt((x * x).mean(-1, keepdims=True) + SHAPE["eps"])
    # Not the exact layer-0 input (attention comes first); only checks the router is not inert.
    logits = x @ w["blk.0.ffn_gate_inp.weight"].T
    return len(set(np.argsort(-logits, axis=-1)[:, : SHAPE["top_k"]].ravel().tolist()))


def test_qwen3moe_f32_matches_llama_cpp(tmp_path):
    model = str(tmp_path / "qwen3moe-f32.gguf")
    w = write_gguf(model, "F32", seed=1)
    tokens = tokenize(model, STORY)
    assert 200 <= len(tokens) <= 512
    assert routing_spread(w, tokens) == SHAPE["experts"]
    ref = llama_cpp_logits(model, tokens, 512)
    ours = run_radix(model, tokens, tmp_path, "--threads", "2")
    top1 = (ours.argmax(-1) == ref.argmax(-1)).mean()
    max_diff = np.abs(ours - ref).max()
    print(f"qwen3moe F32: {len(tokens)} tokens, top-1 {top1:.4f}, max |dlogit| {max_diff:.2e}")
    assert top1 == 1.0
    assert max_diff < 1e-3
    # The routing details are visible: without renormalizing the top-k weights the logits move.
    unnormed = run_radix(model, tokens, tmp_path, "--threads", "2",
                         "--json-model-override-args", '{"norm_topk_prob": false}')
    assert np.abs(unnormed - ref).max() > 100 * max_diff

    # Greedy: llama.cpp's own continuation, decoded token by token, is our argmax everywhere.
    prompt = tokens[:24]
    cont = llama_cpp_greedy(model, prompt, 24)
    seq = prompt + cont
    ours = run_radix(model, seq, tmp_path, "--threads", "2")
    assert ours[len(prompt) - 1: -1].argmax(-1).tolist() == cont


def test_qwen3moe_q8_0_matches_llama_cpp(tmp_path):
    """Q8_0 experts and attention (router in F32), activations rounded through Q8_0 as llama.cpp
    does: agreement is bounded by int8 rounding flips (see test_llama_oracle.quantized_agreement)."""
    model = str(tmp_path / "qwen3moe-q8_0.gguf")
    write_gguf(model, "Q8_0", seed=2)
    tokens = tokenize(model, STORY)
    ref = llama_cpp_logits(model, tokens, 512)
    ours = run_radix(model, tokens, tmp_path, "--threads", "2")
    assert_rounding_bounded_agreement(ours, ref, tokens, "qwen3moe Q8_0")


@pytest.mark.parametrize("quant", ["F32", "Q8_0"])
def test_qwen3moe_hf_equals_gguf(tmp_path, quant):
    """The HF folder holds the GGUF's weights (dequantized for Q8_0) as per-expert float32
    tensors; with exact float32 activations both forms compute the same model."""
    model = str(tmp_path / f"qwen3moe-{quant}.gguf")
    w = write_gguf(model, quant, seed=3)
    hf = tmp_path / "hf"
    write_hf(str(hf), dequantized(w, quant))
    tokens = tokenize(model, STORY)[:128]
    a = run_radix(model, tokens, tmp_path, "--exact-activations")
    b = run_radix(str(hf), tokens, tmp_path)
    diff = np.abs(a - b).max()
    print(f"qwen3moe {quant} HF vs GGUF: max |dlogit| {diff:.2e}")
    assert diff < 1e-3


def test_mixtral_f32_matches_llama_cpp(tmp_path):
    """Mixtral as llama.cpp writes it: arch llama with llama.expert_count, interleaved Q/K rows."""
    model = str(tmp_path / "mixtral-f32.gguf")
    write_gguf(model, "F32", seed=4, arch="llama")
    tokens = tokenize(model, STORY)
    ref = llama_cpp_logits(model, tokens, 512)
    ours = run_radix(model, tokens, tmp_path, "--threads", "2")
    top1 = (ours.argmax(-1) == ref.argmax(-1)).mean()
    max_diff = np.abs(ours - ref).max()
    print(f"mixtral F32: {len(tokens)} tokens, top-1 {top1:.4f}, max |dlogit| {max_diff:.2e}")
    assert top1 == 1.0
    assert max_diff < 1e-3


def test_mixtral_per_expert_gguf_equals_stacked(tmp_path):
    """An older Mixtral GGUF, one tensor per expert (blk.N.ffn_gate.E.weight), runs the same
    model as the stacked file llama.cpp converts today (and reads; it no longer reads the older
    form), whose logits match llama.cpp's."""
    stacked = str(tmp_path / "mixtral-f32.gguf")
    write_gguf(stacked, "F32", seed=5, arch="llama")
    split = str(tmp_path / "mixtral-per-expert-f32.gguf")
    write_gguf(split, "F32", seed=5, arch="llama", per_expert=True)
    tokens = tokenize(stacked, STORY)[:200]
    a = run_radix(stacked, tokens, tmp_path)
    b = run_radix(split, tokens, tmp_path)
    assert np.abs(a - b).max() == 0
    assert np.abs(a - llama_cpp_logits(stacked, tokens, 512)).max() < 1e-3


def test_mixtral_hf_equals_gguf(tmp_path):
    model = str(tmp_path / "mixtral-f32.gguf")
    w = write_gguf(model, "F32", seed=5, arch="llama")
    hf = tmp_path / "hf"
    write_hf(str(hf), w, arch="llama")
    tokens = tokenize(model, STORY)[:128]
    a = run_radix(model, tokens, tmp_path)
    b = run_radix(str(hf), tokens, tmp_path)
    diff = np.abs(a - b).max()
    print(f"mixtral HF vs GGUF: max |dlogit| {diff:.2e}")
    assert diff < 1e-3


def test_qwen2moe_f32_matches_llama_cpp(tmp_path):
    """Qwen2-MoE: softmax top-k without renormalization, plus the sigmoid-gated shared expert."""
    model = str(tmp_path / "qwen2moe-f32.gguf")
    w = write_gguf(model, "F32", seed=6, arch="qwen2moe")
    tokens = tokenize(model, STORY)
    ref = llama_cpp_logits(model, tokens, 512)
    ours = run_radix(model, tokens, tmp_path, "--threads", "2")
    top1 = (ours.argmax(-1) == ref.argmax(-1)).mean()
    max_diff = np.abs(ours - ref).max()
    print(f"qwen2moe F32: {len(tokens)} tokens, top-1 {top1:.4f}, max |dlogit| {max_diff:.2e}")
    assert top1 == 1.0
    assert max_diff < 1e-3
    # The shared expert matters: dropping it moves the logits far more than the tolerance.
    no_shared = run_radix(model, tokens, tmp_path, "--threads", "2",
                          "--json-model-override-args", '{"shared_expert_intermediate_size": 0}')
    assert np.abs(no_shared - ref).max() > 100 * max_diff

    hf = tmp_path / "hf"
    write_hf(str(hf), w, arch="qwen2moe")
    b = run_radix(str(hf), tokens[:128], tmp_path)
    a = run_radix(model, tokens[:128], tmp_path)
    diff = np.abs(a - b).max()
    print(f"qwen2moe HF vs GGUF: max |dlogit| {diff:.2e}")
    assert diff < 1e-3


def test_dtype_converts_stacked_experts(tmp_path):
    """--dtype float32 on an F16 file converts the stacked 3-D expert tensors too (the weight
    footprint is then every tensor at 4 bytes per element), and the logits stay those of the F16
    weights (with exact float32 activations: by default GGUF F16 weights meet f16-rounded
    activations, as in llama.cpp)."""
    model = str(tmp_path / "qwen3moe-f16.gguf")
    w = write_gguf(model, "F16", seed=7)
    tokens = tokenize(model, STORY)[:64]
    f32_bytes = sum(t.size * 4 for t in w.values())
    tokens_file = tmp_path / "tokens.txt"
    tokens_file.write_text(",".join(str(t) for t in tokens))
    proc = subprocess.run([radix_logits_binary(), "--model", model, "--tokens-file",
                           str(tokens_file), "--dtype", "float32", "--exact-activations",
                           "--logits-out",
                           str(tmp_path / "converted.f32")], capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr
    assert json.loads(proc.stdout)["weight_bytes"] == f32_bytes
    converted = np.fromfile(tmp_path / "converted.f32", dtype=np.float32).reshape(len(tokens), -1)
    stored = run_radix(model, tokens, tmp_path, "--exact-activations")
    diff = np.abs(converted - stored).max()
    print(f"qwen3moe F16 stored vs converted to F32: max |dlogit| {diff:.2e}")
    assert diff < 1e-4


def test_olmoe_f32_matches_llama_cpp(tmp_path):
    """OLMoE: RMSNorm over the whole Q and K projections, 16 experts top-4, no renormalization."""
    model = str(tmp_path / "olmoe-f32.gguf")
    w = write_gguf(model, "F32", seed=8, arch="olmoe")
    tokens = tokenize(model, STORY)
    ref = llama_cpp_logits(model, tokens, 512)
    ours = run_radix(model, tokens, tmp_path, "--threads", "2")
    top1 = (ours.argmax(-1) == ref.argmax(-1)).mean()
    max_diff = np.abs(ours - ref).max()
    print(f"olmoe F32: {len(tokens)} tokens, top-1 {top1:.4f}, max |dlogit| {max_diff:.2e}")
    assert top1 == 1.0
    assert max_diff < 1e-3
    renormed = run_radix(model, tokens, tmp_path, "--threads", "2",
                         "--json-model-override-args", '{"norm_topk_prob": true}')
    assert np.abs(renormed - ref).max() > 100 * max_diff

    hf = tmp_path / "hf"
    write_hf(str(hf), w, arch="olmoe")
    b = run_radix(str(hf), tokens[:128], tmp_path)
    a = run_radix(model, tokens[:128], tmp_path)
    diff = np.abs(a - b).max()
    print(f"olmoe HF vs GGUF: max |dlogit| {diff:.2e}")
    assert diff < 1e-3

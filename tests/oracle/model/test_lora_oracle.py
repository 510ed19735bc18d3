"""LoRA adapters against independent references: llama.cpp (llama-cpp-python) running the base
model with the same GGUF LoRA file, and llama.cpp running a copy of the base whose weights NumPy
merged to W + (alpha/r) B A (tests/fixtures/lora_files.py). PEFT-format adapters are checked
against the merged copy (the GGUF base's Q/K rows are permuted as llama.cpp's converter does, so
the PEFT update must be too), GGUF LoRA files against llama.cpp's own LoRA path."""
import json
import os
import subprocess
import sys

import numpy as np
from model_oracle_helpers import (SMOLLM2_F32_GGUF, SMOLLM2_GGUF, SMOLLM2_HF, STORIES_GGUF,
                                  STORIES_HF, compare_adapter_logits, radix_logits_binary,
                                  require, run_radix)
from test_llama_oracle import STORY, TECH, llama_cpp_logits, quantized_agreement, tokenize

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "../../fixtures"))
from lora_files import Adapter, Shape, merge_into_gguf, merge_into_hf  # noqa: E402


def llama_cpp_lora_logits(model_path, lora_path, tokens, n_ctx=512):
    return llama_cpp_logits(model_path, tokens, n_ctx, lora_path=lora_path)


def stories_shape():
    return Shape.from_hf_config(os.path.join(require(STORIES_HF), "config.json"))



def test_gguf_lora_matches_llama_cpp_lora(tmp_path):
    model = require(STORIES_GGUF)
    adapter = Adapter(stories_shape(), seed=3, rank=4, alpha=8)
    lora = adapter.write_gguf(str(tmp_path / "lora.gguf"), "llama")
    tokens = tokenize(model, STORY)
    ref = llama_cpp_lora_logits(model, lora, tokens)
    base = llama_cpp_logits(model, tokens, 512)
    ours = run_radix(model, tokens, tmp_path, "--lora", lora)
    compare_adapter_logits(ours, ref, base, "stories260K + GGUF LoRA vs llama.cpp --lora",
                           5e-3)


def test_peft_lora_matches_merged_weights_in_llama_cpp(tmp_path):
    """PEFT (HF row order) on the GGUF base (interleaved Q/K rows): rsLoRA scaling, a subset of
    targets, and F16 matrices."""
    model = require(STORIES_GGUF)
    adapter = Adapter(stories_shape(), seed=5, rank=8, alpha=4, rslora=True,
                      targets=("q_proj", "k_proj", "o_proj", "up_proj", "down_proj"))
    peft_dir = adapter.write_peft(str(tmp_path / "peft"), dtype=np.float16)
    # The reference merges what the file holds (F16-rounded A and B).
    for key, (a, b) in adapter.mats.items():
        adapter.mats[key] = (a.astype(np.float16).astype(np.float32),
                             b.astype(np.float16).astype(np.float32))
    merged = merge_into_gguf(model, str(tmp_path / "merged.gguf"),
                             {k: adapter.delta(*k, gguf_llama_rows=True) for k in adapter.mats})
    tokens = tokenize(model, STORY)
    ref = llama_cpp_logits(merged, tokens, 512)
    base = llama_cpp_logits(model, tokens, 512)
    ours = run_radix(model, tokens, tmp_path, "--lora", peft_dir)
    compare_adapter_logits(ours, ref, base, "stories260K GGUF + PEFT vs merged in llama.cpp",
                           5e-3)


def test_both_forms_on_the_hf_base_match_merged_hf(tmp_path):
    """On the HF base (rotate-half rows): the PEFT folder and the GGUF LoRA (interleaved rows,
    permuted back) both equal the NumPy-merged HF copy."""
    hf = require(STORIES_HF)
    adapter = Adapter(stories_shape(), seed=7, rank=4, alpha=16)
    peft_dir = adapter.write_peft(str(tmp_path / "peft"))
    lora = adapter.write_gguf(str(tmp_path / "lora.gguf"), "llama")
    merged = merge_into_hf(hf, str(tmp_path / "merged"), {k: adapter.delta(*k) for k in adapter.mats})
    tokens = tokenize(require(STORIES_GGUF), STORY)
    ref = run_radix(merged, tokens, tmp_path)
    base = run_radix(hf, tokens, tmp_path)
    # The merged HF copy itself against llama.cpp on the merged GGUF (so the reference is not ours
    # alone).
    merged_gguf = merge_into_gguf(STORIES_GGUF, str(tmp_path / "merged.gguf"),
                                  {k: adapter.delta(*k, gguf_llama_rows=True) for k in adapter.mats})
    assert np.abs(ref - llama_cpp_logits(merged_gguf, tokens, 512)).max() < 5e-3
    compare_adapter_logits(run_radix(hf, tokens, tmp_path, "--lora", peft_dir), ref, base,
                           "HF + PEFT", 5e-3)
    compare_adapter_logits(run_radix(hf, tokens, tmp_path, "--lora", lora), ref, base,
                           "HF + GGUF LoRA", 5e-3)


def test_smollm2_f32_peft_matches_merged_weights_in_llama_cpp(tmp_path):
    model = require(SMOLLM2_F32_GGUF)
    shape = Shape.from_hf_config(os.path.join(require(SMOLLM2_HF), "config.json"))
    adapter = Adapter(shape, seed=11, rank=16, alpha=32, std=0.05)
    peft_dir = adapter.write_peft(str(tmp_path / "peft"))
    merged = merge_into_gguf(model, str(tmp_path / "merged.gguf"),
                             {k: adapter.delta(*k, gguf_llama_rows=True) for k in adapter.mats})
    tokens = tokenize(model, TECH)[:256]
    ref = llama_cpp_logits(merged, tokens, 512)
    base = llama_cpp_logits(model, tokens, 512)
    ours = run_radix(model, tokens, tmp_path, "--lora", peft_dir, "--threads", "2")
    compare_adapter_logits(ours, ref, base, "SmolLM2 F32 + PEFT vs merged in llama.cpp", 2e-3)


def test_smollm2_q4_1_gguf_lora_matches_llama_cpp_lora(tmp_path):
    """Quantized base: llama.cpp with the same LoRA file (its quantized activations, which
    radixserve reproduces), judged like the quantized oracle tests (quantized_agreement)."""
    model = require(SMOLLM2_GGUF)
    shape = Shape.from_hf_config(os.path.join(require(SMOLLM2_HF), "config.json"))
    adapter = Adapter(shape, seed=13, rank=16, alpha=32, std=0.05)
    lora = adapter.write_gguf(str(tmp_path / "lora.gguf"), "llama")
    tokens = tokenize(model, TECH)[:128]
    moved = np.abs(llama_cpp_lora_logits(model, lora, tokens) - llama_cpp_logits(model, tokens, 512))
    assert moved.max() > 1.0
    quantized_agreement(model, tmp_path, "SmolLM2 Q4_1 + GGUF LoRA", lora_path=lora)


def test_bad_adapters_are_refused_with_the_reason(tmp_path):
    model = require(STORIES_GGUF)
    adapter = Adapter(stories_shape(), seed=1, rank=4)
    peft_dir = adapter.write_peft(str(tmp_path / "peft"))
    cfg_path = os.path.join(peft_dir, "adapter_config.json")
    cfg = json.load(open(cfg_path))
    cfg["modules_to_save"] = ["lm_head"]
    json.dump(cfg, open(cfg_path, "w"))
    proc = subprocess.run([radix_logits_binary(), "--model", model, "--tokens", "1,2,3", "--lora",
                           peft_dir], capture_output=True, text=True)
    assert proc.returncode != 0 and "modules_to_save" in proc.stderr
    wrong = Adapter(Shape(32, 172, 5, 8, 4, 8), seed=1).write_gguf(str(tmp_path / "w.gguf"), "llama")
    proc = subprocess.run([radix_logits_binary(), "--model", model, "--tokens", "1,2,3", "--lora",
                           wrong], capture_output=True, text=True)
    assert proc.returncode != 0 and "does not fit" in proc.stderr

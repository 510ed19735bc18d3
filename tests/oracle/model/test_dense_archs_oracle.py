"""Dense architectures without a small real checkpoint here (dense_checkpoint.py builds random-
weight ones with a real checkpoint's tensor names and metadata): teacher-forced logits at every
position of a story against llama.cpp (llama-cpp-python) on the same GGUF, llama.cpp's own greedy
continuation, and the HF form of the same weights against transformers (the torch venv) and
against the GGUF form."""
import json
import os
import subprocess
import sys

import numpy as np
import pytest

from dense_checkpoint import SHAPES, write_gguf, write_hf
from model_oracle_helpers import run_radix
from test_llama_oracle import STORY, llama_cpp_logits, tokenize
from test_moe_oracle import llama_cpp_greedy

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "../../fixtures"))
from torch_env import torch_python  # noqa: E402

FIXTURES = os.path.join(os.path.dirname(__file__), "../../fixtures")
ARCHS = ["olmo2", "granite", "smollm3", "gemma2", "phi3", "phi3_longrope", "mistral"]


@pytest.mark.parametrize("arch", ARCHS)
def test_f32_matches_llama_cpp(tmp_path, arch):
    model = str(tmp_path / f"{arch}-f32.gguf")
    write_gguf(model, arch, seed=11)
    tokens = tokenize(model, STORY)
    assert 200 <= len(tokens) <= 512
    ref = llama_cpp_logits(model, tokens, 512)
    ours = run_radix(model, tokens, tmp_path, "--threads", "2")
    top1 = (ours.argmax(-1) == ref.argmax(-1)).mean()
    max_diff = np.abs(ours - ref).max()
    print(f"{arch} F32: {len(tokens)} tokens, top-1 {top1:.4f}, max |dlogit| {max_diff:.2e}")
    assert top1 == 1.0
    # Gemma: GELU through llama.cpp's float16 table on both sides, tanh soft-caps (measured 9e-4).
    assert max_diff < (5e-3 if arch == "gemma2" else 1e-3)
    prompt = tokens[:24]
    # A context past LongRoPE's original one, so llama.cpp picks the long factors as we do.
    cont = llama_cpp_greedy(model, prompt, 24, n_ctx=512)
    ours = run_radix(model, prompt + cont, tmp_path, "--threads", "2")
    assert ours[len(prompt) - 1: -1].argmax(-1).tolist() == cont


@pytest.mark.parametrize("arch", ARCHS)
def test_hf_matches_transformers_and_gguf(tmp_path, arch):
    model = str(tmp_path / f"{arch}-f32.gguf")
    w = write_gguf(model, arch, seed=12)
    hf = tmp_path / "hf"
    write_hf(str(hf), w, arch)
    # LongRoPE: past the original context (256) transformers switches to the long factors, the
    # set radixserve (and llama.cpp) use for a model whose context exceeds the original one.
    tokens = tokenize(model, STORY)[:400 if arch == "phi3_longrope" else 128]
    ours_hf = run_radix(str(hf), tokens, tmp_path)
    ours_gguf = run_radix(model, tokens, tmp_path)
    # GGUF Gemma evaluates GELU through llama.cpp's float16 table (as llama.cpp does), the HF form
    # exactly (as transformers does): the two forms differ by that rounding. Mistral's HF form
    # slides its window and the GGUF (llama.cpp's llama graph) does not: they agree only before
    # the window fills, and then part, by far.
    agree = SHAPES[arch]["sliding_window"] if arch == "mistral" else len(tokens)
    diff = np.abs(ours_hf - ours_gguf).max(-1)
    assert diff[:agree].max() < (1e-2 if arch == "gemma2" else 1e-3)
    if arch == "mistral":
        assert diff[agree:].max() > 1.0
    (tmp_path / "ids.json").write_text(json.dumps([tokens]))
    proc = subprocess.run(
        [torch_python(), os.path.join(FIXTURES, "hidden_states_reference.py"), "--model", str(hf),
         "--ids", str(tmp_path / "ids.json"), "--out", str(tmp_path)],
        capture_output=True, text=True, check=False, timeout=600)
    assert proc.returncode == 0, proc.stderr[-4000:]
    ref = np.load(tmp_path / "0.logits.npy")
    diff = np.abs(ours_hf - ref).max()
    print(f"{arch} HF vs transformers: max |dlogit| {diff:.2e}")
    assert (ours_hf.argmax(-1) == ref.argmax(-1)).all()
    assert diff < 1e-3

"""LoRA adapters made the way users make them: by PEFT itself (`get_peft_model` on SmolLM2 with a
random initialization, `save_pretrained`) and converted to GGUF by llama.cpp's own
convert_lora_to_gguf.py. The reference is the PEFT model's forward in PyTorch (float32), run in
the torch venv (tests/fixtures/peft_reference.py); llama.cpp running the converted file is checked
against the same reference, so the converter's output is known good independently of us."""
import json
import os
import subprocess
import sys

import numpy as np
import pytest
import requests
from model_oracle_helpers import (SMOLLM2_F32_GGUF, SMOLLM2_HF, compare_adapter_logits, require,
                                  run_radix)
from test_llama_oracle import TECH, llama_cpp_logits, tokenize

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "../../fixtures"))
sys.path.insert(0, os.path.join(os.path.dirname(__file__), "../../e2e"))
from server_util import Server  # noqa: E402
from torch_env import llama_cpp_source, torch_python  # noqa: E402

FIXTURES = os.path.join(os.path.dirname(__file__), "../../fixtures")
MAX_ABS = 5e-4  # float32 against float32: the base-model oracle's order of agreement
GREEDY = 16


def make_reference(out_dir, tokens, *extra):
    """Runs PEFT (and llama.cpp's converter) in the torch venv; returns the output folder."""
    out_dir.mkdir()
    proc = subprocess.run(
        [torch_python(), os.path.join(FIXTURES, "peft_reference.py"), "--base", require(SMOLLM2_HF),
         "--out", str(out_dir), "--tokens", ",".join(map(str, tokens)), *extra],
        capture_output=True, text=True, check=False, timeout=900)
    assert proc.returncode == 0, proc.stderr[-4000:]
    return out_dir


@pytest.fixture(scope="module")
def tokens():
    return tokenize(require(SMOLLM2_F32_GGUF), TECH)


@pytest.fixture(scope="module")
def full(tmp_path_factory, tokens):
    """Rank 8 on all seven projections, float32 matrices, plus the converted GGUF LoRA and the
    PEFT model's greedy continuation."""
    converter = str(llama_cpp_source() / "convert_lora_to_gguf.py")
    return make_reference(tmp_path_factory.mktemp("peft") / "full", tokens, "--rank", "8",
                          "--alpha", "16", "--generate", str(GREEDY), "--convert-script", converter)


@pytest.fixture(scope="module")
def half(tmp_path_factory, tokens):
    """rsLoRA, a subset of the projections, float16 matrices in the file."""
    return make_reference(tmp_path_factory.mktemp("peft") / "half", tokens, "--rank", "16",
                          "--alpha", "8", "--rslora", "--dtype", "float16", "--seed", "1",
                          "--targets", "q_proj,v_proj,o_proj,down_proj")



@pytest.mark.parametrize("base", ["hf", "gguf"])
@pytest.mark.parametrize("form", ["peft", "converted"])
def test_peft_adapter_matches_peft_in_torch(full, tokens, tmp_path, base, form):
    model = require(SMOLLM2_HF if base == "hf" else SMOLLM2_F32_GGUF)
    lora = str(full / ("peft" if form == "peft" else "lora.gguf"))
    ours = run_radix(model, tokens, tmp_path, "--lora", lora)
    compare_adapter_logits(ours, np.load(full / "logits.npy"), np.load(full / "base_logits.npy"),
                           f"SmolLM2 {base} + {form} adapter vs PEFT in torch", MAX_ABS)


def test_rslora_f16_subset_matches_peft_in_torch(half, tokens, tmp_path):
    ours = run_radix(require(SMOLLM2_F32_GGUF), tokens, tmp_path, "--lora", str(half / "peft"))
    compare_adapter_logits(ours, np.load(half / "logits.npy"), np.load(half / "base_logits.npy"),
                           "SmolLM2 gguf + rsLoRA F16 PEFT subset vs PEFT in torch", MAX_ABS)


def test_llama_cpp_runs_the_converted_adapter_like_peft(full, tokens):
    """The reference chain itself: llama.cpp with the converted file agrees with PEFT, so the
    converter wrote what both llama.cpp and we read."""
    ref = llama_cpp_logits(require(SMOLLM2_F32_GGUF), tokens, 512,
                           lora_path=str(full / "lora.gguf"))
    compare_adapter_logits(ref, np.load(full / "logits.npy"), np.load(full / "base_logits.npy"),
                           "llama.cpp + converted adapter vs PEFT in torch", MAX_ABS)


def test_served_adapters_continue_like_peft_generate(full, tokens):
    """Through the server: both forms of the PEFT adapter, selected per request, give PEFT's own
    greedy continuation (`generate`, do_sample=False) token for token; the base model does not."""
    expected = json.loads((full / "greedy.json").read_text())
    srv = Server(SMOLLM2_F32_GGUF, "--skip-server-warmup", "--lora-paths",
                 f"peft={full / 'peft'}", f"converted={full / 'lora.gguf'}")
    try:
        outputs = {}
        for name in ("peft", "converted", None):
            body = {"input_ids": tokens, "sampling_params": {
                "temperature": 0, "max_new_tokens": GREEDY, "ignore_eos": True}}
            if name:
                body["lora_path"] = name
            r = requests.post(f"{srv.url}/generate", json=body, timeout=120)
            assert r.status_code == 200, r.text
            outputs[name] = r.json()["output_ids"]
        assert outputs["peft"] == expected
        assert outputs["converted"] == expected
        assert outputs[None] != expected
        srv.assert_no_leak()
    finally:
        assert srv.stop() == 0, srv.logs()

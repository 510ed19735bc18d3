"""LoRA adapters on multi-head latent attention (DeepSeek-V2-Lite-like and DeepSeek-V3-like random
models, deepseek_checkpoint.py), made by PEFT itself on transformers' DeepseekV2ForCausalLM /
DeepseekV3ForCausalLM (tests/fixtures/peft_reference.py: get_peft_model with a random
initialization, save_pretrained). The reference is that PEFT model's float32 forward and its greedy
`generate`: radixserve runs the adapter on the HF folder and on the GGUF form of the same weights,
kv_b_proj's update included (radixserve applies it in the absorbed form, through the queries'
latent and after the latent output, never forming per-head keys or values, so agreement with
PEFT's unabsorbed forward checks that algebra).

llama.cpp's convert_lora_to_gguf.py cannot convert a DeepSeek adapter (its kv_b split raises
NotImplementedError on a LoRA tensor), so the GGUF LoRA form here is written with gguf-py in the
converter's naming (blk.N.attn_kv_b.weight.lora_a, ...) from the PEFT file's own matrices."""
import json

import numpy as np
import pytest
import requests
from deepseek_checkpoint import write_gguf, write_hf
from model_oracle_helpers import (assert_served_adapter_continues, compare_adapter_logits,
                                  peft_reference, run_lora_refused, run_radix)
from safetensors.numpy import load_file
from test_llama_oracle import STORY, tokenize

from server_util import Server

SEEDS = {"lite": 4, "v3": 7}  # test_deepseek_oracle's: no routing decision near a tie
TARGETS = {"lite": "q_proj,kv_a_proj_with_mqa,kv_b_proj,o_proj",
           "v3": "q_a_proj,q_b_proj,kv_a_proj_with_mqa,kv_b_proj,o_proj"}
GGUF_NAMES = {"q_proj": "attn_q", "q_a_proj": "attn_q_a", "q_b_proj": "attn_q_b",
              "kv_a_proj_with_mqa": "attn_kv_a_mqa", "kv_b_proj": "attn_kv_b",
              "o_proj": "attn_output"}
MAX_ABS = 1e-3  # test_deepseek_oracle's bound for float32 against float32
GREEDY = 16


def build(root, variant, *extra):
    """The model in both forms, the prompt, and PEFT's adapter and reference outputs."""
    gguf_path = str(root / f"{variant}.gguf")
    w = write_gguf(gguf_path, "F32", seed=SEEDS[variant], variant=variant)
    hf = root / "hf"
    write_hf(str(hf), w, variant)
    tokens = tokenize(gguf_path, STORY)[:200]
    out = root / "peft"
    peft_reference(hf, out, tokens, TARGETS[variant], GREEDY, *extra)
    return {"gguf": gguf_path, "hf": str(hf), "tokens": tokens, "ref": out}


@pytest.fixture(scope="module")
def lite(tmp_path_factory):
    return build(tmp_path_factory.mktemp("mla-lora-lite"), "lite")


@pytest.fixture(scope="module")
def v3(tmp_path_factory):
    """Q LoRA rank, sigmoid group routing; the adapter's matrices stored in float16."""
    return build(tmp_path_factory.mktemp("mla-lora-v3"), "v3", "--dtype", "float16", "--seed", "1")


def write_gguf_lora(peft_dir, path, rename=None):
    """The PEFT adapter's matrices as a GGUF LoRA file of architecture deepseek2."""
    from gguf import GGUFWriter
    config = json.loads((peft_dir / "adapter_config.json").read_text())
    tensors = load_file(str(peft_dir / "adapter_model.safetensors"))
    writer = GGUFWriter(str(path), "deepseek2")
    writer.add_string("general.type", "adapter")
    writer.add_string("adapter.type", "lora")
    writer.add_float32("adapter.lora.alpha", float(config["lora_alpha"]))
    for name in sorted(tensors):
        # base_model.model.model.layers.N.self_attn.<module>.lora_<A|B>.weight
        parts = name.split(".")
        layer, module, ab = int(parts[4]), parts[6], parts[7]
        kind = (rename or {}).get(module, GGUF_NAMES[module])
        suffix = ".lora_a" if ab == "lora_A" else ".lora_b"
        writer.add_tensor(f"blk.{layer}.{kind}.weight{suffix}",
                          np.ascontiguousarray(tensors[name].astype(np.float32)))
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()
    return str(path)


def reference(model):
    return np.load(model["ref"] / "logits.npy"), np.load(model["ref"] / "base_logits.npy")


@pytest.mark.parametrize("variant", ["lite", "v3"])
@pytest.mark.parametrize("base", ["hf", "gguf"])
def test_mla_peft_adapter_matches_peft_in_torch(request, tmp_path, variant, base):
    model = request.getfixturevalue(variant)
    ours = run_radix(model[base], model["tokens"], tmp_path, "--threads", "2", "--lora",
                     str(model["ref"] / "peft"))
    compare_adapter_logits(ours, *reference(model),
                           f"DeepSeek {variant} {base} + PEFT adapter vs PEFT in torch", MAX_ABS)


@pytest.mark.parametrize("variant", ["lite", "v3"])
def test_mla_gguf_lora_matches_peft_in_torch(request, tmp_path, variant):
    model = request.getfixturevalue(variant)
    lora = write_gguf_lora(model["ref"] / "peft", tmp_path / "lora.gguf")
    ours = run_radix(model["gguf"], model["tokens"], tmp_path, "--threads", "2", "--lora", lora)
    compare_adapter_logits(ours, *reference(model),
                           f"DeepSeek {variant} gguf + GGUF LoRA vs PEFT in torch", MAX_ABS)


def test_served_mla_adapter_continues_like_peft_generate(lite):
    """Through the server, one batch mixing the adapter and the base model: the adapted prompt
    continues as PEFT's greedy `generate` does, token for token, and the base one does not."""
    assert_served_adapter_continues(lite["gguf"], str(lite["ref"] / "peft"), lite["tokens"],
                                    json.loads((lite["ref"] / "greedy.json").read_text()))


def test_mla_adapter_mismatches_are_refused(lite, v3, tmp_path):
    """An adapter for the other attention form, and a GGUF LoRA on the split attn_k_b form,
    are refused with an error naming the projection."""
    err = run_lora_refused(lite["gguf"], str(v3["ref"] / "peft"), tmp_path)
    assert "q_a_proj" in err and "has no such projection" in err, err
    split = write_gguf_lora(lite["ref"] / "peft", tmp_path / "split.gguf",
                            rename={"kv_b_proj": "attn_k_b"})
    err = run_lora_refused(lite["gguf"], split, tmp_path)
    assert "attn_k_b" in err and "PEFT adapter folder" in err, err


def test_lora_target_modules_names_mla_projections(lite):
    """--lora-target-modules takes MLA's projection names: an adapter touching kv_b_proj is refused
    when kv_b_proj is not listed, with an error naming it, and loads and runs when it is."""
    adapter = str(lite["ref"] / "peft")
    listed = ["q_proj", "kv_a_proj_with_mqa", "o_proj"]
    for allowed in (False, True):
        modules = listed + (["kv_b_proj"] if allowed else [])
        srv = Server(lite["gguf"], "--skip-server-warmup", "--enable-lora",
                     "--lora-target-modules", *modules)
        try:
            r = requests.post(f"{srv.url}/load_lora_adapter",
                              json={"lora_name": "mla", "lora_path": adapter}, timeout=120)
            if not allowed:
                assert r.status_code == 400, r.text
                assert "kv_b_proj is not in --lora-target-modules" in r.text, r.text
                continue
            assert r.status_code == 200, r.text
            body = {"input_ids": lite["tokens"], "lora_path": "mla",
                    "sampling_params": {"temperature": 0, "max_new_tokens": GREEDY,
                                        "ignore_eos": True}}
            r = requests.post(f"{srv.url}/generate", json=body, timeout=300)
            assert r.status_code == 200, r.text
            assert r.json()["output_ids"] == json.loads((lite["ref"] / "greedy.json").read_text())
        finally:
            assert srv.stop() == 0, srv.logs()

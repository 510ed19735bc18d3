"""LoRA adapters on mixture-of-experts layers (random Qwen3-MoE, OLMoE and Qwen2-MoE models,
moe_checkpoint.py), made by PEFT itself on transformers' models (tests/fixtures/peft_reference.py:
get_peft_model with a random initialization, save_pretrained). With transformers 5 PEFT adapts the
fused expert tensors through `target_parameters` (gate_up_proj, down_proj: lora_A stacks the
experts' A matrices, lora_B interleaves their B columns, and the doubled gate_up rank comes as a
rank_pattern / alpha_pattern entry), and the shared expert (Qwen2-MoE) as an ordinary module. The
reference is that PEFT model's float32 forward and its greedy `generate`; radixserve runs the
adapter on the HF folder and on the GGUF form of the same weights.

The per-expert module form of the same adapter (`mlp.experts.E.gate_proj.lora_A.weight`, as PEFT
wrote it for transformers 4, and Mixtral's `block_sparse_moe.experts.E.w1`) is made from the PEFT
file's own matrices (each expert's A, its gate and up halves of B) and must give the same logits."""
import json
import subprocess

import numpy as np
import pytest
import requests
from model_oracle_helpers import (assert_served_adapter_continues, compare_adapter_logits,
                                  peft_reference, run_lora_refused, run_radix,
                                  transformers_logits)
from deepseek_checkpoint import write_gguf as write_deepseek_gguf
from deepseek_checkpoint import write_hf as write_deepseek_hf
from gptoss_checkpoint import write_gguf as write_gptoss_gguf
from gptoss_checkpoint import write_hf as write_gptoss_hf
from moe_checkpoint import SHAPES, write_gguf, write_hf
from safetensors.numpy import load_file, save_file
from test_llama_oracle import STORY, llama_cpp_logits, tokenize

from server_util import Server
from torch_env import llama_cpp_source, torch_python

MAX_ABS = 1e-3  # float32 against float32, as test_lora_mla_oracle
GREEDY = 16
ARCHS = {"qwen3moe": 3, "olmoe": 5, "qwen2moe": 2}  # arch -> model seed


def build(root, arch, *extra):
    """The model in both forms, the prompt, and PEFT's adapter and reference outputs."""
    gguf_path = str(root / f"{arch}.gguf")
    w = write_gguf(gguf_path, "F32", seed=ARCHS[arch], arch=arch)
    hf = root / "hf"
    write_hf(str(hf), w, arch)
    tokens = tokenize(gguf_path, STORY)[:160]
    out = root / "peft"
    peft_reference(hf, out, tokens, "q_proj,o_proj,gate_proj,up_proj,down_proj", GREEDY, *extra,
                   rank=4, alpha=8)
    return {"gguf": gguf_path, "hf": str(hf), "tokens": tokens, "ref": out, "arch": arch}


@pytest.fixture(scope="module")
def models(tmp_path_factory):
    cache = {}

    def get(arch):
        if arch not in cache:
            cache[arch] = build(tmp_path_factory.mktemp(f"moe-lora-{arch}"), arch)
        return cache[arch]
    return get


def reference(model):
    return np.load(model["ref"] / "logits.npy"), np.load(model["ref"] / "base_logits.npy")


def peft_dir(model):
    return model["ref"] / "peft"


def test_peft_writes_fused_expert_tensors(models):
    """What this file tests: PEFT's own adapter holds the fused experts' target_parameters."""
    model = models("qwen3moe")
    config = json.loads((peft_dir(model) / "adapter_config.json").read_text())
    assert sorted(config["target_parameters"]) == ["down_proj", "gate_up_proj"], config
    assert config["rank_pattern"], config
    names = load_file(str(peft_dir(model) / "adapter_model.safetensors")).keys()
    assert any(n.endswith("mlp.experts.lora_A.weight") for n in names), sorted(names)


@pytest.mark.parametrize("arch", list(ARCHS))
@pytest.mark.parametrize("base", ["hf", "gguf"])
def test_moe_peft_adapter_matches_peft_in_torch(models, tmp_path, arch, base):
    model = models(arch)
    ours = run_radix(model[base], model["tokens"], tmp_path, "--threads", "2", "--lora",
                     str(peft_dir(model)))
    compare_adapter_logits(ours, *reference(model),
                           f"{arch} {base} + PEFT expert adapter vs PEFT in torch", MAX_ABS)


@pytest.fixture(scope="module")
def deepseek(tmp_path_factory):
    """DeepSeek-V2-Lite-like (deepseek_checkpoint.py: layer 0 dense with width 96, the others
    MoE with two shared experts of width 32 each, 64 together)."""
    root = tmp_path_factory.mktemp("moe-lora-deepseek")
    gguf_path = str(root / "lite.gguf")
    w = write_deepseek_gguf(gguf_path, "F32", seed=4, variant="lite")
    write_deepseek_hf(str(root / "hf"), w, "lite")
    return {"gguf": gguf_path, "hf": root / "hf", "tokens": tokenize(gguf_path, STORY)[:160]}


def test_deepseek_routed_expert_adapter_matches_peft_in_torch(deepseek, tmp_path):
    """PEFT's fused-expert adapter on DeepSeek's routed experts (softmax routing, shared experts
    and routed scale around them)."""
    peft_reference(deepseek["hf"], tmp_path / "peft", deepseek["tokens"],
                   "q_proj,gate_proj,up_proj,down_proj", GREEDY, rank=4, alpha=8)
    model = {"ref": tmp_path / "peft"}
    ours = run_radix(deepseek["gguf"], deepseek["tokens"], tmp_path, "--threads", "2", "--lora",
                     str(peft_dir(model)))
    compare_adapter_logits(ours, *reference(model),
                           "DeepSeek lite gguf + PEFT expert adapter vs PEFT in torch", MAX_ABS)


def test_deepseek_dense_and_shared_expert_adapter_matches_merged_weights(deepseek, tmp_path):
    """PEFT with transformers 5 turns every gate/up/down target of a DeepSeek model into the
    routed experts' target_parameters (even a regular expression naming the dense layer or the
    shared experts), so an adapter on DeepSeek's leading dense MLP and its shared experts is
    written here in PEFT's module form, and the reference is transformers' forward on the HF
    folder with the adapter merged into those weights (W + alpha / r B A)."""
    rng = np.random.default_rng(11)
    weights = load_file(str(deepseek["hf"] / "model.safetensors"))
    config = json.loads((deepseek["hf"] / "config.json").read_text())
    rank, alpha = 4, 8.0
    adapter, merged = {}, dict(weights)
    for name, w in weights.items():
        dense = name.startswith("model.layers.0.mlp.")
        if not (dense or ".mlp.shared_experts." in name) or not name.endswith("_proj.weight"):
            continue
        a = (rng.standard_normal((rank, w.shape[1])) / np.sqrt(w.shape[1])).astype(np.float32)
        b = (rng.standard_normal((w.shape[0], rank)) * 0.5).astype(np.float32)
        stem = "base_model.model." + name[: -len(".weight")]
        adapter[stem + ".lora_A.weight"], adapter[stem + ".lora_B.weight"] = a, b
        merged[name] = (w + alpha / rank * b @ a).astype(np.float32)
    assert len(adapter) == 2 * 3 * config["num_hidden_layers"], sorted(adapter)
    lora = tmp_path / "lora"
    lora.mkdir()
    save_file(adapter, str(lora / "adapter_model.safetensors"))
    (lora / "adapter_config.json").write_text(json.dumps(
        {"peft_type": "LORA", "r": rank, "lora_alpha": alpha,
         "target_modules": ["gate_proj", "up_proj", "down_proj"]}))
    folder = tmp_path / "merged"
    folder.mkdir()
    save_file(merged, str(folder / "model.safetensors"), metadata={"format": "pt"})
    (folder / "config.json").write_text(json.dumps(config))
    ref = transformers_logits(folder, deepseek["tokens"], tmp_path)
    base = transformers_logits(deepseek["hf"], deepseek["tokens"], tmp_path)
    for form in ("hf", "gguf"):
        ours = run_radix(str(deepseek[form]), deepseek["tokens"], tmp_path, "--threads", "2",
                         "--lora", str(lora))
        compare_adapter_logits(ours, ref, base,
                               f"DeepSeek lite {form} + dense / shared-expert adapter vs merged",
                               MAX_ABS)


@pytest.mark.parametrize("base", ["hf", "gguf"])
def test_gptoss_expert_adapter_matches_peft_in_torch(tmp_path, base):
    """gpt-oss, as the Hugging Face gpt-oss fine-tuning recipe adapts it: target_parameters on
    the fused experts of chosen layers (transformers keeps them input-first, [experts, hidden, 2 x
    width], gate and up interleaved, with biases and the clamped SwiGLU after them) next to the
    attention's projections."""
    gguf_path = str(tmp_path / "gptoss.gguf")
    w = write_gptoss_gguf(gguf_path, "F32", seed=1)
    write_gptoss_hf(str(tmp_path / "hf"), w, truncate=True)  # YaRN as the GGUF form runs it
    tokens = tokenize(gguf_path, STORY)[:160]
    peft_reference(tmp_path / "hf", tmp_path / "peft", tokens, "q_proj,o_proj", GREEDY,
                   "--target-parameters",
                   "1.mlp.experts.gate_up_proj,1.mlp.experts.down_proj,3.mlp.experts.gate_up_proj",
                   rank=4, alpha=8)
    model = {"ref": tmp_path / "peft"}
    names = load_file(str(peft_dir(model) / "adapter_model.safetensors")).keys()
    assert any("layers.1.mlp.experts" in n for n in names), sorted(names)
    ours = run_radix(str(tmp_path / "hf") if base == "hf" else gguf_path, tokens, tmp_path,
                     "--threads", "2", "--lora", str(peft_dir(model)))
    compare_adapter_logits(ours, *reference(model),
                           f"gpt-oss {base} + PEFT expert adapter vs PEFT in torch", MAX_ABS)
    attention_only = subset(peft_dir(model), tmp_path / "attention", lambda n: "experts" not in n)
    without = run_radix(str(tmp_path / "hf") if base == "hf" else gguf_path, tokens, tmp_path,
                        "--threads", "2", "--lora", attention_only)
    assert np.abs(without - reference(model)[0]).max() > 50 * MAX_ABS


def per_expert_adapter(src, dst, shape, mixtral_names=False):
    """The fused adapter at `src` rewritten as one module per expert (transformers 4's form):
    expert e's A is lora_A's rows [e r, (e + 1) r), its B lora_B's columns k E + e; gate and up
    share A and take B's first and second halves of rows. Every matrix gets the largest rank (the
    others padded with zero rows / columns, which add nothing) so one r fits all, with alpha
    scaled alike."""
    config = json.loads((src / "adapter_config.json").read_text())
    tensors = {k: v.astype(np.float32)
               for k, v in load_file(str(src / "adapter_model.safetensors")).items()}
    E, H, I = shape["experts"], shape["hidden"], shape["expert_ffn"]
    rank = max([config["r"], *config["rank_pattern"].values()])
    alpha = config["lora_alpha"] * rank / config["r"]
    moe = "block_sparse_moe" if mixtral_names else "mlp"
    names = {"gate": "w1", "up": "w3", "down": "w2"} if mixtral_names else {
        "gate": "gate_proj", "up": "up_proj", "down": "down_proj"}
    out = {}

    def put(stem, a, b):
        a2 = np.zeros((rank, a.shape[1]), np.float32)
        b2 = np.zeros((b.shape[0], rank), np.float32)
        a2[:a.shape[0]], b2[:, :a.shape[0]] = a, b
        out[stem + ".lora_A.weight"], out[stem + ".lora_B.weight"] = a2, b2

    for name in tensors:
        if not name.endswith(".lora_A.weight"):
            continue
        stem = name[: -len(".lora_A.weight")]
        A, B = tensors[name], tensors[stem + ".lora_B.weight"]
        if ".mlp.experts" not in stem:
            put(stem, A, B)
            continue
        layer = stem[: stem.index(".mlp.experts")]
        r = A.shape[0] // E
        gate_up = A.shape[1] == H and B.shape[0] == 2 * I
        for e in range(E):
            a, b = A[e * r:(e + 1) * r], B[:, [k * E + e for k in range(r)]]
            base = f"{layer}.{moe}.experts.{e}."
            if gate_up:
                put(base + names["gate"], a, b[:I])
                put(base + names["up"], a, b[I:])
            else:
                put(base + names["down"], a, b)
    dst.mkdir(parents=True, exist_ok=True)
    save_file(out, str(dst / "adapter_model.safetensors"))
    config.update({"r": rank, "lora_alpha": alpha, "rank_pattern": {}, "alpha_pattern": {},
                   "target_parameters": None,
                   "target_modules": ["q_proj", "o_proj", "gate_proj", "up_proj", "down_proj"]})
    (dst / "adapter_config.json").write_text(json.dumps(config))
    return str(dst)


@pytest.mark.parametrize("mixtral_names", [False, True])
def test_per_expert_module_form_matches_peft_in_torch(models, tmp_path, mixtral_names):
    model = models("qwen3moe")
    adapter = per_expert_adapter(peft_dir(model), tmp_path / "per-expert", SHAPES["qwen3moe"],
                                 mixtral_names)
    ours = run_radix(model["gguf"], model["tokens"], tmp_path, "--threads", "2", "--lora",
                     adapter)
    compare_adapter_logits(ours, *reference(model),
                           "qwen3moe gguf + per-expert adapter vs PEFT in torch", MAX_ABS)


@pytest.mark.parametrize("arch", ["qwen3moe", "qwen2moe"])
def test_llama_cpp_converted_gguf_lora_matches_llama_cpp_and_peft(models, tmp_path, arch):
    """llama.cpp's own convert_lora_to_gguf.py turns the per-expert form into a GGUF LoRA with
    stacked expert tensors (blk.N.ffn_gate_exps.weight.lora_a [experts, rank, hidden], ...; the
    shared expert as ffn_*_shexp); radixserve on it gives llama.cpp's logits with the same file,
    and PEFT's."""
    model = models(arch)
    adapter = per_expert_adapter(peft_dir(model), tmp_path / "per-expert", SHAPES[arch])
    lora = tmp_path / "lora.gguf"
    proc = subprocess.run(
        [torch_python(), str(llama_cpp_source() / "convert_lora_to_gguf.py"), "--base",
         model["hf"], "--outtype", "f32", "--outfile", str(lora), adapter],
        capture_output=True, text=True, check=False, timeout=600)
    assert proc.returncode == 0, proc.stderr[-3000:]
    ours = run_radix(model["gguf"], model["tokens"], tmp_path, "--threads", "2", "--lora",
                     str(lora))
    theirs = llama_cpp_logits(model["gguf"], model["tokens"], 512, lora_path=str(lora))
    ref, base = reference(model)
    compare_adapter_logits(theirs, ref, base, f"llama.cpp + its GGUF {arch} LoRA vs PEFT", MAX_ABS)
    compare_adapter_logits(ours, theirs, base, f"{arch} gguf + GGUF expert LoRA vs llama.cpp",
                           MAX_ABS)


def test_served_moe_adapter_continues_like_peft_generate(models):
    """Through the server, one batch mixing the adapter and the base model (Qwen2-MoE: routed
    and shared experts adapted): the adapted prompt continues as PEFT's greedy `generate` does,
    token for token, and the base one does not."""
    model = models("qwen2moe")
    assert_served_adapter_continues(model["gguf"], str(peft_dir(model)), model["tokens"],
                                    json.loads((model["ref"] / "greedy.json").read_text()))


def subset(src, dst, keep):
    """A copy of the adapter at `src` with only the tensors whose names `keep` accepts."""
    tensors = load_file(str(src / "adapter_model.safetensors"))
    dst.mkdir(parents=True, exist_ok=True)
    save_file({k: v for k, v in tensors.items() if keep(k)}, str(dst / "adapter_model.safetensors"))
    (dst / "adapter_config.json").write_text((src / "adapter_config.json").read_text())
    return str(dst)


def test_expert_matrices_carry_their_share(models, tmp_path):
    """The routed and shared experts' matrices matter: without them the logits leave PEFT's."""
    for arch, marker in (("qwen3moe", ".mlp.experts"), ("qwen2moe", ".mlp.shared_expert.")):
        model = models(arch)
        names = load_file(str(peft_dir(model) / "adapter_model.safetensors")).keys()
        assert any(marker in n for n in names), sorted(names)
        adapter = subset(peft_dir(model), tmp_path / arch, lambda n, m=marker: m not in n)
        ours = run_radix(model["gguf"], model["tokens"], tmp_path, "--threads", "2", "--lora",
                         adapter)
        diff = np.abs(ours - reference(model)[0]).max()
        print(f"{arch} without {marker}: max |dlogit| {diff:.3f} from PEFT")
        assert diff > 50 * MAX_ABS


def test_moe_adapter_mismatches_are_refused(models, tmp_path):
    """Expert matrices for another expert count (Qwen3-MoE's 8 on OLMoE's 16: the stacked rows
    give each expert half the config's rank), shared-expert matrices on a model without shared experts,
    and expert matrices left out of --lora-target-modules are refused, naming what does not fit."""
    qwen3, olmoe, qwen2 = models("qwen3moe"), models("olmoe"), models("qwen2moe")
    experts = subset(peft_dir(qwen3), tmp_path / "experts", lambda n: ".mlp.experts" in n)
    err = run_lora_refused(olmoe["gguf"], experts, tmp_path)
    assert "model.layers.0.mlp.experts.down_proj has rank 2 but adapter_config.json says r=4" in err, err
    shared = subset(peft_dir(qwen2), tmp_path / "shared", lambda n: ".shared_expert." in n)
    err = run_lora_refused(qwen3["gguf"], shared, tmp_path)
    assert "shared experts" in err and "no shared experts" in err, err
    srv = Server(qwen3["gguf"], "--skip-server-warmup", "--enable-lora", "--lora-target-modules",
                 "q_proj", "o_proj", "down_proj")
    try:
        r = requests.post(f"{srv.url}/load_lora_adapter",
                          json={"lora_name": "x", "lora_path": str(peft_dir(qwen3))}, timeout=120)
        assert r.status_code == 400, r.text
        assert "gate_proj is not in --lora-target-modules" in r.text, r.text
    finally:
        assert srv.stop() == 0, srv.logs()


def test_rank_and_alpha_patterns_apply_as_peft_matches_them(models, tmp_path):
    """rank_pattern / alpha_pattern entries reach the modules whose names they match at the end
    after a dot: an alpha_pattern doubling q_proj's alpha gives the logits of the same adapter
    with q_proj's B doubled; a rank_pattern that does not fit a module's matrices, and a pattern
    that is not a regular expression, are refused."""
    model = models("qwen3moe")
    src = peft_dir(model)
    config = json.loads((src / "adapter_config.json").read_text())
    tensors = load_file(str(src / "adapter_model.safetensors"))

    def variant(name, patch, scale_q_b=1.0):
        dst = tmp_path / name
        dst.mkdir()
        save_file({k: (v * scale_q_b if "q_proj.lora_B" in k else v) for k, v in tensors.items()},
                  str(dst / "adapter_model.safetensors"))
        (dst / "adapter_config.json").write_text(json.dumps({**config, **patch}))
        return str(dst)

    doubled_alpha = variant("alpha", {"alpha_pattern": {**config["alpha_pattern"],
                                                        r"self_attn\.q_proj": 2 * config["lora_alpha"]}})
    doubled_b = variant("b", {}, scale_q_b=2.0)
    ours = run_radix(model["gguf"], model["tokens"], tmp_path, "--threads", "2", "--lora",
                     doubled_alpha)
    theirs = run_radix(model["gguf"], model["tokens"], tmp_path, "--threads", "2", "--lora",
                       doubled_b)
    assert np.abs(ours - theirs).max() < 1e-5
    assert np.abs(ours - reference(model)[0]).max() > 50 * MAX_ABS
    err = run_lora_refused(model["gguf"], variant("rank", {"rank_pattern": {
        **config["rank_pattern"], "q_proj": 8}}), tmp_path)
    assert "layer 0 q_proj has rank 4 but adapter_config.json says r=8" in err, err
    err = run_lora_refused(model["gguf"], variant("bad", {"rank_pattern": {"(": 8}}), tmp_path)
    assert 'rank_pattern entry "("' in err, err

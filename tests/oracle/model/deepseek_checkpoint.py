"""Random-weight DeepSeek-V2/V3 checkpoints for the DeepSeek oracle tests, written with the `gguf`
and `safetensors` packages (independent of radixserve): the tensor names and metadata of a real
conversion (llama.cpp's convert_hf_to_gguf.py, conversion/deepseek.py DeepseekV2Model: arch
deepseek2) and of the HF DeepseekV2ForCausalLM / DeepseekV3ForCausalLM folder, with shrunk
dimensions, and the tokenizer of stories260K's GGUF so llama.cpp can load the file.

What makes DeepSeek different from the other MoE models, all exercised here: multi-head latent
attention (MLA: K and V decompressed from a kv_lora_rank latent normed by attn_kv_a_norm, one
shared rotary key k_pe, and for V3 a low-rank query q_a -> q_a_norm -> q_b), a leading dense
layer, shared experts, a routed_scaling_factor != 1, YaRN with the mscale / mscale_all_dim
attention temperature, and for V3 sigmoid scoring with a selection-only bias
(e_score_correction_bias, GGUF exp_probs_b.bias), group-limited routing (a group's score is the
sum of its top-2 biased scores; topk_group of n_group groups are kept) and normalized top-k
weights.

Layout facts (established against llama.cpp and transformers 5, see test_deepseek_oracle.py):
- Rotary dims are interleaved pairs (x0, x1), (x2, x3), ... on both sides: llama.cpp's deepseek2
  uses rope type NORM, transformers' DeepseekV2 rotates complex pairs and DeepseekV3 has
  rope_interleave=True; the converter permutes nothing. Each head's Q row block is [q_nope;
  q_pe], kv_a_proj_with_mqa's rows are [c_kv (kv_lora_rank); k_pe (qk_rope_head_dim)].
- The new GGUF form splits kv_b_proj [n_head * (qk_nope + v), kv_lora] per head into attn_k_b
  (numpy [n_head, kv_lora, qk_nope]: k rows transposed) and attn_v_b ([n_head, v, kv_lora]);
  llama.cpp then attends in the latent space with K = [c_kv, k_pe] (kv_lora_rank + rope wide),
  V = c_kv, key_length = kv_lora + rope, value_length = kv_lora, head_count_kv = 1. The legacy
  form keeps attn_kv_b with key_length = qk_nope + rope, value_length = v and no *_mla keys
  (head_count_kv = n_head there: llama.cpp sizes its MHA cache by it).
- Attention scale (llama.cpp and transformers agree when mscale == mscale_all_dim, as in every
  real DeepSeek config): (0.1 * mscale_all_dim * ln(factor) + 1)^2 / sqrt(qk_nope + rope); the
  rotary cos/sin are unscaled. GGUF carries mscale_all_dim as rope.scaling.yarn_log_multiplier =
  0.1 * mscale_all_dim (llama.cpp divides by 0.1 again).

Deviations from a real file, forced by the shrinking or by llama.cpp/transformers differences:
- llama.cpp recognizes V2-Lite by its layer count (27) and otherwise requires
  attention.q_lora_rank, so the 4-layer "lite" file carries q_lora_rank = 0 (no q_a/q_b).
- "lite" routes greedily (n_group = topk_group = 1, as the real V2-Lite): V2's
  group_limited_greedy ranks groups by their max score in transformers but by the sum of the top
  two in llama.cpp, so no test relies on it. transformers' V2 router ignores norm_topk_prob,
  hence false (as in V2-Lite).
- The kv_a / q_a norms use rms_norm_eps = 1e-6: transformers builds them with its 1e-6 default,
  llama.cpp with the model's epsilon.
- quant "Q8_0" quantizes the matrices whose rows are a multiple of 32 long but the router (as
  llama-quantize does); attn_k_b (rows of qk_nope = 16) and V3's attn_q_b (rows of q_lora = 48)
  stay F32 where llama-quantize would fall back to F16.

Multi-token prediction (mtp=True, off by default): DeepSeek-V3's one NextN block, appended as
layer L = num main layers (a regular sparse layer: MLA, router, routed and shared experts) plus
enorm / hnorm (RMSNorm of the next token's embedding and of the main model's output-normed hidden
state), eh_proj [H, 2H] applied to [enorm(embedding); hnorm(h)], and shared_head.norm before the
head. GGUF: llama.cpp's blk.L.nextn.* names, block_count = L + 1, nextn_predict_layers = 1; the
block's own embed_tokens / shared_head_head only with mtp_own_head (else llama.cpp uses
token_embd / output). HF: model.layers.L.* as the real V3 checkpoint (embed_tokens and
shared_head.head always written: copies of the main ones unless mtp_own_head), config
num_nextn_predict_layers = 1; transformers loads the folder and ignores layer L. llama.cpp's MTP
graph (deepseek2.cpp graph_mtp) requires q_lora_rank > 0 and the split MLA form, so only "v3"
split files have a llama.cpp MTP reference (mtp_reference.py). The block's weights are drawn after
all others, so the main model of a seed is the same with or without it."""
import json
import os

import numpy as np

from moe_checkpoint import _stories_tokenizer, add_stories_tokenizer, finish_gguf, weight_makers

# DeepSeek-V2-Lite's layout, shrunk: no query compression, 64 experts top-6 -> 8 top-2, two
# shared experts, softmax scores, YaRN factor 40 / original 4096 -> 4 / 128 (shorter than the
# test prompts) with mscale = mscale_all_dim = 0.707, routed_scaling_factor 1.0 -> 1.5.
LITE_SHAPE = dict(hidden=64, layers=4, heads=4, q_lora_rank=0, kv_lora_rank=32, qk_nope=16,
                  qk_rope=8, v_head=16, experts=8, top_k=2, expert_ffn=32, dense_ffn=96,
                  shared_experts=2, dense_layers=1, context=512, rope_theta=10000.0, eps=1e-6,
                  scoring="softmax", topk_method="greedy", n_group=1, topk_group=1,
                  norm_topk_prob=False, routed_scale=1.5, yarn_factor=4.0, yarn_original=128,
                  mscale=0.707, mscale_all_dim=0.707, beta_fast=32.0, beta_slow=1.0)
# DeepSeek-V3's layout, shrunk: query compression (q_lora_rank 1536 -> 48), 256 experts in 8
# groups top-8 of 4 groups -> 8 experts in 4 groups top-2 of 2 groups, sigmoid scores with a
# selection bias, normalized weights scaled by 2.5, one shared expert, YaRN with mscale =
# mscale_all_dim = 1.0.
V3_SHAPE = dict(LITE_SHAPE, q_lora_rank=48, shared_experts=1, scoring="sigmoid",
                topk_method="noaux_tc", n_group=4, topk_group=2, norm_topk_prob=True,
                routed_scale=2.5, mscale=1.0, mscale_all_dim=1.0)
SHAPES = {"lite": LITE_SHAPE, "v3": V3_SHAPE}


def random_weights(seed, vocab, variant="lite", mtp=False, mtp_own_head=False):
    """Canonical (GGUF-named, split attn_k_b / attn_v_b) float32 weights; numpy shapes are
    outermost-first. mtp adds the NextN block (see the module docstring), mtp_own_head its own
    embed_tokens / shared_head_head."""
    s = SHAPES[variant]
    rng, mat, norm = weight_makers(seed)
    H, E, I = s["hidden"], s["experts"], s["expert_ffn"]
    n, R, L = s["heads"], s["kv_lora_rank"], s["q_lora_rank"]
    nope, rope, v = s["qk_nope"], s["qk_rope"], s["v_head"]
    S = I * s["shared_experts"]

    w = {"token_embd.weight": mat(vocab, H, scale=1.0), "output_norm.weight": norm(H),
         "output.weight": mat(vocab, H)}
    for l in range(s["layers"] + mtp):
        p = f"blk.{l}."
        w.update({p + "attn_norm.weight": norm(H), p + "ffn_norm.weight": norm(H)})
        if L:
            w.update({p + "attn_q_a.weight": mat(L, H), p + "attn_q_a_norm.weight": norm(L),
                      p + "attn_q_b.weight": mat(n * (nope + rope), L)})
        else:
            w[p + "attn_q.weight"] = mat(n * (nope + rope), H)
        kv_b = mat(n, nope + v, R)  # HF kv_b_proj, rows (head, [k_nope; v])
        w.update({
            p + "attn_kv_a_mqa.weight": mat(R + rope, H), p + "attn_kv_a_norm.weight": norm(R),
            p + "attn_k_b.weight": np.ascontiguousarray(kv_b[:, :nope].transpose(0, 2, 1)),
            p + "attn_v_b.weight": np.ascontiguousarray(kv_b[:, nope:]),
            p + "attn_output.weight": mat(H, n * v),
        })
        if l < s["dense_layers"]:
            w.update({p + "ffn_gate.weight": mat(s["dense_ffn"], H),
                      p + "ffn_up.weight": mat(s["dense_ffn"], H),
                      p + "ffn_down.weight": mat(H, s["dense_ffn"])})
            continue
        w.update({
            # A router with weights large enough that tokens spread over the experts (sigmoid
            # scores: logits of a few units, so the scores spread over (0, 1) unsaturated).
            p + "ffn_gate_inp.weight": mat(E, H, scale=0.5 if s["scoring"] == "softmax" else 0.25),
            p + "ffn_gate_exps.weight": mat(E, I, H), p + "ffn_up_exps.weight": mat(E, I, H),
            p + "ffn_down_exps.weight": mat(E, H, I),
            p + "ffn_gate_shexp.weight": mat(S, H), p + "ffn_up_shexp.weight": mat(S, H),
            p + "ffn_down_shexp.weight": mat(H, S),
        })
        if s["scoring"] == "sigmoid":
            # A selection bias comparable to the score gaps, so it changes some choices.
            w[p + "exp_probs_b.bias"] = mat(E, scale=0.15)
    if mtp:
        p = f"blk.{s['layers']}.nextn."
        w.update({p + "eh_proj.weight": mat(H, 2 * H), p + "enorm.weight": norm(H),
                  p + "hnorm.weight": norm(H), p + "shared_head_norm.weight": norm(H)})
        if mtp_own_head:
            w.update({p + "embed_tokens.weight": mat(vocab, H, scale=1.0),
                      p + "shared_head_head.weight": mat(vocab, H)})
    return w


def n_layers(w, variant):
    """The number of decoder layers in w: the main ones, plus the NextN block if present."""
    L = SHAPES[variant]["layers"]
    return L + (f"blk.{L}.nextn.eh_proj.weight" in w)


def kv_b(w, l):
    """Layer l's unsplit kv_b_proj [n_head * (qk_nope + v), kv_lora]: per head [k_nope; v] rows
    (HF's kv_b_proj and the legacy GGUF attn_kv_b)."""
    k_b, v_b = w[f"blk.{l}.attn_k_b.weight"], w[f"blk.{l}.attn_v_b.weight"]
    return np.ascontiguousarray(
        np.concatenate([k_b.transpose(0, 2, 1), v_b], axis=1).reshape(-1, k_b.shape[1]))


def is_quantized(name, t, quant):
    """Whether a Q8_0 file stores this tensor quantized (see the module docstring)."""
    return (quant != "F32" and t.ndim > 1 and t.shape[-1] % 32 == 0
            and not name.endswith("ffn_gate_inp.weight"))


def write_gguf(path, quant="F32", seed=0, variant="lite", legacy_kv_b=False, weights=None,
               mtp=False, mtp_own_head=False):
    """A deepseek2 GGUF with everything F32, or with quant "Q8_0" the matrices is_quantized picks
    in Q8_0; legacy_kv_b writes the pre-MLA-split form (unsplit attn_kv_b). The weights are
    random (seeded, random_weights' mtp / mtp_own_head) unless given; a NextN block in them is
    written as such. Returns the float32 weights the file was made from (split form)."""
    import gguf
    s = SHAPES[variant]
    tok = _stories_tokenizer()
    vocab = len(tok["tokenizer.ggml.tokens"])
    w = weights if weights is not None else random_weights(seed, vocab, variant, mtp,
                                                           mtp_own_head)
    R, rope, layers = s["kv_lora_rank"], s["qk_rope"], n_layers(w, variant)
    writer = gguf.GGUFWriter(str(path), arch="deepseek2")
    writer.add_name(f"deepseek-{variant}-random")
    writer.add_file_type({"F32": 0, "Q8_0": 7}[quant])  # llama.cpp's llama_ftype
    # What TextModel.set_gguf_parameters writes (num_key_value_heads forced to 1 for MLA).
    writer.add_block_count(layers)
    writer.add_context_length(s["context"])
    writer.add_embedding_length(s["hidden"])
    writer.add_feed_forward_length(s["dense_ffn"])
    writer.add_head_count(s["heads"])
    writer.add_head_count_kv(s["heads"] if legacy_kv_b else 1)
    writer.add_rope_scaling_type(gguf.RopeScalingType.YARN)
    writer.add_rope_scaling_factor(s["yarn_factor"])
    writer.add_rope_scaling_orig_ctx_len(s["yarn_original"])
    writer.add_rope_scaling_yarn_beta_fast(s["beta_fast"])
    writer.add_rope_scaling_yarn_beta_slow(s["beta_slow"])
    writer.add_rope_freq_base(s["rope_theta"])
    writer.add_layer_norm_rms_eps(s["eps"])
    writer.add_expert_count(s["experts"])
    writer.add_expert_used_count(s["top_k"])
    writer.add_expert_group_count(s["n_group"])
    writer.add_expert_group_used_count(s["topk_group"])
    writer.add_expert_gating_func({"softmax": gguf.ExpertGatingFuncType.SOFTMAX,
                                   "sigmoid": gguf.ExpertGatingFuncType.SIGMOID}[s["scoring"]])
    # What DeepseekV2Model.set_gguf_parameters adds.
    writer.add_leading_dense_block_count(s["dense_layers"])
    writer.add_vocab_size(vocab)
    writer.add_q_lora_rank(s["q_lora_rank"])  # 0 for lite: see the module docstring
    writer.add_kv_lora_rank(R)
    if legacy_kv_b:
        writer.add_key_length(s["qk_nope"] + rope)
        writer.add_value_length(s["v_head"])
    else:
        writer.add_key_length(R + rope)
        writer.add_value_length(R)
        writer.add_key_length_mla(s["qk_nope"] + rope)
        writer.add_value_length_mla(s["v_head"])
    writer.add_expert_feed_forward_length(s["expert_ffn"])
    writer.add_expert_shared_count(s["shared_experts"])
    writer.add_expert_weights_scale(s["routed_scale"])
    if s["norm_topk_prob"]:
        writer.add_expert_weights_norm(True)
    writer.add_rope_dimension_count(rope)
    writer.add_rope_scaling_yarn_log_mul(0.1 * s["mscale_all_dim"])
    if layers > s["layers"]:
        writer.add_nextn_predict_layers(layers - s["layers"])
    add_stories_tokenizer(writer, tok)
    tensors = dict(w)
    if legacy_kv_b:
        for l in range(layers):
            del tensors[f"blk.{l}.attn_k_b.weight"], tensors[f"blk.{l}.attn_v_b.weight"]
            tensors[f"blk.{l}.attn_kv_b.weight"] = kv_b(w, l)
    finish_gguf(writer, tensors, lambda name, t: getattr(gguf.GGMLQuantizationType, quant)
                if is_quantized(name, t, quant) else None)
    return w


def dequantized(w, quant):
    """The weights as a quantized file stores them (what an HF copy of that file holds). Only the
    split form: a legacy Q8_0 file's attn_kv_b is quantized as a whole."""
    import gguf
    if quant == "F32":
        return w
    qtype = getattr(gguf.GGMLQuantizationType, quant)
    return {name: (gguf.quants.dequantize(gguf.quants.quantize(t, qtype), qtype).reshape(t.shape)
                   if is_quantized(name, t, quant) else t) for name, t in w.items()}


def hf_config(variant, vocab, mtp=False):
    """config.json of the HF folder: the real DeepSeek-V2-Lite / V3 configs' keys, shrunk; mtp:
    with the NextN block."""
    s = SHAPES[variant]
    config = {
        "architectures": ["DeepseekV2ForCausalLM"], "model_type": "deepseek_v2",
        "hidden_size": s["hidden"], "intermediate_size": s["dense_ffn"],
        "moe_intermediate_size": s["expert_ffn"], "num_hidden_layers": s["layers"],
        "num_attention_heads": s["heads"], "num_key_value_heads": s["heads"],
        "q_lora_rank": s["q_lora_rank"] or None, "kv_lora_rank": s["kv_lora_rank"],
        "qk_nope_head_dim": s["qk_nope"], "qk_rope_head_dim": s["qk_rope"],
        "v_head_dim": s["v_head"], "n_routed_experts": s["experts"],
        "num_experts_per_tok": s["top_k"], "n_shared_experts": s["shared_experts"],
        "first_k_dense_replace": s["dense_layers"], "moe_layer_freq": 1,
        "scoring_func": s["scoring"], "topk_method": s["topk_method"], "n_group": s["n_group"],
        "topk_group": s["topk_group"], "norm_topk_prob": s["norm_topk_prob"],
        "routed_scaling_factor": s["routed_scale"], "rope_theta": s["rope_theta"],
        "rope_scaling": {"type": "yarn", "factor": s["yarn_factor"],
                         "original_max_position_embeddings": s["yarn_original"],
                         "mscale": s["mscale"], "mscale_all_dim": s["mscale_all_dim"],
                         "beta_fast": s["beta_fast"], "beta_slow": s["beta_slow"]},
        "max_position_embeddings": s["context"], "rms_norm_eps": s["eps"],
        "attention_bias": False, "tie_word_embeddings": False, "vocab_size": vocab,
        "hidden_act": "silu", "torch_dtype": "float32", "bos_token_id": 1, "eos_token_id": 2,
    }
    if variant == "v3":
        config.update({"architectures": ["DeepseekV3ForCausalLM"], "model_type": "deepseek_v3"})
    if variant == "v3" or mtp:
        config["num_nextn_predict_layers"] = int(mtp)
    return config


def write_hf(folder, w=None, variant="lite", seed=0):
    """The same weights (random from seed unless given) as an HF DeepseekV2ForCausalLM ("lite")
    or DeepseekV3ForCausalLM ("v3") folder, per-expert float32 tensors as the published
    checkpoints name them; kv_b_proj reassembled per head as [k_nope; v] rows. A NextN block in
    the weights becomes layer num_hidden_layers, as in the real V3 checkpoint."""
    from safetensors.numpy import save_file
    s = SHAPES[variant]
    if w is None:
        vocab = len(_stories_tokenizer()["tokenizer.ggml.tokens"])
        w = random_weights(seed, vocab, variant)
    os.makedirs(folder, exist_ok=True)
    vocab, layers = w["token_embd.weight"].shape[0], n_layers(w, variant)
    with open(os.path.join(folder, "config.json"), "w") as f:
        json.dump(hf_config(variant, vocab, layers > s["layers"]), f, indent=1)
    hf = {"model.embed_tokens.weight": w["token_embd.weight"],
          "model.norm.weight": w["output_norm.weight"], "lm_head.weight": w["output.weight"]}
    names = {"attn_norm.weight": "input_layernorm.weight",
             "ffn_norm.weight": "post_attention_layernorm.weight",
             "attn_q.weight": "self_attn.q_proj.weight",
             "attn_q_a.weight": "self_attn.q_a_proj.weight",
             "attn_q_a_norm.weight": "self_attn.q_a_layernorm.weight",
             "attn_q_b.weight": "self_attn.q_b_proj.weight",
             "attn_kv_a_mqa.weight": "self_attn.kv_a_proj_with_mqa.weight",
             "attn_kv_a_norm.weight": "self_attn.kv_a_layernorm.weight",
             "attn_output.weight": "self_attn.o_proj.weight",
             "ffn_gate.weight": "mlp.gate_proj.weight", "ffn_up.weight": "mlp.up_proj.weight",
             "ffn_down.weight": "mlp.down_proj.weight",
             "ffn_gate_inp.weight": "mlp.gate.weight",
             "exp_probs_b.bias": "mlp.gate.e_score_correction_bias",
             "ffn_gate_shexp.weight": "mlp.shared_experts.gate_proj.weight",
             "ffn_up_shexp.weight": "mlp.shared_experts.up_proj.weight",
             "ffn_down_shexp.weight": "mlp.shared_experts.down_proj.weight"}
    experts = {"ffn_gate_exps": "gate_proj", "ffn_up_exps": "up_proj", "ffn_down_exps": "down_proj"}
    for l in range(layers):
        p, hp = f"blk.{l}.", f"model.layers.{l}."
        for g, h in names.items():
            if p + g in w:
                hf[hp + h] = w[p + g]
        hf[hp + "self_attn.kv_b_proj.weight"] = kv_b(w, l)
        for g, h in experts.items():
            if p + g + ".weight" in w:
                for e, t in enumerate(w[p + g + ".weight"]):
                    hf[hp + f"mlp.experts.{e}.{h}.weight"] = np.ascontiguousarray(t)
    if layers > s["layers"]:
        p, hp = f"blk.{s['layers']}.nextn.", f"model.layers.{s['layers']}."
        hf.update({hp + "enorm.weight": w[p + "enorm.weight"],
                   hp + "hnorm.weight": w[p + "hnorm.weight"],
                   hp + "eh_proj.weight": w[p + "eh_proj.weight"],
                   hp + "shared_head.norm.weight": w[p + "shared_head_norm.weight"],
                   hp + "shared_head.head.weight":
                       w.get(p + "shared_head_head.weight", w["output.weight"]),
                   hp + "embed_tokens.weight":
                       w.get(p + "embed_tokens.weight", w["token_embd.weight"])})
    save_file(hf, os.path.join(folder, "model.safetensors"))

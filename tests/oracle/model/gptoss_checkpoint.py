"""Random-weight gpt-oss checkpoints for the gpt-oss oracle tests, written with the `gguf` and
`safetensors` packages (independent of radixserve): the tensor names and metadata of a real
gpt-oss-20b conversion (llama.cpp's convert_hf_to_gguf.py: arch gpt-oss, experts in MXFP4,
everything else F32) and of the HF GptOssForCausalLM folder, with shrunk dimensions, and the
tokenizer of stories260K's GGUF so llama.cpp can load the file.

What makes gpt-oss different from the other MoE models, all exercised here: Q/K/V and output
projection biases, a learned attention sink per head, sliding-window layers alternating with
full ones (window shorter than the test prompts), YaRN rotary scaling on every layer, a router
with a bias whose top-k logits are softmaxed, experts with biases and the clamped
"swiglu_oai" activation."""
import json
import os

import numpy as np

from moe_checkpoint import _stories_tokenizer, add_stories_tokenizer, finish_gguf, weight_makers

# gpt-oss-20b's layout, shrunk: head_dim 64 -> 16 with q_dim (6 x 16) != hidden (64) as in the
# real model (64 x 64 != 2880; MXFP4 needs a multiple of 32), window 128 -> 24, 32 experts
# top-4 -> 8 top-2.
SHAPE = dict(hidden=64, layers=4, heads=6, kv_heads=2, head_dim=16, experts=8, top_k=2,
             expert_ffn=64, context=512, rope_theta=150000.0, eps=1e-5, window=24,
             yarn_factor=4.0, yarn_original=128)


def random_weights(seed, vocab, s=SHAPE):
    """Canonical (GGUF-named) float32 weights; numpy shapes are outermost-first."""
    rng, mat, norm = weight_makers(seed)
    H, D, E, I = s["hidden"], s["head_dim"], s["experts"], s["expert_ffn"]
    q, kv = s["heads"] * D, s["kv_heads"] * D

    w = {"token_embd.weight": mat(vocab, H, scale=1.0), "output_norm.weight": norm(H),
         "output.weight": mat(vocab, H)}
    for l in range(s["layers"]):
        p = f"blk.{l}."
        w.update({
            p + "attn_norm.weight": norm(H), p + "post_attention_norm.weight": norm(H),
            p + "attn_q.weight": mat(q, H), p + "attn_k.weight": mat(kv, H),
            p + "attn_v.weight": mat(kv, H), p + "attn_output.weight": mat(H, q),
            p + "attn_q.bias": mat(q, scale=0.2), p + "attn_k.bias": mat(kv, scale=0.2),
            p + "attn_v.bias": mat(kv, scale=0.2), p + "attn_output.bias": mat(H, scale=0.2),
            # Sinks of the size real ones have (a few units), so they take real probability mass.
            p + "attn_sinks.weight": (rng.standard_normal(s["heads"]) * 2.0).astype(np.float32),
            # A router with weights large enough that tokens spread over the experts.
            p + "ffn_gate_inp.weight": mat(E, H, scale=0.5),
            p + "ffn_gate_inp.bias": mat(E, scale=0.5),
            # Gate and up weights large enough that the +-7 clamps of swiglu_oai bite.
            p + "ffn_gate_exps.weight": mat(E, I, H, scale=0.6),
            p + "ffn_up_exps.weight": mat(E, I, H, scale=0.6),
            p + "ffn_down_exps.weight": mat(E, H, I),
            p + "ffn_gate_exps.bias": mat(E, I, scale=0.5),
            p + "ffn_up_exps.bias": mat(E, I, scale=0.5),
            p + "ffn_down_exps.bias": mat(E, H, scale=0.2),
        })
    return w


def is_expert_matrix(name):
    return name.endswith("_exps.weight")


def write_gguf(path, quant="MXFP4", seed=0, s=SHAPE, weights=None):
    """A gpt-oss GGUF: with quant "MXFP4" the expert matrices are MXFP4 (as in the real
    gpt-oss-20b GGUF) and every other tensor F32; "F32" keeps everything F32. The weights are
    random (seeded) unless given. Returns the float32 weights the file was made from."""
    import gguf
    tok = _stories_tokenizer()
    vocab = len(tok["tokenizer.ggml.tokens"])
    w = weights if weights is not None else random_weights(seed, vocab, s)
    writer = gguf.GGUFWriter(str(path), arch="gpt-oss")
    writer.add_name("gpt-oss-random")
    writer.add_file_type({"F32": 0, "MXFP4": 38}[quant])  # llama.cpp's llama_ftype
    writer.add_context_length(s["context"])
    writer.add_embedding_length(s["hidden"])
    writer.add_block_count(s["layers"])
    writer.add_feed_forward_length(s["expert_ffn"])
    writer.add_head_count(s["heads"])
    writer.add_head_count_kv(s["kv_heads"])
    writer.add_key_length(s["head_dim"])
    writer.add_value_length(s["head_dim"])
    writer.add_rope_freq_base(s["rope_theta"])
    writer.add_rope_scaling_type(gguf.RopeScalingType.YARN)
    writer.add_rope_scaling_factor(s["yarn_factor"])
    writer.add_rope_scaling_orig_ctx_len(s["yarn_original"])
    writer.add_layer_norm_rms_eps(s["eps"])
    writer.add_sliding_window(s["window"])
    writer.add_expert_count(s["experts"])
    writer.add_expert_used_count(s["top_k"])
    writer.add_expert_feed_forward_length(s["expert_ffn"])
    add_stories_tokenizer(writer, tok)
    mxfp4 = gguf.GGMLQuantizationType.MXFP4
    finish_gguf(writer, w, lambda name, t: mxfp4 if quant == "MXFP4" and is_expert_matrix(name)
                else None)
    return w


def dequantized(w, quant):
    """The weights as the file stores them."""
    import gguf
    if quant == "F32":
        return w
    qtype = gguf.GGMLQuantizationType.MXFP4
    return {name: (gguf.quants.dequantize(gguf.quants.quantize(t, qtype), qtype).reshape(t.shape)
                   if is_expert_matrix(name) else t) for name, t in w.items()}


def _hf_mxfp4(t):
    """A [..., rows, cols] float matrix as gpt-oss's HF MXFP4 pair: blocks [..., rows, cols / 32,
    16] (element 2j in the low nibble of byte j, 2j + 1 in the high one) and E8M0 scales [..., rows,
    cols / 32]; the values are exactly those of gguf-py's MXFP4 quantization of t (ggml keeps
    element j and j + 16 in byte j, and the same exponent byte)."""
    import gguf
    q = gguf.quants.quantize(t, gguf.GGMLQuantizationType.MXFP4)  # [..., rows, groups * 17]
    q = q.reshape(*t.shape[:-1], t.shape[-1] // 32, 17)
    scales, qs = q[..., 0], q[..., 1:]
    codes = np.concatenate([qs & 0x0F, qs >> 4], axis=-1)  # element order 0..31
    blocks = (codes[..., 0::2] | (codes[..., 1::2] << 4)).astype(np.uint8)
    return np.ascontiguousarray(blocks), np.ascontiguousarray(scales.astype(np.uint8))


def write_hf(folder, w, mxfp4=False, truncate=False, s=SHAPE):
    """The same weights as an HF GptOssForCausalLM folder in transformers' layout (experts stacked
    input-dimension first, gate and up interleaved), float32, or with mxfp4 the experts as the
    published checkpoints ship them (U8 blocks and scales). truncate: the YaRN ramp's truncation
    (gpt-oss's config says false; llama.cpp always truncates)."""
    from safetensors.numpy import save_file
    os.makedirs(folder, exist_ok=True)
    vocab = w["token_embd.weight"].shape[0]
    E, I, H = s["experts"], s["expert_ffn"], s["hidden"]
    config = {
        "architectures": ["GptOssForCausalLM"], "model_type": "gpt_oss",
        "hidden_size": H, "intermediate_size": I, "num_hidden_layers": s["layers"],
        "num_attention_heads": s["heads"], "num_key_value_heads": s["kv_heads"],
        "head_dim": s["head_dim"], "num_local_experts": E, "num_experts_per_tok": s["top_k"],
        "experts_per_token": s["top_k"], "sliding_window": s["window"],
        "layer_types": ["sliding_attention" if l % 2 == 0 else "full_attention"
                        for l in range(s["layers"])],
        "rope_theta": s["rope_theta"],
        "rope_scaling": {"rope_type": "yarn", "factor": s["yarn_factor"], "beta_fast": 32.0,
                         "beta_slow": 1.0, "truncate": truncate,
                         "original_max_position_embeddings": s["yarn_original"]},
        "max_position_embeddings": s["context"], "initial_context_length": s["yarn_original"],
        "rms_norm_eps": s["eps"], "swiglu_limit": 7.0, "attention_bias": True,
        "tie_word_embeddings": False, "vocab_size": vocab, "hidden_act": "silu",
        "torch_dtype": "float32", "bos_token_id": 1, "eos_token_id": 2, "pad_token_id": 0,
    }
    if mxfp4:
        config["quantization_config"] = {"quant_method": "mxfp4",
                                         "modules_to_not_convert": ["model.layers.*.self_attn",
                                                                    "model.layers.*.mlp.router",
                                                                    "model.embed_tokens",
                                                                    "lm_head"]}
    with open(os.path.join(folder, "config.json"), "w") as f:
        json.dump(config, f, indent=1)
    hf = {"model.embed_tokens.weight": w["token_embd.weight"],
          "model.norm.weight": w["output_norm.weight"], "lm_head.weight": w["output.weight"]}
    names = {"attn_norm.weight": "input_layernorm.weight",
             "post_attention_norm.weight": "post_attention_layernorm.weight",
             "attn_sinks.weight": "self_attn.sinks",
             "ffn_gate_inp.weight": "mlp.router.weight", "ffn_gate_inp.bias": "mlp.router.bias"}
    for g, h in (("attn_q", "q_proj"), ("attn_k", "k_proj"), ("attn_v", "v_proj"),
                 ("attn_output", "o_proj")):
        names[g + ".weight"] = f"self_attn.{h}.weight"
        names[g + ".bias"] = f"self_attn.{h}.bias"
    for l in range(s["layers"]):
        p, hp = f"blk.{l}.", f"model.layers.{l}."
        for g, h in names.items():
            hf[hp + h] = w[p + g]
        gate, up, down = (w[p + f"ffn_{k}_exps.weight"] for k in ("gate", "up", "down"))
        gate_up = np.empty((E, 2 * I, H), dtype=np.float32)  # [out, in], gate/up interleaved
        gate_up[:, 0::2], gate_up[:, 1::2] = gate, up
        bias = np.empty((E, 2 * I), dtype=np.float32)
        bias[:, 0::2], bias[:, 1::2] = w[p + "ffn_gate_exps.bias"], w[p + "ffn_up_exps.bias"]
        hf[hp + "mlp.experts.gate_up_proj_bias"] = bias
        hf[hp + "mlp.experts.down_proj_bias"] = w[p + "ffn_down_exps.bias"]
        if mxfp4:
            for name, t in (("gate_up_proj", gate_up), ("down_proj", down)):
                blocks, scales = _hf_mxfp4(t)
                hf[hp + f"mlp.experts.{name}_blocks"] = blocks
                hf[hp + f"mlp.experts.{name}_scales"] = scales
        else:
            hf[hp + "mlp.experts.gate_up_proj"] = np.ascontiguousarray(gate_up.transpose(0, 2, 1))
            hf[hp + "mlp.experts.down_proj"] = np.ascontiguousarray(down.transpose(0, 2, 1))
    save_file(hf, os.path.join(folder, "model.safetensors"))

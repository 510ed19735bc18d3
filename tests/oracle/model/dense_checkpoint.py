"""Random-weight dense checkpoints of architectures without a small real checkpoint here, written
with the `gguf` and `safetensors` packages (independent of radixserve): the tensor names and
metadata llama.cpp's convert_hf_to_gguf.py writes for them, and transformers' names and config
keys for the HF form, with shrunk dimensions and stories260K's tokenizer (a real 512-token
SentencePiece vocabulary) so llama.cpp can load the file.

  olmo2: no input norms; RMSNorm on the attention and MLP outputs (post_attention_norm,
         post_ffw_norm), RMSNorm over each token's whole Q and whole K projection; NEOX rotary
         (HF's rotate-half rows, not permuted by the converter).
  granite: Llama with Granite's four scalings (embedding, residual, attention, logits); normal
         rotary, so the GGUF holds Q/K rows in Meta's interleaved order (permuted back for HF).
  smollm3: Llama whose every 4th layer applies no rotary embedding (NoPE); interleaved rows.
  gemma2: Gemma's (1 + w) norms (the GGUF stores 1 + w) before and after attention and MLP,
         embeddings x sqrt(hidden), GELU(tanh) gating, tied LM head, every other layer sliding
         (a 32-token window here, so the 481-token story crosses it), attention and final logit
         soft-capping (small caps so both bite on random weights).
  phi3:  Q/K/V stacked in attn_qkv, [gate; up] stacked in ffn_up, partial rotary (12 of 16
         head dims, as Phi-4-mini's 0.75), NEOX rotary (rows not permuted).
  phi3_longrope: the same with LongRoPE (Phi-3.5 / Phi-4-mini): context 1024 over an original
         256, so the long factors and the attention factor sqrt(1 + ln 4 / ln 256) apply.
  mistral: Mistral 7B v0.1's layout (GGUF arch llama, interleaved rows) whose HF config has a
         sliding window (24 tokens here), which transformers applies to every layer and
         llama.cpp's llama graph does not.
"""
import json
import os

import numpy as np

from moe_checkpoint import _stories_tokenizer, add_stories_tokenizer, to_rotate_half

SHAPES = {
    "olmo2": dict(hidden=64, layers=4, heads=4, kv_heads=2, head_dim=16, ffn=96, context=512,
                  rope_theta=500000.0, eps=1e-6),
    # Scalings unlike their defaults so each one shows: attention 0.1 (not 1/sqrt(16)).
    "granite": dict(hidden=64, layers=4, heads=4, kv_heads=2, head_dim=16, ffn=96, context=512,
                    rope_theta=10000.0, eps=1e-5, embedding_scale=2.0, residual_scale=0.5,
                    attention_scale=0.1, logit_scale=3.0),
    "smollm3": dict(hidden=64, layers=8, heads=4, kv_heads=2, head_dim=16, ffn=96, context=512,
                    rope_theta=5000000.0, eps=1e-6),
    "gemma2": dict(hidden=64, layers=4, heads=4, kv_heads=2, head_dim=32, ffn=96, context=512,
                   rope_theta=10000.0, eps=1e-6, sliding_window=32, attn_softcap=5.0,
                   final_softcap=4.0, query_pre_attn_scalar=32),
    "phi3": dict(hidden=64, layers=4, heads=4, kv_heads=2, head_dim=16, ffn=96, context=512,
                 rope_theta=10000.0, eps=1e-5, rotary_dim=12),
    "phi3_longrope": dict(hidden=64, layers=4, heads=4, kv_heads=2, head_dim=16, ffn=96,
                          context=1024, original_context=256, rope_theta=10000.0, eps=1e-5,
                          rotary_dim=12,
                          long_factor=[1.0, 1.5, 2.0, 3.0, 5.0, 8.0],
                          short_factor=[1.0, 1.0, 1.1, 1.2, 1.5, 2.0]),
    "mistral": dict(hidden=64, layers=4, heads=4, kv_heads=2, head_dim=16, ffn=96, context=512,
                    rope_theta=10000.0, eps=1e-5, sliding_window=24),
}
# Architectures whose GGUF Q/K rows are in the interleaved rotary order.
INTERLEAVED = {"granite", "smollm3", "mistral"}
GGUF_ARCH = {"phi3_longrope": "phi3", "mistral": "llama"}


def random_weights(seed, vocab, arch):
    """Canonical (GGUF-named) float32 weights; numpy shapes are outermost-first."""
    s = SHAPES[arch]
    rng = np.random.default_rng(seed)
    H, D, I = s["hidden"], s["head_dim"], s["ffn"]
    q, kv = s["heads"] * D, s["kv_heads"] * D

    def mat(*shape, scale=None):
        return (rng.standard_normal(shape) * (scale or shape[-1] ** -0.5)).astype(np.float32)

    def norm(n):
        return (1.0 + 0.1 * rng.standard_normal(n)).astype(np.float32)

    w = {"token_embd.weight": mat(vocab, H, scale=1.0), "output_norm.weight": norm(H)}
    if arch != "gemma2":  # Gemma ties the LM head to the embeddings
        w["output.weight"] = mat(vocab, H)
    for l in range(s["layers"]):
        p = f"blk.{l}."
        w.update({
            p + "attn_q.weight": mat(q, H), p + "attn_k.weight": mat(kv, H),
            p + "attn_v.weight": mat(kv, H), p + "attn_output.weight": mat(H, q),
            p + "ffn_gate.weight": mat(I, H), p + "ffn_up.weight": mat(I, H),
            p + "ffn_down.weight": mat(H, I),
        })
        if arch.startswith("phi3"):
            w[p + "attn_qkv.weight"] = np.concatenate(
                [w.pop(p + "attn_q.weight"), w.pop(p + "attn_k.weight"),
                 w.pop(p + "attn_v.weight")])
            w[p + "ffn_up.weight"] = np.concatenate(
                [w.pop(p + "ffn_gate.weight"), w[p + "ffn_up.weight"]])
        if arch != "olmo2":
            w.update({p + "attn_norm.weight": norm(H), p + "ffn_norm.weight": norm(H)})
        if arch == "gemma2":
            w.update({p + "post_attention_norm.weight": norm(H),
                      p + "post_ffw_norm.weight": norm(H)})
        if arch == "olmo2":
            w.update({p + "attn_q_norm.weight": norm(q), p + "attn_k_norm.weight": norm(kv),
                      p + "post_attention_norm.weight": norm(H),
                      p + "post_ffw_norm.weight": norm(H)})
    return w


def write_gguf(path, arch, seed=0, quant="F32"):
    """The GGUF file; quant "Q8_0" quantizes every matrix. Returns the float32 weights."""
    import gguf
    s = SHAPES[arch]
    tok = _stories_tokenizer()
    w = random_weights(seed, len(tok["tokenizer.ggml.tokens"]), arch)
    qtype = getattr(gguf.GGMLQuantizationType, quant)
    writer = gguf.GGUFWriter(str(path), arch=GGUF_ARCH.get(arch, arch))
    writer.add_name("random weights")  # not "phi3...": llama.cpp keys vocab fixes on the name
    writer.add_file_type({"F32": 0, "Q8_0": 7}[quant])
    writer.add_context_length(s["context"])
    writer.add_embedding_length(s["hidden"])
    writer.add_block_count(s["layers"])
    writer.add_feed_forward_length(s["ffn"])
    writer.add_head_count(s["heads"])
    writer.add_head_count_kv(s["kv_heads"])
    if arch == "gemma2":
        writer.add_key_length(s["head_dim"])
        writer.add_value_length(s["head_dim"])
        writer.add_sliding_window(s["sliding_window"])
        writer.add_attn_logit_softcapping(s["attn_softcap"])
        writer.add_final_logit_softcapping(s["final_softcap"])
    else:
        writer.add_rope_dimension_count(s.get("rotary_dim", s["head_dim"]))
    writer.add_rope_freq_base(s["rope_theta"])
    writer.add_layer_norm_rms_eps(s["eps"])
    if "long_factor" in s:
        import math
        scale = s["context"] / s["original_context"]
        writer.add_rope_scaling_orig_ctx_len(s["original_context"])
        writer.add_rope_scaling_attn_factors(
            math.sqrt(1 + math.log(scale) / math.log(s["original_context"])))
    if arch == "granite":
        writer.add_embedding_scale(s["embedding_scale"])
        writer.add_residual_scale(s["residual_scale"])
        writer.add_attention_scale(s["attention_scale"])
        writer.add_logit_scale(s["logit_scale"])
    add_stories_tokenizer(writer, tok)
    if "long_factor" in s:
        w["rope_factors_long.weight"] = np.array(s["long_factor"], dtype=np.float32)
        w["rope_factors_short.weight"] = np.array(s["short_factor"], dtype=np.float32)
    for name, t in w.items():
        if quant == "F32" or t.ndim == 1:
            writer.add_tensor(name, t)
        else:
            writer.add_tensor(name, gguf.quants.quantize(t, qtype), raw_dtype=qtype)
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()
    return w


HF_CLASSES = {"olmo2": ("Olmo2ForCausalLM", "olmo2"), "granite": ("GraniteForCausalLM", "granite"),
              "smollm3": ("SmolLM3ForCausalLM", "smollm3"),
              "gemma2": ("Gemma2ForCausalLM", "gemma2"), "phi3": ("Phi3ForCausalLM", "phi3"),
              "phi3_longrope": ("Phi3ForCausalLM", "phi3"),
              "mistral": ("MistralForCausalLM", "mistral")}


def write_hf(folder, w, arch):
    """The same weights as a transformers folder of that architecture (float32 safetensors)."""
    from safetensors.numpy import save_file
    os.makedirs(folder, exist_ok=True)
    s = SHAPES[arch]
    cls, model_type = HF_CLASSES[arch]
    config = {
        "architectures": [cls], "model_type": model_type, "hidden_size": s["hidden"],
        "intermediate_size": s["ffn"], "num_hidden_layers": s["layers"],
        "num_attention_heads": s["heads"], "num_key_value_heads": s["kv_heads"],
        "rms_norm_eps": s["eps"], "rope_theta": s["rope_theta"],
        "max_position_embeddings": s["context"], "vocab_size": w["token_embd.weight"].shape[0],
        "tie_word_embeddings": False, "hidden_act": "silu", "attention_bias": False,
        "torch_dtype": "float32", "bos_token_id": 1, "eos_token_id": 2, "pad_token_id": 0,
    }
    if arch == "granite":
        config.update({"embedding_multiplier": s["embedding_scale"],
                       "residual_multiplier": s["residual_scale"],
                       "attention_multiplier": s["attention_scale"],
                       "logits_scaling": s["logit_scale"]})
    if arch == "gemma2":
        config.update({"head_dim": s["head_dim"], "hidden_activation": "gelu_pytorch_tanh",
                       "hidden_act": "gelu_pytorch_tanh", "tie_word_embeddings": True,
                       "sliding_window": s["sliding_window"],
                       "attn_logit_softcapping": s["attn_softcap"],
                       "final_logit_softcapping": s["final_softcap"],
                       "query_pre_attn_scalar": s["query_pre_attn_scalar"]})
        # HF's Gemma norms hold w of (1 + w); the GGUF holds 1 + w.
        w = {k: (t - 1.0 if k.endswith("norm.weight") else t) for k, t in w.items()}
    if arch.startswith("phi3"):
        config.update({"partial_rotary_factor": s["rotary_dim"] / s["head_dim"],
                       "original_max_position_embeddings": s["context"], "rope_scaling": None,
                       "sliding_window": None, "pad_token_id": 0})
    if arch == "phi3_longrope":
        config.update({"original_max_position_embeddings": s["original_context"],
                       "rope_scaling": {"type": "longrope", "long_factor": s["long_factor"],
                                        "short_factor": s["short_factor"]}})
    if arch == "mistral":
        config.update({"sliding_window": s["sliding_window"], "head_dim": s["head_dim"]})
    if arch == "smollm3":
        config.update({"no_rope_layers": [int((i + 1) % 4 != 0) for i in range(s["layers"])],
                       "no_rope_layer_interval": 4, "use_sliding_window": False,
                       "sliding_window": None})
    if arch in INTERLEAVED:
        w = dict(w)
        for l in range(s["layers"]):
            for name, heads in (("attn_q", s["heads"]), ("attn_k", s["kv_heads"])):
                key = f"blk.{l}.{name}.weight"
                w[key] = np.ascontiguousarray(to_rotate_half(w[key], heads))
    with open(os.path.join(folder, "config.json"), "w") as f:
        json.dump(config, f, indent=1)
    hf = {"model.embed_tokens.weight": w["token_embd.weight"],
          "model.norm.weight": w["output_norm.weight"]}
    if "output.weight" in w:
        hf["lm_head.weight"] = w["output.weight"]
    names = {"attn_q": "self_attn.q_proj", "attn_k": "self_attn.k_proj",
             "attn_v": "self_attn.v_proj", "attn_output": "self_attn.o_proj",
             "ffn_gate": "mlp.gate_proj", "ffn_up": "mlp.up_proj", "ffn_down": "mlp.down_proj"}
    if arch.startswith("phi3"):
        names = {"attn_qkv": "self_attn.qkv_proj", "attn_output": "self_attn.o_proj",
                 "ffn_up": "mlp.gate_up_proj", "ffn_down": "mlp.down_proj"}
    if arch == "gemma2":
        names.update({"attn_norm": "input_layernorm", "post_attention_norm":
                      "post_attention_layernorm", "ffn_norm": "pre_feedforward_layernorm",
                      "post_ffw_norm": "post_feedforward_layernorm"})
    elif arch != "olmo2":
        names.update({"attn_norm": "input_layernorm", "ffn_norm": "post_attention_layernorm"})
    if arch == "olmo2":
        names.update({"attn_q_norm": "self_attn.q_norm", "attn_k_norm": "self_attn.k_norm",
                      "post_attention_norm": "post_attention_layernorm",
                      "post_ffw_norm": "post_feedforward_layernorm"})
    for l in range(s["layers"]):
        for g, h in names.items():
            hf[f"model.layers.{l}.{h}.weight"] = w[f"blk.{l}.{g}.weight"]
    save_file(hf, os.path.join(folder, "model.safetensors"))

"""Random-weight MoE checkpoints for the MoE oracle tests, written with the `gguf` and
`safetensors` packages (independent of radixserve): the tensor names and metadata of a real
Qwen3-30B-A3B, Qwen1.5-MoE-A2.7B, OLMoE-1B-7B or Mixtral-8x7B conversion (llama.cpp's
convert_hf_to_gguf.py for GGUF: arch qwen3moe, qwen2moe, olmoe, or llama with
llama.expert_count; transformers' names for HF),
with shrunk
dimensions, and the tokenizer of stories260K's GGUF (a real 512-token SentencePiece vocabulary)
so llama.cpp can load the file."""
import json
import os

import numpy as np

from model_oracle_helpers import STORIES_GGUF, require

# Qwen3-30B-A3B's layout, shrunk: head_dim is set explicitly and q_dim (4 x 32) != hidden (64),
# as in the real model (32 x 128 != 2048).
SHAPE = dict(hidden=64, layers=4, heads=4, kv_heads=2, head_dim=32, experts=8, top_k=2,
             expert_ffn=32, dense_ffn=96, context=512, rope_theta=1000000.0, eps=1e-6)
# Mixtral: head_dim = hidden / heads, the expert width is feed_forward_length, no QK-norm.
MIXTRAL_SHAPE = dict(hidden=64, layers=4, heads=4, kv_heads=2, head_dim=16, experts=8, top_k=2,
                     expert_ffn=32, dense_ffn=32, context=512, rope_theta=1000000.0, eps=1e-5)
# Qwen2-MoE: Q/K/V biases, head_dim = hidden / heads, a shared expert with a sigmoid gate.
QWEN2MOE_SHAPE = dict(hidden=64, layers=4, heads=4, kv_heads=2, head_dim=16, experts=8, top_k=2,
                      expert_ffn=32, shared_ffn=64, dense_ffn=96, context=512,
                      rope_theta=1000000.0, eps=1e-6)
# OLMoE: QK-norm over the whole Q and K projections (llama.cpp sizes both by n_embd: MHA here),
# the expert width is feed_forward_length.
OLMOE_SHAPE = dict(hidden=64, layers=4, heads=4, kv_heads=4, head_dim=16, experts=16, top_k=4,
                   expert_ffn=32, dense_ffn=32, context=512, rope_theta=10000.0, eps=1e-5)
SHAPES = {"qwen3moe": SHAPE, "llama": MIXTRAL_SHAPE, "qwen2moe": QWEN2MOE_SHAPE,
          "olmoe": OLMOE_SHAPE}


def weight_makers(seed):
    """(rng, mat, norm): mat(*shape, scale) draws a float32 matrix with std scale (default
    1/sqrt(fan_in)), norm(n) a norm vector near 1."""
    rng = np.random.default_rng(seed)

    def mat(*shape, scale=None):
        fan_in = shape[-1]
        return (rng.standard_normal(shape) * (scale or fan_in ** -0.5)).astype(np.float32)

    def norm(n):
        return (1.0 + 0.1 * rng.standard_normal(n)).astype(np.float32)

    return rng, mat, norm


def random_weights(seed, vocab, s=SHAPE, arch="qwen3moe"):
    """Canonical (GGUF-named) float32 weights; numpy shapes are outermost-first."""
    _, mat, norm = weight_makers(seed)
    H, D, E, I = s["hidden"], s["head_dim"], s["experts"], s["expert_ffn"]
    q, kv = s["heads"] * D, s["kv_heads"] * D

    w = {"token_embd.weight": mat(vocab, H, scale=1.0), "output_norm.weight": norm(H),
         "output.weight": mat(vocab, H)}
    for l in range(s["layers"]):
        p = f"blk.{l}."
        w.update({
            p + "attn_norm.weight": norm(H), p + "ffn_norm.weight": norm(H),
            p + "attn_q.weight": mat(q, H), p + "attn_k.weight": mat(kv, H),
            p + "attn_v.weight": mat(kv, H), p + "attn_output.weight": mat(H, q),
            # A router with weights large enough that tokens spread over the experts.
            p + "ffn_gate_inp.weight": mat(E, H, scale=0.5),
            p + "ffn_gate_exps.weight": mat(E, I, H), p + "ffn_up_exps.weight": mat(E, I, H),
            p + "ffn_down_exps.weight": mat(E, H, I),
        })
        if arch == "qwen3moe":
            w.update({p + "attn_q_norm.weight": norm(D), p + "attn_k_norm.weight": norm(D)})
        if arch == "olmoe":
            w.update({p + "attn_q_norm.weight": norm(q), p + "attn_k_norm.weight": norm(kv)})
        if arch == "qwen2moe":
            S = s["shared_ffn"]
            w.update({
                p + "attn_q.bias": mat(q, scale=0.1), p + "attn_k.bias": mat(kv, scale=0.1),
                p + "attn_v.bias": mat(kv, scale=0.1),
                p + "ffn_gate_inp_shexp.weight": mat(H, scale=0.3),
                p + "ffn_gate_shexp.weight": mat(S, H), p + "ffn_up_shexp.weight": mat(S, H),
                p + "ffn_down_shexp.weight": mat(H, S),
            })
    return w


def _stories_tokenizer():
    import gguf
    reader = gguf.GGUFReader(require(STORIES_GGUF))
    fields = {}
    for key in ("tokenizer.ggml.tokens", "tokenizer.ggml.scores", "tokenizer.ggml.token_type"):
        fields[key] = reader.fields[key].contents()
    return fields


def add_stories_tokenizer(writer, tok):
    """stories260K's SentencePiece vocabulary and special ids, as its GGUF has them."""
    writer.add_tokenizer_model("llama")
    writer.add_tokenizer_pre("default")
    writer.add_token_list(tok["tokenizer.ggml.tokens"])
    writer.add_token_scores(tok["tokenizer.ggml.scores"])
    writer.add_token_types(tok["tokenizer.ggml.token_type"])
    writer.add_bos_token_id(1)
    writer.add_eos_token_id(2)
    writer.add_unk_token_id(0)
    writer.add_add_bos_token(True)
    writer.add_add_eos_token(False)


def write_gguf(path, quant="F32", seed=0, arch="qwen3moe", per_expert=False):
    """A qwen3moe (or Mixtral: llama) GGUF; quant "Q8_0" quantizes every matrix but the router
    (as llama-quantize leaves ffn_gate_inp in F32). Returns the float32 weights the file was made
    from (for llama, Q/K rows as stored: llama.cpp's interleaved rotary order). per_expert: one
    tensor per expert (blk.N.ffn_gate.E.weight), as Mixtral GGUFs were converted before llama.cpp
    stacked the experts (it no longer reads them)."""
    import gguf
    s = SHAPES[arch]
    tok = _stories_tokenizer()
    vocab = len(tok["tokenizer.ggml.tokens"])
    w = random_weights(seed, vocab, s, arch)
    qtype = getattr(gguf.GGMLQuantizationType, quant)
    writer = gguf.GGUFWriter(str(path), arch=arch)
    writer.add_name("qwen3moe-random")
    writer.add_file_type({"F32": 0, "F16": 1, "Q8_0": 7}[quant])  # llama.cpp's llama_ftype
    writer.add_context_length(s["context"])
    writer.add_embedding_length(s["hidden"])
    writer.add_block_count(s["layers"])
    writer.add_feed_forward_length(s["dense_ffn"])
    writer.add_head_count(s["heads"])
    writer.add_head_count_kv(s["kv_heads"])
    if arch == "qwen3moe":
        writer.add_key_length(s["head_dim"])
        writer.add_value_length(s["head_dim"])
    else:
        writer.add_rope_dimension_count(s["head_dim"])
    writer.add_rope_freq_base(s["rope_theta"])
    writer.add_layer_norm_rms_eps(s["eps"])
    writer.add_expert_count(s["experts"])
    writer.add_expert_used_count(s["top_k"])
    if arch in ("qwen3moe", "qwen2moe"):
        writer.add_expert_feed_forward_length(s["expert_ffn"])
    if arch == "qwen2moe":
        writer.add_expert_shared_feed_forward_length(s["shared_ffn"])
    add_stories_tokenizer(writer, tok)
    tensors = {name: t.astype(np.float16) if quant == "F16" and t.ndim > 1 else t
               for name, t in w.items()}
    if per_expert:
        for name in [n for n in tensors if n.endswith("_exps.weight")]:
            stacked = tensors.pop(name)
            for e in range(stacked.shape[0]):
                tensors[name.replace("_exps.weight", f".{e}.weight")] = stacked[e]
    keep = quant in ("F32", "F16")
    finish_gguf(writer, tensors, lambda name, t: None if keep or t.ndim == 1 or
                name.endswith("ffn_gate_inp.weight") else qtype)
    return w


def finish_gguf(writer, tensors, qtype_of):
    """Adds `tensors` (name -> array), each quantized to qtype_of(name, array) unless that is
    None, and writes the file out."""
    import gguf
    for name, t in tensors.items():
        qtype = qtype_of(name, t)
        if qtype is None:
            writer.add_tensor(name, t)
        else:
            writer.add_tensor(name, gguf.quants.quantize(t, qtype), raw_dtype=qtype)
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()


def dequantized(w, quant):
    """The weights as a quantized file stores them (what an HF copy of that file holds)."""
    import gguf
    if quant == "F32":
        return w
    qtype = getattr(gguf.GGMLQuantizationType, quant)
    out = {}
    for name, t in w.items():
        if t.ndim == 1 or name.endswith("ffn_gate_inp.weight"):
            out[name] = t
        else:
            out[name] = gguf.quants.dequantize(gguf.quants.quantize(t, qtype), qtype).reshape(t.shape)
    return out


def to_rotate_half(w, n_head):
    """Inverse of llama.cpp's HF->GGUF Q/K row permutation: rows (h, i, pair) -> (h, pair, i)."""
    d = w.shape[0] // n_head
    return w.reshape(n_head, d // 2, 2, -1).swapaxes(1, 2).reshape(w.shape)


def write_hf(folder, w, arch="qwen3moe"):
    """The same weights as an HF Qwen3MoeForCausalLM (or MixtralForCausalLM) folder, per-expert
    float32 tensors. qwen3moe GGUF rows keep HF's rotate-half order; llama (Mixtral) Q/K rows are
    permuted back."""
    from safetensors.numpy import save_file
    os.makedirs(folder, exist_ok=True)
    vocab = w["token_embd.weight"].shape[0]
    s = SHAPES[arch]
    if arch == "llama":
        w = dict(w)
        for l in range(s["layers"]):
            for name, heads in (("attn_q", s["heads"]), ("attn_k", s["kv_heads"])):
                key = f"blk.{l}.{name}.weight"
                w[key] = np.ascontiguousarray(to_rotate_half(w[key], heads))
    config = {
        "architectures": ["Qwen3MoeForCausalLM"], "model_type": "qwen3_moe",
        "hidden_size": s["hidden"], "intermediate_size": s["dense_ffn"],
        "moe_intermediate_size": s["expert_ffn"], "num_experts": s["experts"],
        "num_experts_per_tok": s["top_k"], "norm_topk_prob": True, "decoder_sparse_step": 1,
        "mlp_only_layers": [], "num_hidden_layers": s["layers"],
        "num_attention_heads": s["heads"], "num_key_value_heads": s["kv_heads"],
        "head_dim": s["head_dim"], "rms_norm_eps": s["eps"], "rope_theta": s["rope_theta"],
        "max_position_embeddings": s["context"], "vocab_size": vocab,
        "tie_word_embeddings": False, "hidden_act": "silu", "torch_dtype": "float32",
        "bos_token_id": 1, "eos_token_id": 2,
    }
    if arch == "llama":
        for key in ("moe_intermediate_size", "num_experts", "norm_topk_prob",
                    "decoder_sparse_step", "mlp_only_layers", "head_dim"):
            del config[key]
        config.update({"architectures": ["MixtralForCausalLM"], "model_type": "mixtral",
                       "num_local_experts": s["experts"], "intermediate_size": s["expert_ffn"]})
    if arch == "olmoe":
        for key in ("moe_intermediate_size", "decoder_sparse_step", "mlp_only_layers", "head_dim"):
            del config[key]
        config.update({"architectures": ["OlmoeForCausalLM"], "model_type": "olmoe",
                       "norm_topk_prob": False, "clip_qkv": None,
                       "intermediate_size": s["expert_ffn"]})
    if arch == "qwen2moe":
        del config["head_dim"]
        config.update({"architectures": ["Qwen2MoeForCausalLM"], "model_type": "qwen2_moe",
                       "norm_topk_prob": False,
                       "shared_expert_intermediate_size": s["shared_ffn"]})
    with open(os.path.join(folder, "config.json"), "w") as f:
        json.dump(config, f, indent=1)
    hf = {"model.embed_tokens.weight": w["token_embd.weight"],
          "model.norm.weight": w["output_norm.weight"], "lm_head.weight": w["output.weight"]}
    names = {"attn_norm": "input_layernorm", "ffn_norm": "post_attention_layernorm",
             "attn_q": "self_attn.q_proj", "attn_k": "self_attn.k_proj",
             "attn_v": "self_attn.v_proj", "attn_output": "self_attn.o_proj",
             "attn_q_norm": "self_attn.q_norm", "attn_k_norm": "self_attn.k_norm",
             "ffn_gate_inp": "mlp.gate"}
    experts = {"ffn_gate_exps": "gate_proj", "ffn_up_exps": "up_proj", "ffn_down_exps": "down_proj"}
    moe = "mlp"
    if arch == "llama":
        del names["attn_q_norm"], names["attn_k_norm"]
        names["ffn_gate_inp"] = "block_sparse_moe.gate"
        experts = {"ffn_gate_exps": "w1", "ffn_up_exps": "w3", "ffn_down_exps": "w2"}
        moe = "block_sparse_moe"
    if arch == "qwen2moe":
        del names["attn_q_norm"], names["attn_k_norm"]
        names.update({"ffn_gate_shexp": "mlp.shared_expert.gate_proj",
                      "ffn_up_shexp": "mlp.shared_expert.up_proj",
                      "ffn_down_shexp": "mlp.shared_expert.down_proj"})
    for l in range(s["layers"]):
        for g, h in names.items():
            hf[f"model.layers.{l}.{h}.weight"] = w[f"blk.{l}.{g}.weight"]
        if arch == "qwen2moe":
            for g in ("q", "k", "v"):
                hf[f"model.layers.{l}.self_attn.{g}_proj.bias"] = w[f"blk.{l}.attn_{g}.bias"]
            # HF keeps the shared expert's gate as a Linear(hidden, 1): [1, hidden].
            hf[f"model.layers.{l}.mlp.shared_expert_gate.weight"] = \
                w[f"blk.{l}.ffn_gate_inp_shexp.weight"][None, :]
        for g, h in experts.items():
            for e, t in enumerate(w[f"blk.{l}.{g}.weight"]):
                hf[f"model.layers.{l}.{moe}.experts.{e}.{h}.weight"] = np.ascontiguousarray(t)
    save_file(hf, os.path.join(folder, "model.safetensors"))

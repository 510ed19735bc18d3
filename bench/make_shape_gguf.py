#!/usr/bin/env python3
"""Writes a random-weight GGUF of a named model shape, for benchmarks at real sizes without
downloading the model (issue 18): radixserve and the llama.cpp peer load the same file, and
llama-quantize (from bench/build_peer.sh) makes the Q4_K_M / Q8_0 variants from it.

    $RADIX_VENV/bin/python bench/make_shape_gguf.py --shape llama-1b \\
        --out ~/.cache/radixserve/models/shape-llama-1b-bf16.gguf [--dtype bf16|f32] [--seed 0]
    <peer bin>/llama-quantize shape-llama-1b-bf16.gguf shape-llama-1b-q4_k_m.gguf Q4_K_M

The vocabulary is borrowed from an existing GGUF (--vocab-from, default SmolLM2-135M's: every
tokenizer.* key, so the tokenizer, chat template and bos/eos ids are real), which sets the
embedding and output sizes; the shapes below are the named models' but with that vocabulary.
Weights are normal with std 0.02 (HF's initializer_range: RMS-normed activations stay near 1),
norms are 1.0, Q/K/V biases (qwen2) std 0.02; each tensor has its own generator seeded by
(--seed, tensor index), so the file is deterministic. Matrices are BF16 or F32 (--dtype), or
Q8_0 quantized here by gguf-py (--dtype q8_0: for shapes whose BF16 file would not fit on disk
next to its quantization, e.g. the 8B shape), norms
and biases F32, as llama.cpp's converter writes them. Tensors are generated and written one at a
time (in row chunks), so the 8B shape needs well under 1 GB of RAM.

Not copied from the named models: Llama-3's rope scaling (llama3 type) and their 128k contexts.
The qwen2.5 presets are written as architecture qwen2 (Q/K/V biases, NEOX rotary), which both
engines read. The MoE presets (olmoe-1b-7b: 64 experts top-8 of width 1024, whole-projection
QK-norm; qwen3-30b-a3b: 128 experts top-8 of width 768, per-head QK-norm) write stacked
ffn_{gate,up,down}_exps tensors and a router ffn_gate_inp, as llama.cpp's converter does; with
random routers every expert is about equally likely. The gpt-oss-20b preset writes llama.cpp's
gpt-oss layout (Q/K/V/output biases, a sink per head, post-attention norm, router and expert
biases, sliding window 128 on alternate layers, YaRN x32 from 4096) in BF16 experts; llama-quantize
MXFP4_MOE then gives the released form (experts MXFP4). --layers keeps the first N blocks (the
full 24-layer shape is 39 GiB in BF16).
"""
import argparse
import pathlib

import numpy as np
from gguf import GGMLQuantizationType, GGUFReader, GGUFValueType, GGUFWriter, RopeScalingType
from gguf.quants import quantize

DEFAULT_VOCAB = pathlib.Path.home() / ".cache/radixserve/models/smollm2-135m-instruct-q4_1.gguf"

# hidden, layers, heads, kv_heads, ffn, rope theta, rms eps, context, tied (no output.weight).
SHAPES = {
    "llama-1b": dict(arch="llama", hidden=2048, layers=16, heads=32, kv_heads=8, ffn=8192,
                     theta=500000.0, eps=1e-5, context=8192, tied=True),
    "llama-8b": dict(arch="llama", hidden=4096, layers=32, heads=32, kv_heads=8, ffn=14336,
                     theta=500000.0, eps=1e-5, context=8192, tied=False),
    "qwen2.5-0.5b": dict(arch="qwen2", hidden=896, layers=24, heads=14, kv_heads=2, ffn=4864,
                         theta=1000000.0, eps=1e-6, context=32768, tied=True),
    "qwen2.5-3b": dict(arch="qwen2", hidden=2048, layers=36, heads=16, kv_heads=2, ffn=11008,
                       theta=1000000.0, eps=1e-6, context=32768, tied=True),
    # Mixtures of experts (issue 22): ffn is the expert width; every layer routes.
    "olmoe-1b-7b": dict(arch="olmoe", hidden=2048, layers=16, heads=16, kv_heads=16, ffn=1024,
                        experts=64, top_k=8, theta=10000.0, eps=1e-5, context=4096, tied=False),
    "qwen3-30b-a3b": dict(arch="qwen3moe", hidden=2048, layers=48, heads=32, kv_heads=4,
                          head_dim=128, ffn=768, dense_ffn=6144, experts=128, top_k=8,
                          theta=1000000.0, eps=1e-6, context=40960, tied=False),
    "gpt-oss-20b": dict(arch="gpt-oss", hidden=2880, layers=24, heads=64, kv_heads=8,
                        head_dim=64, ffn=2880, experts=32, top_k=4, theta=150000.0, eps=1e-5,
                        context=131072, tied=False, window=128, yarn_factor=32.0,
                        yarn_original=4096),
}
STD = 0.02
CHUNK = 1 << 22  # elements generated at a time
# llama.cpp's llama_ftype: ALL_F32, MOSTLY_BF16, MOSTLY_Q8_0
FILE_TYPE = {"f32": 0, "bf16": 32, "q8_0": 7}


def tensor_plan(s, vocab):
    """(name, numpy shape outermost-first, kind) in llama.cpp converter order; kind is "matrix",
    "norm" or "bias"."""
    H, D = s["hidden"], s.get("head_dim", s["hidden"] // s["heads"])
    q, kv, F = s["heads"] * D, s["kv_heads"] * D, s["ffn"]
    E = s.get("experts", 0)
    plan = [("token_embd.weight", (vocab, H), "matrix")]
    for l in range(s["layers"]):
        p = f"blk.{l}."
        plan += [(p + "attn_norm.weight", (H,), "norm"),
                 (p + "attn_q.weight", (q, H), "matrix"), (p + "attn_k.weight", (kv, H), "matrix"),
                 (p + "attn_v.weight", (kv, H), "matrix")]
        if s["arch"] in ("qwen2", "gpt-oss"):
            plan += [(p + "attn_q.bias", (q,), "bias"), (p + "attn_k.bias", (kv,), "bias"),
                     (p + "attn_v.bias", (kv,), "bias")]
        if s["arch"] == "olmoe":  # RMSNorm over the whole Q and K projections
            plan += [(p + "attn_q_norm.weight", (q,), "norm"),
                     (p + "attn_k_norm.weight", (kv,), "norm")]
        if s["arch"] == "qwen3moe":  # per head
            plan += [(p + "attn_q_norm.weight", (D,), "norm"),
                     (p + "attn_k_norm.weight", (D,), "norm")]
        plan.append((p + "attn_output.weight", (H, q), "matrix"))
        if s["arch"] == "gpt-oss":
            plan += [(p + "attn_output.bias", (H,), "bias"),
                     (p + "attn_sinks.weight", (s["heads"],), "bias"),
                     (p + "post_attention_norm.weight", (H,), "norm"),
                     (p + "ffn_gate_inp.weight", (E, H), "matrix"),
                     (p + "ffn_gate_inp.bias", (E,), "bias"),
                     (p + "ffn_gate_exps.weight", (E, F, H), "matrix"),
                     (p + "ffn_gate_exps.bias", (E, F), "bias"),
                     (p + "ffn_up_exps.weight", (E, F, H), "matrix"),
                     (p + "ffn_up_exps.bias", (E, F), "bias"),
                     (p + "ffn_down_exps.weight", (E, H, F), "matrix"),
                     (p + "ffn_down_exps.bias", (E, H), "bias")]
            continue
        plan.append((p + "ffn_norm.weight", (H,), "norm"))
        if E:
            plan += [(p + "ffn_gate_inp.weight", (E, H), "matrix"),
                     (p + "ffn_gate_exps.weight", (E, F, H), "matrix"),
                     (p + "ffn_up_exps.weight", (E, F, H), "matrix"),
                     (p + "ffn_down_exps.weight", (E, H, F), "matrix")]
        else:
            plan += [(p + "ffn_gate.weight", (F, H), "matrix"),
                     (p + "ffn_up.weight", (F, H), "matrix"),
                     (p + "ffn_down.weight", (H, F), "matrix")]
    plan.append(("output_norm.weight", (H,), "norm"))
    if not s["tied"]:
        plan.append(("output.weight", (vocab, H), "matrix"))
    return plan


def to_bf16(x):
    """float32 -> bfloat16 bits (uint16), round to nearest even (no NaNs here)."""
    u = x.view(np.uint32)
    return ((u + 0x7FFF + ((u >> 16) & 1)) >> 16).astype(np.uint16)


def q8_0_row_bytes(cols):
    return cols // 32 * 34  # per block of 32: an f16 scale and 32 int8 codes


def make_tensor(shape, kind, dtype, seed, index):
    if kind == "norm":
        return np.ones(shape, np.float32)
    rng = np.random.default_rng([seed, index])
    q8 = kind == "matrix" and dtype == "q8_0"
    if q8:
        out = np.empty((*shape[:-1], q8_0_row_bytes(shape[-1])), np.uint8)
    else:
        out = np.empty(shape, np.uint16 if kind == "matrix" and dtype == "bf16" else np.float32)
    flat = out.reshape(-1, out.shape[-1])
    rows = max(1, CHUNK // shape[-1])
    for r in range(0, flat.shape[0], rows):
        x = rng.standard_normal((min(rows, flat.shape[0] - r), shape[-1]), dtype=np.float32)
        x *= STD
        if q8:  # gguf-py's Q8_0, the format llama-quantize writes (d = max |x| / 127)
            flat[r:r + len(x)] = quantize(x, GGMLQuantizationType.Q8_0)
        else:
            flat[r:r + len(x)] = to_bf16(x) if out.dtype == np.uint16 else x
    return out


def copy_tokenizer(writer, path):
    """Every tokenizer.* key of the GGUF at path; returns the vocabulary size."""
    reader = GGUFReader(path)
    for key, field in reader.fields.items():
        if key.startswith("tokenizer."):
            sub = field.types[-1] if field.types[0] == GGUFValueType.ARRAY else None
            writer.add_key_value(key, field.contents(), field.types[0], sub_type=sub)
    return len(reader.fields["tokenizer.ggml.tokens"].data)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--shape", required=True, choices=sorted(SHAPES))
    ap.add_argument("--out", required=True, type=pathlib.Path)
    ap.add_argument("--dtype", default="bf16", choices=sorted(FILE_TYPE))
    ap.add_argument("--vocab-from", default=DEFAULT_VOCAB, type=pathlib.Path)
    ap.add_argument("--seed", default=0, type=int)
    ap.add_argument("--layers", type=int, help="keep the first N blocks of the shape")
    args = ap.parse_args()
    s = dict(SHAPES[args.shape])
    if args.layers:
        s["layers"] = min(args.layers, s["layers"])
    arch = s["arch"]

    tmp = args.out.with_name(args.out.name + ".tmp")
    writer = GGUFWriter(tmp, arch)
    writer.add_name(f"shape-{args.shape} (random weights, {s['layers']} layers)")
    writer.add_file_type(FILE_TYPE[args.dtype])
    vocab = copy_tokenizer(writer, args.vocab_from)
    writer.add_vocab_size(vocab)
    writer.add_context_length(s["context"])
    writer.add_embedding_length(s["hidden"])
    writer.add_block_count(s["layers"])
    writer.add_feed_forward_length(s.get("dense_ffn", s["ffn"]))
    writer.add_head_count(s["heads"])
    writer.add_head_count_kv(s["kv_heads"])
    if arch == "llama":  # as convert_hf_to_gguf.py writes it (qwen2: n_embd / n_head)
        writer.add_rope_dimension_count(s["hidden"] // s["heads"])
    if "head_dim" in s:
        writer.add_key_length(s["head_dim"])
        writer.add_value_length(s["head_dim"])
    if "experts" in s:
        writer.add_expert_count(s["experts"])
        writer.add_expert_used_count(s["top_k"])
        if arch == "qwen3moe":
            writer.add_expert_feed_forward_length(s["ffn"])
    if "window" in s:
        writer.add_sliding_window(s["window"])
        writer.add_rope_scaling_type(RopeScalingType.YARN)
        writer.add_rope_scaling_factor(s["yarn_factor"])
        writer.add_rope_scaling_orig_ctx_len(s["yarn_original"])
        writer.add_expert_feed_forward_length(s["ffn"])
    writer.add_rope_freq_base(s["theta"])
    writer.add_layer_norm_rms_eps(s["eps"])

    plan = tensor_plan(s, vocab)
    for name, shape, kind in plan:
        bf16 = kind == "matrix" and args.dtype == "bf16"
        if kind == "matrix" and args.dtype == "q8_0":
            byte_shape = (*shape[:-1], q8_0_row_bytes(shape[-1]))
            writer.add_tensor_info(name, byte_shape, np.dtype(np.uint8), int(np.prod(byte_shape)),
                                   raw_dtype=GGMLQuantizationType.Q8_0)
            continue
        nbytes = int(np.prod(shape)) * (2 if bf16 else 4)
        writer.add_tensor_info(name, shape, np.dtype(np.uint16 if bf16 else np.float32), nbytes,
                               raw_dtype=GGMLQuantizationType.BF16 if bf16 else None)
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_ti_data_to_file()
    for index, (name, shape, kind) in enumerate(plan):
        writer.write_tensor_data(make_tensor(shape, kind, args.dtype, args.seed, index))
    writer.close()
    tmp.rename(args.out)

    total = sum(int(np.prod(shape)) for _, shape, _ in plan)
    embd = vocab * s["hidden"] * (1 if s["tied"] else 2)
    print(f"{args.out}: {args.shape} ({arch}, vocabulary {vocab}, {args.dtype}), "
          f"{total:,} parameters ({total / 1e9:.3f} B; {total - embd:,} without embeddings), "
          f"{args.out.stat().st_size / 2**30:.2f} GiB")


if __name__ == "__main__":
    main()

#!/usr/bin/env python3
"""Cost of multi-LoRA serving on radixserve (issue 21's targets), SmolLM2-135M Q4_1 base, or any
Llama-family or mixture-of-experts GGUF given with --model (the adapters take its shape from its
metadata, e.g. the shape-llama-1b-q4_k_m.gguf or shape-olmoe-1b-7b-q4_k_m.gguf of
bench/make_shape_gguf.py; on an MoE model gate/up/down are adapted per expert).

    python bench/lora.py [--model GGUF] [--rank 16] [--adapters 8] [--clients 32]
                         [--max-new 64] [--rounds 3] [--dtype float32|float16]
                         [--llama-server BIN] [--out-file F.json]

Adapters: --adapters PEFT folders of rank --rank on all seven projections (q/k/v/o/gate/up/down),
random (tests/fixtures/lora_files.py), served with --lora-paths; their GGUF LoRA forms for
llama-server.
1. Throughput: --clients concurrent /generate requests spread round-robin over the adapters
   against the same prompts on the base model; greedy, ignore_eos, --max-new tokens each, so both
   batches generate the same number of tokens. Output tok/s = tokens / wall time of the batch;
   the ratio is the median over --rounds rounds of the ratio within a round.
2. Single-stream decode: one streaming request at a time, decode tok/s =
   (tokens - 1) / (time of the last event - time of the first), best of --rounds rounds that
   alternate the base model and an adapter.
3. With --llama-server (bench/build_peer.sh builds it): the same single-stream figure from
   llama.cpp's server started with --lora of every adapter (scale 0 by default) and the request's
   "lora": [{"id": i, "scale": 1}], next to its base-model figure; and radixserve / llama.cpp.
One server runs at a time; the machine may be shared, so compare ratios within one run.
"""
import argparse
import json
import pathlib
import statistics
import subprocess
import sys
import tempfile
import time

import numpy as np
import requests

REPO = pathlib.Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "tests/e2e"))
sys.path.insert(0, str(REPO / "tests/fixtures"))
from lora_files import Adapter, Shape  # noqa: E402
from server_util import SMOLLM2, Server, free_port  # noqa: E402
from structured_output import post_all  # noqa: E402

SMOLLM2_SHAPE = Shape(hidden=576, intermediate=1536, layers=30, heads=9, kv_heads=3, head_dim=64)
TOPICS = ["the sea", "a red kite", "old maps", "winter bread", "a lost key", "the moon", "trains",
          "a small dog", "rain", "clocks", "a garden", "bees", "a lighthouse", "snow", "the market",
          "a violin", "paper boats", "a bridge", "owls", "the desert", "a kettle", "stars",
          "a fox", "letters", "a harbour", "chess", "apples", "a storm", "lanterns", "a river",
          "the forest", "a bicycle"]


def throughput(srv, args, names):
    prompts = [f"Write a short story about {TOPICS[i % len(TOPICS)]}." for i in range(args.clients)]
    sampling = {"max_new_tokens": args.max_new, "temperature": 0, "ignore_eos": True}
    kinds = {"base": [{"text": p, "sampling_params": sampling} for p in prompts],
             "lora": [{"text": p, "sampling_params": sampling, "lora_path": names[i % len(names)]}
                      for i, p in enumerate(prompts)]}
    post_all(srv, kinds["base"][:2] + kinds["lora"][:2])  # warm-up
    rounds = []
    for _ in range(args.rounds):
        row = {}
        for kind, bodies in kinds.items():
            wall, out = post_all(srv, bodies)
            tokens = sum(o["meta_info"]["completion_tokens"] for o in out)
            assert tokens == args.clients * args.max_new
            row[kind] = tokens / wall
        rounds.append(row)
        print(f"  round: base {row['base']:.1f} tok/s, {len(names)} adapters {row['lora']:.1f} "
              f"tok/s, ratio {row['lora'] / row['base']:.3f}", flush=True)
    return {"rounds": rounds,
            "ratio": statistics.median(r["lora"] / r["base"] for r in rounds)}


def stream_decode(url, body):
    first = last = None
    tokens = 0
    with requests.post(url, json=body, stream=True, timeout=600) as r:
        r.raise_for_status()
        for line in r.iter_lines():
            if not line.startswith(b"data: ") or line == b"data: [DONE]":
                continue
            now = time.perf_counter()
            first = first or now
            last = now
            tokens += 1
    return tokens, last - first


def single_stream(url, args, body_of):
    best = {}
    for _ in range(args.rounds):
        for kind in ("base", "lora"):  # alternating, so drift of the machine hits both alike
            n, seconds = stream_decode(url, body_of(kind))
            rate = (n - 1) / seconds
            best[kind] = max(best.get(kind, 0.0), rate)
    best["ratio"] = best["lora"] / best["base"]
    return best


def radix_single(srv, args, name):
    prompt = "Write a short story about a lighthouse keeper."

    def body(kind):
        b = {"text": prompt, "stream": True,
             "sampling_params": {"max_new_tokens": args.max_new * 2, "temperature": 0,
                                 "ignore_eos": True}}
        if kind == "lora":
            b["lora_path"] = name
        return b
    return single_stream(srv.url + "/generate", args, body)


def llama_server_single(args, ggufs):
    port = free_port()
    cmd = [args.llama_server, "-m", args.model, "--port", str(port), "--host", "127.0.0.1",
           "-t", "2", "-c", "2048", "--lora-init-without-apply"]
    for g in ggufs:
        cmd += ["--lora", g]
    log = tempfile.NamedTemporaryFile("w", suffix=".log", delete=False)
    proc = subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT)
    url = f"http://127.0.0.1:{port}"
    try:
        for _ in range(600):
            try:
                if requests.get(url + "/health", timeout=1).status_code == 200:
                    break
            except requests.RequestException:
                pass
            time.sleep(0.2)
        prompt = "Write a short story about a lighthouse keeper."

        def body(kind):
            loras = [{"id": i, "scale": 1.0 if (kind == "lora" and i == 0) else 0.0}
                     for i in range(len(ggufs))]
            return {"prompt": prompt, "n_predict": args.max_new * 2, "temperature": 0,
                    "ignore_eos": True, "stream": True, "lora": loras, "cache_prompt": False}
        return single_stream(url + "/completion", args, body)
    finally:
        proc.terminate()
        proc.wait(timeout=30)


def architecture(gguf_path):
    from gguf import GGUFReader
    return bytes(GGUFReader(gguf_path).fields["general.architecture"].parts[-1]).decode()


def shape_of(gguf_path):
    """The adapter shape of a Llama-family or MoE GGUF, from its metadata."""
    from gguf import GGUFReader
    fields = GGUFReader(gguf_path).fields
    arch = architecture(gguf_path)

    def num(key):
        return int(fields[f"{arch}.{key}"].parts[-1][0])
    heads = num("attention.head_count")
    hidden = num("embedding_length")
    head_dim = num("attention.key_length") if f"{arch}.attention.key_length" in fields \
        else hidden // heads
    experts = num("expert_count") if f"{arch}.expert_count" in fields else 0
    width = num("expert_feed_forward_length") if f"{arch}.expert_feed_forward_length" in fields \
        else num("feed_forward_length")
    return Shape(hidden, width, num("block_count"), heads, num("attention.head_count_kv"),
                 head_dim, experts=experts)


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--model", default=str(SMOLLM2))
    p.add_argument("--rank", type=int, default=16)
    p.add_argument("--adapters", type=int, default=8)
    p.add_argument("--clients", type=int, default=32)
    p.add_argument("--max-new", type=int, default=64)
    p.add_argument("--rounds", type=int, default=3)
    p.add_argument("--dtype", choices=["float32", "float16"], default="float32",
                   help="element type of the PEFT files (float16 adapters stay 16-bit in memory)")
    p.add_argument("--llama-server", help="llama.cpp's llama-server binary (bench/build_peer.sh)")
    p.add_argument("--out-file")
    args = p.parse_args()

    shape = SMOLLM2_SHAPE if args.model == str(SMOLLM2) else shape_of(args.model)
    arch = architecture(args.model)  # "llama": the GGUF LoRA's Q/K rows in llama.cpp's order
    work = pathlib.Path(tempfile.mkdtemp(prefix="radix-lora-bench-"))
    names, paths, ggufs = [], [], []
    for i in range(args.adapters):
        adapter = Adapter(shape, seed=i, rank=args.rank, alpha=2 * args.rank, std=0.02)
        name = f"lora{i}"
        names.append(name)
        paths.append(f"{name}={adapter.write_peft(str(work / name), dtype=np.dtype(args.dtype))}")
        ggufs.append(adapter.write_gguf(str(work / f"{name}.gguf"), arch))
    result = {"model": args.model, "rank": args.rank, "adapters": args.adapters, "dtype": args.dtype,
              "clients": args.clients, "max_new": args.max_new}
    srv = Server(args.model, "--lora-paths", *paths, "--max-loras-per-batch",
                 str(args.adapters))
    try:
        print(f"throughput: {args.clients} clients over {args.adapters} adapters of rank "
              f"{args.rank} vs the base model", flush=True)
        result["throughput"] = throughput(srv, args, names)
        result["single_stream"] = radix_single(srv, args, names[0])
        print(f"single stream: base {result['single_stream']['base']:.1f} tok/s, adapter "
              f"{result['single_stream']['lora']:.1f} tok/s, ratio "
              f"{result['single_stream']['ratio']:.3f}", flush=True)
    finally:
        srv.stop()
    if args.llama_server:
        peer = llama_server_single(args, ggufs)
        result["llama_server_single_stream"] = peer
        result["radixserve_over_llama_server_with_adapter"] = (
            result["single_stream"]["lora"] / peer["lora"])
        print(f"llama-server single stream: base {peer['base']:.1f} tok/s, adapter "
              f"{peer['lora']:.1f} tok/s; radixserve / llama-server with the adapter "
              f"{result['radixserve_over_llama_server_with_adapter']:.2f}", flush=True)
    print(json.dumps(result, indent=1))
    if args.out_file:
        pathlib.Path(args.out_file).write_text(json.dumps(result, indent=1))


if __name__ == "__main__":
    main()

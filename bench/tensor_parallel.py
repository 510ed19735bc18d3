#!/usr/bin/env python3
"""What tensor and pipeline parallelism cost or gain on this machine: radixserve split over ranks
against one process.

    python bench/tensor_parallel.py [--model GGUF] [--layouts tp2,pp2,tp2xpp2] [--max-new N]
                                    [--batch B] [--rounds R] [--out-file F.json]

One server at a time, each started by one command (its ranks as processes on this machine, the
node's --threads split over them). Per server: single-stream decode tok/s (one greedy request,
streamed: (completion_tokens - 1) / (last event - first event), best of --rounds), and the
throughput of --batch concurrent requests (total completion tokens / wall time). Reports both and
their ratio to --tp-size 1, and checks every server gave the same tokens for the single stream
(exact for float checkpoints; quantized ones may differ: their activations are re-rounded after
each all-reduce's reordered float sums). On one machine the ranks share its cores and memory
bandwidth: the figure is the collectives' overhead, not a multi-machine speed-up (docs/scaling.md
models that).
"""
import argparse
import concurrent.futures
import json
import pathlib
import sys
import time

import requests

REPO = pathlib.Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "tests/e2e"))
from server_util import MODELS, Server  # noqa: E402

PROMPT = "Once upon a time, in a small village at the edge of a great forest, there lived"


def stream(url, max_new):
    body = {"text": PROMPT, "stream": True,
            "sampling_params": {"max_new_tokens": max_new, "temperature": 0, "ignore_eos": True}}
    first = last = None
    final = None
    with requests.post(url + "/generate", json=body, stream=True, timeout=600) as r:
        r.raise_for_status()
        for line in r.iter_lines():
            if not line.startswith(b"data:") or line == b"data: [DONE]":
                continue
            now = time.perf_counter()
            first = first or now
            last = now
            final = json.loads(line[5:])
    n = final["meta_info"]["completion_tokens"]
    return (n - 1) / (last - first), final["output_ids"]


def batch(url, size, max_new):
    body = {"text": PROMPT, "sampling_params": {"max_new_tokens": max_new, "temperature": 0,
                                                 "ignore_eos": True}}
    start = time.perf_counter()
    with concurrent.futures.ThreadPoolExecutor(size) as pool:
        out = list(pool.map(lambda i: requests.post(
            url + "/generate", json={**body, "text": f"{i}: {PROMPT}"}, timeout=600).json(),
            range(size)))
    tokens = sum(o["meta_info"]["completion_tokens"] for o in out)
    return tokens / (time.perf_counter() - start)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--model", default=str(MODELS / "shape-llama-1b-q4_k_m.gguf"))
    ap.add_argument("--layouts", default="tp2,pp2",
                    help="comma-separated: tpN, ppM or tpNxppM (tp 1 pp 1 always runs first)")
    ap.add_argument("--max-new", type=int, default=64)
    ap.add_argument("--batch", type=int, default=8)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--out-file")
    a = ap.parse_args()
    rows = []
    layouts = [(1, 1)]
    for spelled in a.layouts.split(","):
        sizes = {"tp": 1, "pp": 1}
        for part in spelled.split("x"):
            sizes[part[:2]] = int(part[2:])
        layouts.append((sizes["tp"], sizes["pp"]))
    for tp, pp in layouts:
        srv = Server(a.model, "--tp-size", tp, "--pp-size", pp, "--disable-radix-cache")
        try:
            stream(srv.url, 8)  # warm
            runs = [stream(srv.url, a.max_new) for _ in range(a.rounds)]
            single = max(r[0] for r in runs)
            ids = runs[0][1]
            throughput = batch(srv.url, a.batch, a.max_new)
        finally:
            srv.stop()
        rows.append({"tp": tp, "pp": pp, "single_tok_s": single, "batch_tok_s": throughput, "ids": ids})
    base = rows[0]
    print(f"model {pathlib.Path(a.model).name}, {a.max_new} new tokens, batch {a.batch}")
    print("| tp | pp | single-stream decode tok/s | vs one process | batch tok/s | vs one process "
          "| same tokens |")
    print("|---|---|---|---|---|---|---|")
    for r in rows:
        print(f"| {r['tp']} | {r['pp']} | {r['single_tok_s']:.1f} | {r['single_tok_s'] / base['single_tok_s']:.2f}x"
              f" | {r['batch_tok_s']:.1f} | {r['batch_tok_s'] / base['batch_tok_s']:.2f}x"
              f" | {r['ids'] == base['ids']} |")
    if a.out_file:
        pathlib.Path(a.out_file).write_text(json.dumps(rows, indent=1))


if __name__ == "__main__":
    main()

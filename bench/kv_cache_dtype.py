#!/usr/bin/env python3
"""KV cache element type: decode speed at depth and pool capacity, fp16 vs fp8 KV, same run.

Starts one radixserve per --kv-cache-dtype (all at once, same --mem-fraction-static, so they size
their pools from the same free memory within seconds of each other) and reads each server's
max_total_num_tokens and bytes/token. Then, for each depth, fills the radix cache with a prompt of
that many random token ids, and times, alternating between the servers round by round so that
background load hits them alike:
    T1 = one request generating 1 token, TN = one generating N + 1 tokens (ignore_eos),
both on the cached prompt, so decode tok/s = N / (TN - T1) (prefill and HTTP costs cancel).
Prints a markdown table (median over --rounds) and writes it as JSON to --out.

  ~/.cache/radixserve/venv/bin/python bench/kv_cache_dtype.py \\
      --model ~/.cache/radixserve/models/smollm2-135m-instruct-q4_1.gguf
"""
import argparse
import json
import os
import pathlib
import random
import re
import statistics
import sys
import time

import requests

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))
from compare import ManagedServer, free_port  # noqa: E402


def timed_generate(url, ids, n):
    start = time.perf_counter()
    reply = requests.post(url + "/generate", timeout=1800, json={
        "input_ids": ids,
        "sampling_params": {"max_new_tokens": n, "temperature": 0, "ignore_eos": True}})
    elapsed = time.perf_counter() - start
    reply.raise_for_status()
    assert reply.json()["meta_info"]["completion_tokens"] == n, reply.text
    return elapsed


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--model", required=True)
    parser.add_argument("--build-dir", default=None, help="default: $RADIX_BUILD_DIR")
    parser.add_argument("--dtypes", default="fp16,fp8_e4m3,int8")
    parser.add_argument("--depths", default="2048,8064")
    parser.add_argument("--decode-tokens", type=int, default=32)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--mem-fraction-static", default="0.1")
    parser.add_argument("--threads", default="2")
    parser.add_argument("--out", default="/tmp/kv_cache_dtype_bench.json")
    args = parser.parse_args()
    build = pathlib.Path(args.build_dir or os.environ["RADIX_BUILD_DIR"])
    dtypes = args.dtypes.split(",")
    depths = [int(d) for d in args.depths.split(",")]
    servers = {}
    try:
        for dtype in dtypes:
            port = free_port()
            log = pathlib.Path(f"/tmp/kv_cache_dtype_{dtype}_{port}.log")
            servers[dtype] = (ManagedServer(
                [build / "radixserve", "--model-path", args.model, "--port", port,
                 "--kv-cache-dtype", dtype, "--mem-fraction-static", args.mem_fraction_static,
                 "--skip-server-warmup", "--log-level", "info"], port, log), log)
        results = {"model": args.model, "decode_tokens": args.decode_tokens, "dtypes": {}}
        for dtype, (server, log) in servers.items():
            info = requests.get(server.url + "/server_info", timeout=10).json()
            bytes_per_token = int(re.search(r"bytes/token=(\d+)", log.read_text()).group(1))
            results["dtypes"][dtype] = {"max_total_num_tokens": info["max_total_num_tokens"],
                                        "bytes_per_token": bytes_per_token, "decode": {}}
        rng = random.Random(0)
        for depth in depths:
            ids = [rng.randrange(100, 40000) for _ in range(depth)]
            for dtype, (server, _) in servers.items():
                timed_generate(server.url, ids, 1)  # prefill into the radix cache
            samples = {dtype: [] for dtype in dtypes}
            for _ in range(args.rounds):
                for dtype, (server, _) in servers.items():
                    t1 = timed_generate(server.url, ids, 1)
                    tn = timed_generate(server.url, ids, args.decode_tokens + 1)
                    samples[dtype].append(args.decode_tokens / (tn - t1))
            for dtype in dtypes:
                results["dtypes"][dtype]["decode"][depth] = statistics.median(samples[dtype])
                print(f"depth {depth} {dtype}: {samples[dtype]}", flush=True)
    finally:
        for server, _ in servers.values():
            server.stop()
    base = dtypes[0]
    print(f"\n| KV dtype | bytes/token | max_total_num_tokens | "
          + " | ".join(f"decode tok/s @ {d}" for d in depths) + " |")
    print("|---|---|---|" + "---|" * len(depths))
    for dtype in dtypes:
        r = results["dtypes"][dtype]
        cells = []
        for d in depths:
            ratio = r["decode"][d] / results["dtypes"][base]["decode"][d]
            cells.append(f"{r['decode'][d]:.1f} ({ratio:.2f}x)")
        print(f"| {dtype} | {r['bytes_per_token']} | {r['max_total_num_tokens']} | "
              + " | ".join(cells) + " |")
    pathlib.Path(args.out).write_text(json.dumps(results, indent=1))


if __name__ == "__main__":
    main()

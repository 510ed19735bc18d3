#!/usr/bin/env python3
"""Single-stream decode of radixserve and llama.cpp in adjacent pairs, for a machine whose memory
bandwidth moves between levels from one minute to the next (the Zen 4 VMs of docs/performance.md:
~37 and ~65 GB/s): a comparison of two runs minutes apart mixes the levels, one of adjacent runs
seconds apart mostly does not.

    python bench/decode_pairs.py --peer-bin DIR --radixserve BINARY --model GGUF
                                 [--pairs 12] [--tokens 32] [--threads 2]

One radixserve server stays up (--threads, greedy, no warmup); each pair is one
`llama-bench -p 0 -n TOKENS -r 1 -t THREADS` run (its tg tok/s) and one streamed /generate of
TOKENS + 1 new tokens after a fresh 16-token random prompt (TOKENS / (time of the last event -
time of the first), so prefill is not counted, as llama-bench's tg does not count it). The order
within a pair alternates (ABBA), so a level change that falls inside a pair is as likely to favour
either side. Prints every pair with its ratio, then the median ratio and the pairs' range, and
the GB/s each side read (the GGUF's size x tok/s: decode reads every weight once per token).
"""
import argparse
import json
import os
import pathlib
import random
import statistics
import subprocess
import sys
import time

import requests

REPO = pathlib.Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "tests/e2e"))
from server_util import Server  # noqa: E402


def peer_decode(peer_bin, model, tokens, threads):
    """llama-bench's tg tok/s for one run of `tokens` new tokens."""
    out = subprocess.run([str(pathlib.Path(peer_bin) / "llama-bench"), "-m", str(model), "-t",
                          str(threads), "-p", "0", "-n", str(tokens), "-r", "1", "-o", "json"],
                         check=True, capture_output=True, text=True, timeout=600).stdout
    rows = [row for row in json.loads(out) if row.get("n_gen") == tokens]
    if not rows:
        raise RuntimeError("no tg row in llama-bench's output:\n" + out)
    return float(rows[0]["avg_ts"])


def our_decode(server, tokens, rng):
    """tok/s of `tokens` streamed tokens after the first, from a fresh random 16-token prompt."""
    body = {"input_ids": [rng.randrange(100, 30000) for _ in range(16)], "stream": True,
            "sampling_params": {"max_new_tokens": tokens + 1, "ignore_eos": True,
                                "temperature": 0}}
    stamps = []
    with requests.post(server.url + "/generate", json=body, stream=True, timeout=600) as r:
        r.raise_for_status()
        for line in r.iter_lines():
            if line.startswith(b"data:") and line.strip() != b"data: [DONE]":
                stamps.append(time.perf_counter())
    if len(stamps) < tokens + 1:
        raise RuntimeError(f"{len(stamps)} events for {tokens + 1} tokens")
    return tokens / (stamps[-1] - stamps[0])


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--peer-bin", required=True, help="llama.cpp's bin folder")
    parser.add_argument("--radixserve", required=True, help="the radixserve binary")
    parser.add_argument("--model", required=True, help="the GGUF both engines load")
    parser.add_argument("--pairs", type=int, default=12)
    parser.add_argument("--tokens", type=int, default=32)
    parser.add_argument("--threads", type=int, default=2)
    args = parser.parse_args()
    gigabytes = os.path.getsize(args.model) / 1e9
    rng = random.Random(0)
    server = Server(args.model, "--threads", args.threads, "--skip-server-warmup",
                    binary=args.radixserve)
    try:
        our_decode(server, 4, rng)  # the first request's one-time costs
        ratios, peers, ours = [], [], []
        for i in range(args.pairs):
            if i % 2 == 0:
                peer = peer_decode(args.peer_bin, args.model, args.tokens, args.threads)
                mine = our_decode(server, args.tokens, rng)
            else:
                mine = our_decode(server, args.tokens, rng)
                peer = peer_decode(args.peer_bin, args.model, args.tokens, args.threads)
            peers.append(peer)
            ours.append(mine)
            ratios.append(mine / peer)
            print(f"pair {i:2d}: llama.cpp {peer:7.2f} tok/s ({peer * gigabytes:5.1f} GB/s)  "
                  f"radixserve {mine:7.2f} tok/s ({mine * gigabytes:5.1f} GB/s)  "
                  f"{mine / peer:5.2f}x", flush=True)
    finally:
        server.stop()
    print(f"{len(ratios)} pairs: median ratio {statistics.median(ratios):.2f}x "
          f"(range {min(ratios):.2f}-{max(ratios):.2f}x); llama.cpp {min(peers):.2f}-"
          f"{max(peers):.2f} tok/s, radixserve {min(ours):.2f}-{max(ours):.2f} tok/s")


if __name__ == "__main__":
    main()

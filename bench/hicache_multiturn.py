#!/usr/bin/env python3
"""Multi-turn chats with a RAM KV pool too small for all histories: the disk tier
(--enable-hierarchical-cache --hicache-storage-backend file) against the same server without it.

    python bench/hicache_multiturn.py [--model GGUF] [--conversations C] [--turns T]
                                      [--user-tokens U] [--max-new N] [--pool TOKENS]
                                      [--concurrency K] [--policy wait_complete] [--out-file F]

Like SGLang's bench_multiturn: C conversations, each turn resending the whole history (earlier
user messages and the model's answers) plus a new user message of about U tokens; the turns of
all conversations go round-robin (turn t of every conversation, K at a time, before turn t + 1),
so by the time a conversation comes back its history has been pushed out of a pool of --pool
tokens by the others. Greedy, streamed /generate; TTFT = time to the first streamed event.
Reports mean / p50 TTFT over all requests and over turns >= 2 (where reuse is possible), the
wall time, the prompt tokens served from cache (RAM or disk) and from disk, and the ratio
tier-off / tier-on. Both runs must produce the same text (checked). One server at a time; the
machine may be shared, so compare the ratio within one run.
"""
import argparse
import concurrent.futures
import json
import pathlib
import statistics
import sys
import tempfile
import time

import requests

REPO = pathlib.Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "tests/e2e"))
from server_util import SMOLLM2, Server  # noqa: E402

WORDS = ("river mountain ledger copper harbor lantern orchard signal meadow falcon quartz "
         "timber canyon beacon glacier saffron compass thistle").split()


def user_message(conv, turn, tokens):
    """About `tokens` tokens of text unique to (conversation, turn)."""
    words = [WORDS[(conv * 7 + turn * 3 + i) % len(WORDS)] for i in range(int(tokens * 0.75))]
    return f"\nUser {conv} turn {turn}: " + " ".join(words) + f" (note {conv}-{turn}).\nAssistant:"


def ask(server, text, max_new):
    body = {"text": text, "stream": True,
            "sampling_params": {"max_new_tokens": max_new, "temperature": 0}}
    start = time.perf_counter()
    first = None
    final = None
    with requests.post(server.url + "/generate", json=body, stream=True, timeout=1800) as r:
        r.raise_for_status()
        for line in r.iter_lines():
            if not line.startswith(b"data: ") or line == b"data: [DONE]":
                continue
            first = first or time.perf_counter()
            final = json.loads(line[6:])
    return first - start, final


def run(server, args):
    histories = [f"Conversation {c} between a user and an assistant." for c in
                 range(args.conversations)]
    records = []
    texts = []
    start = time.perf_counter()
    with concurrent.futures.ThreadPoolExecutor(args.concurrency) as pool:
        for turn in range(args.turns):
            prompts = [h + user_message(c, turn, args.user_tokens) for c, h in enumerate(histories)]
            results = list(pool.map(lambda p: ask(server, p, args.max_new), prompts))
            for c, (ttft, final) in enumerate(results):
                meta = final["meta_info"]
                details = meta.get("cached_tokens_details") or {}
                records.append({"turn": turn, "ttft": ttft, "prompt": meta["prompt_tokens"],
                                "cached": meta["cached_tokens"],
                                "storage": details.get("storage", 0)})
                texts.append(final["text"])
                histories[c] = prompts[c] + final["text"]
    wall = time.perf_counter() - start
    later = [r for r in records if r["turn"] > 0]
    return {
        "mean_ttft_s": statistics.mean(r["ttft"] for r in records),
        "p50_ttft_s": statistics.median(r["ttft"] for r in records),
        "mean_ttft_later_turns_s": statistics.mean(r["ttft"] for r in later),
        "wall_s": wall,
        "requests_per_s": len(records) / wall,
        "prompt_tokens": sum(r["prompt"] for r in records),
        "cached_tokens": sum(r["cached"] for r in records),
        "storage_tokens": sum(r["storage"] for r in records),
    }, texts


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--model", default=str(SMOLLM2))
    parser.add_argument("--conversations", type=int, default=8)
    parser.add_argument("--turns", type=int, default=4)
    parser.add_argument("--user-tokens", type=int, default=256)
    parser.add_argument("--max-new", type=int, default=16)
    parser.add_argument("--pool", type=int, default=3072, help="--max-total-tokens")
    parser.add_argument("--concurrency", type=int, default=2)
    parser.add_argument("--policy", default="wait_complete",
                        help="--hicache-storage-prefetch-policy")
    parser.add_argument("--write-policy", default="write_through",
                        help="--hicache-write-policy")
    parser.add_argument("--out-file")
    args = parser.parse_args()

    common = ["--skip-server-warmup", "--max-total-tokens", str(args.pool)]
    results = {}
    outputs = {}
    with tempfile.TemporaryDirectory(prefix="hicache-bench-") as directory:
        for name, extra, env in [
            ("ram_only", [], None),
            ("disk_tier", ["--enable-hierarchical-cache", "--hicache-storage-backend", "file",
                           "--hicache-storage-prefetch-policy", args.policy,
                           "--hicache-write-policy", args.write_policy, "--hicache-ratio", "16"],
             {"SGLANG_HICACHE_FILE_BACKEND_STORAGE_DIR": directory}),
        ]:
            server = Server(args.model, *common, *extra, env=env)
            try:
                results[name], outputs[name] = run(server, args)
            finally:
                server.stop()
            print(name, json.dumps(results[name]), flush=True)
    mismatches = sum(a != b for a, b in zip(outputs["ram_only"], outputs["disk_tier"]))
    off, on = results["ram_only"], results["disk_tier"]
    report = {
        "config": vars(args),
        "results": results,
        "ttft_ratio_off_over_on": off["mean_ttft_s"] / on["mean_ttft_s"],
        "ttft_ratio_later_turns": off["mean_ttft_later_turns_s"] / on["mean_ttft_later_turns_s"],
        "throughput_ratio_on_over_off": on["requests_per_s"] / off["requests_per_s"],
        "output_mismatches": mismatches,
    }
    print(json.dumps({k: v for k, v in report.items() if k != "results"}, indent=1))
    if args.out_file:
        pathlib.Path(args.out_file).write_text(json.dumps(report, indent=1))
    if mismatches:
        sys.exit(f"{mismatches} outputs differ between the runs")


if __name__ == "__main__":
    main()

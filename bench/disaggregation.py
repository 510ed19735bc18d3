#!/usr/bin/env python3
"""What prefill/decode disaggregation costs or gains on this machine: a prefill server and a
decode server behind SGLang's router in PD mode against one ordinary server, in one run.

    python bench/disaggregation.py [--model GGUF] [--prompt-tokens N] [--max-new N] [--batch B]
                                   [--rounds R] [--out-file F.json]

On one machine the two servers share its cores: each PD server gets half the --threads the one
server gets (both layouts use every core once). Per layout: for one request of about
--prompt-tokens prompt tokens, time to first token and decode tok/s (streamed; best of
--rounds); for --batch concurrent requests with distinct prompts of that length, the wall time,
output tok/s and mean time to first token. For PD also the K/V bytes moved per request
(/server_info's kv_transfer) and whether the tokens equal the one server's.
"""
import argparse
import concurrent.futures
import json
import os
import pathlib
import statistics
import subprocess
import sys
import time

import requests

REPO = pathlib.Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "tests/e2e"))
from server_util import SMOLLM2, Server, free_port  # noqa: E402

SENTENCE = ("The river wound through the valley, past the old mill and the stone bridge, where "
            "children played in the summer and the fishermen mended their nets. ")


def prompt(i, tokens):
    # About 30 tokens per sentence for Llama-family vocabularies.
    return f"Story {i}. " + SENTENCE * max(1, tokens // 30)


def stream(url, text, max_new):
    body = {"text": text, "stream": True,
            "sampling_params": {"max_new_tokens": max_new, "temperature": 0, "ignore_eos": True}}
    start = time.perf_counter()
    first = last = None
    final = None
    with requests.post(url + "/generate", json=body, stream=True, timeout=1200) as r:
        r.raise_for_status()
        for line in r.iter_lines():
            if not line.startswith(b"data:") or line == b"data: [DONE]":
                continue
            now = time.perf_counter()
            first = first or now
            last = now
            final = json.loads(line[5:])
    n = final["meta_info"]["completion_tokens"]
    return {"ttft": first - start, "decode_tok_s": (n - 1) / (last - first),
            "ids": final["output_ids"], "prompt_tokens": final["meta_info"]["prompt_tokens"]}


def run(url, a, tag):
    stream(url, prompt(f"warm-{tag}", 64), 4)
    singles = [stream(url, prompt(f"{tag}-{r}", a.prompt_tokens), a.max_new)
               for r in range(a.rounds)]
    start = time.perf_counter()
    with concurrent.futures.ThreadPoolExecutor(a.batch) as pool:
        batch = list(pool.map(lambda i: stream(url, prompt(f"{tag}-b{i}", a.prompt_tokens),
                                               a.max_new), range(a.batch)))
    wall = time.perf_counter() - start
    return {"ttft": min(s["ttft"] for s in singles),
            "decode_tok_s": max(s["decode_tok_s"] for s in singles),
            "prompt_tokens": singles[0]["prompt_tokens"],
            "batch_wall_s": wall, "batch_tok_s": a.batch * a.max_new / wall,
            "batch_ttft": statistics.mean(b["ttft"] for b in batch),
            "ids": [s["ids"] for s in singles]}


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--model", default=str(SMOLLM2))
    ap.add_argument("--prompt-tokens", type=int, default=1024)
    ap.add_argument("--max-new", type=int, default=64)
    ap.add_argument("--batch", type=int, default=8)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--threads", type=int, default=os.cpu_count())
    ap.add_argument("--pd-threads", type=int,
                    help="--threads of each PD server (default: half of --threads, so both "
                         "layouts use every core once; --threads gives each PD server every core "
                         "to isolate the transfer's and the router's cost for one request)")
    ap.add_argument("--out-file")
    a = ap.parse_args()
    half = a.pd_threads or max(1, a.threads // 2)
    common = ["--skip-server-warmup", "--disable-radix-cache"]

    one = Server(a.model, *common, "--threads", a.threads)
    try:
        base = run(one.url, a, "x")
    finally:
        one.stop()

    bootstrap = free_port()
    pd_common = ["--skip-server-warmup", "--threads", half]
    prefill = Server(a.model, *pd_common, "--disaggregation-mode", "prefill",
                     "--disaggregation-bootstrap-port", bootstrap, "--disable-radix-cache")
    decode = Server(a.model, *pd_common, "--disaggregation-mode", "decode")
    port = free_port()
    router = subprocess.Popen(
        [sys.executable, "-m", "sglang_router.launch_router", "--host", "127.0.0.1", "--port",
         str(port), "--pd-disaggregation", "--prefill", prefill.url, str(bootstrap), "--decode",
         decode.url, "--log-level", "warn", "--prometheus-host", "127.0.0.1",
         "--prometheus-port", str(free_port())],
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    url = f"http://127.0.0.1:{port}"
    try:
        deadline = time.time() + 60
        while True:
            try:
                if len(requests.get(url + "/workers", timeout=2).json()["workers"]) == 2:
                    break
            except (requests.RequestException, ValueError, KeyError):
                pass
            assert time.time() < deadline, "router did not come up"
            time.sleep(0.2)
        before = requests.get(prefill.url + "/server_info").json()["internal_states"][0]
        pd = run(url, a, "x")
        after = requests.get(prefill.url + "/server_info").json()["internal_states"][0]
    finally:
        router.terminate()
        router.wait()
        prefill.stop()
        decode.stop()
    sent = after["kv_transfer"]["sent"] - before["kv_transfer"]["sent"]
    moved = after["kv_transfer"]["bytes_sent"] - before["kv_transfer"]["bytes_sent"]
    pd["bytes_per_request"] = moved / max(sent, 1)

    print(f"model {pathlib.Path(a.model).name}, ~{base['prompt_tokens']} prompt tokens, "
          f"{a.max_new} new tokens, batch {a.batch}, {a.threads} threads (PD: {half} + {half})")
    print("| layout | TTFT s | decode tok/s | batch wall s | batch tok/s | batch mean TTFT s |")
    print("|---|---|---|---|---|---|")
    for name, r in (("one server", base), ("prefill + decode (router)", pd)):
        print(f"| {name} | {r['ttft']:.3f} | {r['decode_tok_s']:.1f} | {r['batch_wall_s']:.2f} | "
              f"{r['batch_tok_s']:.1f} | {r['batch_ttft']:.3f} |")
    print(f"PD / one: TTFT {pd['ttft'] / base['ttft']:.2f}x, decode {pd['decode_tok_s'] / base['decode_tok_s']:.2f}x, "
          f"batch tok/s {pd['batch_tok_s'] / base['batch_tok_s']:.2f}x; "
          f"{pd['bytes_per_request'] / 2**20:.2f} MiB of K/V per request; "
          f"same tokens: {pd['ids'] == base['ids']}")
    if a.out_file:
        pathlib.Path(a.out_file).write_text(json.dumps({"one": base, "pd": pd}, indent=1))


if __name__ == "__main__":
    main()

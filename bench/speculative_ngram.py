#!/usr/bin/env python3
"""Single-stream decode speed with and without --speculative-algorithm NGRAM.

    python bench/speculative_ngram.py [--model GGUF] [--max-new N] [--rounds R] [--out-file F.json]
                                      [--temperature T]

Prompts: bench/data/spec_prompts.jsonl, "grounded" (copy / rewrite / code-edit requests whose
answer repeats text of the prompt) and "chat" (free answers). Each prompt is rendered with
SmolLM2-Instruct's chat template (ChatML, written out below) and sent alone to /generate, greedy
(or sampled at --temperature with a fixed sampling_seed per prompt), streaming. Decode tok/s of one request =
(completion_tokens - 1) / (time of the last event - time of the first), i.e. without prefill.
Per workload the figure is total decoded tokens / total decode time over the prompts, best of
--rounds rounds. Mean accept length = completion tokens / meta_info.spec_verify_ct (tokens per
verify forward; the prefill's token counted in). Both runs must produce the same tokens (checked).
One server at a time; the machine may be shared, so compare the ratio within one run.
"""
import argparse
import json
import pathlib
import sys
import time

import requests

REPO = pathlib.Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "tests/e2e"))
from server_util import SMOLLM2, Server  # noqa: E402


# SmolLM2-Instruct's chat template (ChatML with its default system prompt), written out.
SYSTEM = "You are a helpful AI assistant named SmolLM, trained by Hugging Face"


def render(prompt):
    return (f"<|im_start|>system\n{SYSTEM}<|im_end|>\n<|im_start|>user\n{prompt}<|im_end|>\n"
            "<|im_start|>assistant\n")


def one(srv, text, max_new, temperature, seed):
    sampling = {"max_new_tokens": max_new, "temperature": temperature}
    if temperature > 0:
        sampling["sampling_seed"] = seed
    body = {"text": text, "stream": True, "sampling_params": sampling}
    first = last = None
    final = None
    with requests.post(srv.url + "/generate", json=body, stream=True, timeout=600) as r:
        r.raise_for_status()
        for line in r.iter_lines():
            if not line.startswith(b"data: ") or line == b"data: [DONE]":
                continue
            now = time.perf_counter()
            first = first or now
            last = now
            final = json.loads(line[6:])
    return final, last - first


def run(srv, items, max_new, rounds, temperature):
    result = {}
    outputs = {}
    for workload in sorted({i["workload"] for i in items}):
        best = None
        for _ in range(rounds):
            tokens = seconds = completion = verify = 0
            for i, item in enumerate(items):
                if item["workload"] != workload:
                    continue
                final, elapsed = one(srv, item["text"], max_new, temperature, 1000 + i)
                meta = final["meta_info"]
                outputs[i] = final["output_ids"]
                tokens += meta["completion_tokens"] - 1
                seconds += elapsed
                completion += meta["completion_tokens"]
                verify += meta.get("spec_verify_ct", 0)
            rate = tokens / seconds if seconds > 0 else 0.0
            if best is None or rate > best["decode_tok_s"]:
                best = {"decode_tok_s": round(rate, 1), "decoded_tokens": tokens,
                        "accept_length": round(completion / verify, 2) if verify else None}
        result[workload] = best
    return result, outputs


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--model", default=str(SMOLLM2))
    ap.add_argument("--max-new", type=int, default=128)
    ap.add_argument("--rounds", type=int, default=2)
    ap.add_argument("--draft-tokens", type=int, default=8)
    ap.add_argument("--temperature", type=float, default=0.0)
    ap.add_argument("--out-file")
    args = ap.parse_args()

    lines = (REPO / "bench/data/spec_prompts.jsonl").read_text().splitlines()
    items = [json.loads(line) for line in lines]
    for item in items:
        item["text"] = render(item["prompt"])

    report = {"model": pathlib.Path(args.model).name, "max_new_tokens": args.max_new,
              "temperature": args.temperature}
    outputs = {}
    for name, extra in [("baseline", []),
                        ("ngram", ["--speculative-algorithm", "NGRAM",
                                   "--speculative-num-draft-tokens", str(args.draft_tokens)])]:
        srv = Server(args.model, "--skip-server-warmup", "--enable-deterministic-inference",
                     *extra)
        try:
            report[name], outputs[name] = run(srv, items, args.max_new, args.rounds,
                                              args.temperature)
        finally:
            srv.stop()
        print(name, json.dumps(report[name]), flush=True)
    same = outputs["baseline"] == outputs["ngram"]
    report["identical_outputs"] = same
    report["speedup"] = {w: round(report["ngram"][w]["decode_tok_s"] /
                                  report["baseline"][w]["decode_tok_s"], 2)
                         for w in report["baseline"]}
    print(json.dumps(report, indent=1))
    if args.out_file:
        pathlib.Path(args.out_file).write_text(json.dumps(report, indent=1) + "\n")
    return 0 if same else 1


if __name__ == "__main__":
    sys.exit(main())

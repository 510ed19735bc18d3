#!/usr/bin/env python3
"""Single-stream decode speed with and without speculative decoding, radixserve and llama.cpp.

    python bench/speculative.py [--model GGUF] [--algorithms NGRAM,STANDALONE] [--draft GGUF]
                                [--num-steps K] [--peer-bin DIR] [--max-new N] [--rounds R]
                                [--out-file F.json] [--temperature T]

Runs, one server at a time: radixserve without speculation, with each of --algorithms (NGRAM with
--draft-tokens, STANDALONE with --draft drafting --num-steps tokens), and with --peer-bin (a
llama.cpp build, bench/build_peer.sh) llama-server without speculation, with the same draft model
(--spec-type draft-simple, --spec-draft-n-max K) and with its n-gram lookup (ngram-simple).

Prompts: bench/data/spec_prompts.jsonl, "grounded" (copy / rewrite / code-edit requests whose
answer repeats text of the prompt) and "chat" (free answers). Each prompt is rendered with
SmolLM2-Instruct's chat template (ChatML, written out below) and sent alone to /generate, greedy
(or sampled at --temperature with a fixed sampling_seed per prompt), streaming. Decode tok/s of one request =
(completion_tokens - 1) / (time of the last event - time of the first), i.e. without prefill.
Per workload the figure is total decoded tokens / total decode time over the prompts, best of
--rounds rounds. Mean accept length = completion tokens / meta_info.spec_verify_ct (tokens per
verify forward; the prefill's token counted in). Both runs must produce the same tokens (checked).
llama-server is driven the same way through its /completion route (n_predict, stream); its
tokens per verify step are not reported. One server at a time; the machine may be shared, so
compare the ratios within one run.
"""
import argparse
import json
import pathlib
import subprocess
import sys
import time

import requests

REPO = pathlib.Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "tests/e2e"))
from server_util import MODELS, SMOLLM2, Server, free_port  # noqa: E402


# SmolLM2-Instruct's chat template (ChatML with its default system prompt), written out.
SYSTEM = "You are a helpful AI assistant named SmolLM, trained by Hugging Face"


def render(prompt):
    return (f"<|im_start|>system\n{SYSTEM}<|im_end|>\n<|im_start|>user\n{prompt}<|im_end|>\n"
            "<|im_start|>assistant\n")


def one(srv, text, max_new, temperature, seed):
    """(final event in /generate's shape, seconds from the first streamed event to the last)."""
    peer = isinstance(srv, LlamaServer)
    if peer:
        body = {"prompt": text, "n_predict": max_new, "temperature": temperature, "seed": seed,
                "stream": True, "cache_prompt": False, "return_tokens": True}
        route = "/completion"
    else:
        sampling = {"max_new_tokens": max_new, "temperature": temperature}
        if temperature > 0:
            sampling["sampling_seed"] = seed
        body = {"text": text, "stream": True, "sampling_params": sampling}
        route = "/generate"
    first = last = None
    final = None
    ids = []
    with requests.post(srv.url + route, json=body, stream=True, timeout=600) as r:
        r.raise_for_status()
        for line in r.iter_lines():
            if not line.startswith(b"data: ") or line == b"data: [DONE]":
                continue
            now = time.perf_counter()
            first = first or now
            last = now
            final = json.loads(line[6:])
            ids.extend(final.get("tokens", []) if peer else [])
    if peer:
        final = {"output_ids": ids, "meta_info": {"completion_tokens":
                                                  final["timings"]["predicted_n"]}}
    return final, last - first


class LlamaServer:
    """llama-server on a free port, 2 threads, one slot."""

    def __init__(self, peer_bin, model, *args):
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        cmd = [str(pathlib.Path(peer_bin) / "llama-server"), "-m", str(model), "-t", "2",
               "-tb", "2", "-np", "1", "-c", "4096", "--host", "127.0.0.1", "--port",
               str(self.port), *map(str, args)]
        self.log = open(f"/tmp/llama-server-{self.port}.log", "w")
        self.proc = subprocess.Popen(cmd, stdout=self.log, stderr=subprocess.STDOUT)
        deadline = time.time() + 300
        while time.time() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(f"llama-server exited: see {self.log.name}")
            try:
                if requests.get(self.url + "/health", timeout=2).status_code == 200:
                    return
            except requests.RequestException:
                pass
            time.sleep(0.5)
        raise RuntimeError("llama-server did not start")

    def stop(self):
        self.proc.terminate()
        self.proc.wait(timeout=60)
        self.log.close()


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
    ap.add_argument("--model", default=str(MODELS / "smollm2-135m-instruct-f32.gguf"))
    ap.add_argument("--algorithms", default="NGRAM,STANDALONE")
    ap.add_argument("--draft", default=str(SMOLLM2))
    ap.add_argument("--num-steps", type=int, default=3)
    ap.add_argument("--peer-bin")
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

    report = {"model": pathlib.Path(args.model).name, "draft": pathlib.Path(args.draft).name,
              "max_new_tokens": args.max_new, "temperature": args.temperature}
    runs = [("baseline", [])]
    for algorithm in filter(None, args.algorithms.split(",")):
        extra = ["--speculative-algorithm", algorithm]
        if algorithm == "NGRAM":
            extra += ["--speculative-num-draft-tokens", str(args.draft_tokens)]
        else:
            extra += ["--speculative-draft-model-path", args.draft,
                      "--speculative-num-steps", str(args.num_steps)]
        runs.append((algorithm.lower(), extra))
    if args.peer_bin:
        runs += [("llama.cpp", None),
                 ("llama.cpp draft", ["-md", args.draft, "--spec-type", "draft-simple",
                                      "--spec-draft-n-max", args.num_steps]),
                 ("llama.cpp ngram", ["--spec-type", "ngram-simple"])]
    outputs = {}
    for name, extra in runs:
        if name.startswith("llama.cpp"):
            srv = LlamaServer(args.peer_bin, args.model, *(extra or []))
        else:
            srv = Server(args.model, "--skip-server-warmup", "--enable-deterministic-inference",
                         *extra)
        try:
            report[name], outputs[name] = run(srv, items, args.max_new, args.rounds,
                                              args.temperature)
        finally:
            srv.stop()
        print(name, json.dumps(report[name]), flush=True)
    ours = [name for name, _ in runs if not name.startswith("llama.cpp")]
    same = all(outputs[name] == outputs["baseline"] for name in ours)
    report["identical_outputs"] = same
    report["speedup"] = {name: {w: round(report[name][w]["decode_tok_s"] /
                                         report["baseline"][w]["decode_tok_s"], 2)
                                for w in report["baseline"]}
                         for name in ours[1:]}
    if args.peer_bin:
        for name, _ in runs:
            if name.startswith("llama.cpp") and name != "llama.cpp":
                report["speedup"][name] = {
                    w: round(report[name][w]["decode_tok_s"] /
                             report["llama.cpp"][w]["decode_tok_s"], 2)
                    for w in report["llama.cpp"]}
        report["vs_llama_cpp"] = {
            f"{ours_name} / {peer_name}": {
                w: round(report[ours_name][w]["decode_tok_s"] / report[peer_name][w]["decode_tok_s"],
                         2) for w in report["baseline"]}
            for ours_name, peer_name in [("baseline", "llama.cpp"),
                                         ("standalone", "llama.cpp draft"),
                                         ("ngram", "llama.cpp ngram")]
            if ours_name in report}
    print(json.dumps(report, indent=1))
    if args.out_file:
        pathlib.Path(args.out_file).write_text(json.dumps(report, indent=1) + "\n")
    return 0 if same else 1


if __name__ == "__main__":
    sys.exit(main())

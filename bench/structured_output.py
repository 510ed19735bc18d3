#!/usr/bin/env python3
"""Cost of constrained decoding (JSON schemas) on radixserve: throughput, mask time, jump-forward.

    python bench/structured_output.py [--radixserve BIN] [--mask-bench BIN] [--out-file F.json]

1. Throughput: 32 concurrent /generate requests constrained by a JSON schema (a list of person
   records with minItems high enough that no document ends inside the budget) against the same
   32 prompts unconstrained (ignore_eos); greedy, same max_new_tokens, so both generate exactly
   the same number of tokens (checked). Output tok/s = tokens / wall time of the batch; --rounds
   rounds of one batch of each kind, the ratio is the median of the rounds' ratios. Measured twice: default server (jump-forward on) and
   --disable-grammar-jump-forward (every token sampled, so the difference is the mask and accept
   cost on the engine thread: (1/constrained - 1/free) tok/s gives microseconds per token).
2. Jump-forward: a schema whose property names are long (forced text) -- tokens generated,
   tokens appended by jump-forward (/server_info internal_states jump_forward_tokens), forward
   steps (= sampled tokens) and wall time (best of --rounds), with and without
   --disable-grammar-jump-forward.
3. Mask cost per token: the corpus of tests/data/json_schemas goes through the server (SmolLM2,
   greedy; and a dummy-weight Qwen3 with the real Qwen3 tokenizer, sampled) and every compiled
   schema's output ids are replayed by bench/cpp/grammar_mask_bench --replay (one core, the
   server's JSON whitespace): p50/p99 of FillNextTokenBitmask per token, at 49k and 152k tokens.
Only one server runs at a time. The machine is shared: compare ratios within one run.
"""

import argparse
import concurrent.futures
import json
import pathlib
import subprocess
import sys
import tempfile
import time

import requests

REPO = pathlib.Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "tests/e2e"))
from server_util import BUILD, SMOLLM2, Server  # noqa: E402
from test_schema_corpus import (QWEN3_CONFIG, QWEN3_TOKENIZER, closing_token_bias,  # noqa: E402
                                corpus)

CITIES = ["Paris", "Lagos", "Lima", "Osaka", "Perth", "Quito", "Accra", "Turin", "Dakar", "Hanoi",
          "Cork", "Bern", "Oslo", "Kyiv", "Riga", "Baku", "Doha", "Pune", "Suva", "Apia", "Cusco",
          "Split", "Fez", "Nice", "Gent", "Lyon", "Graz", "Malmo", "Porto", "Leeds", "Delft",
          "Vigo"]
PEOPLE = {
    "type": "array", "minItems": 64,
    "items": {"type": "object",
              "properties": {"name": {"type": "string", "minLength": 1, "maxLength": 24},
                             "city": {"type": "string", "minLength": 1, "maxLength": 24},
                             "age": {"type": "integer", "minimum": 0, "maximum": 120}},
              "required": ["name", "city", "age"], "additionalProperties": False},
}
LONG_KEYS = {
    "type": "object",
    "properties": {
        "customer_full_legal_name_as_registered": {"type": "string", "maxLength": 24},
        "customer_primary_residential_address": {"type": "string", "maxLength": 32},
        "customer_preferred_contact_channel": {"enum": ["email", "phone", "post"]},
        "customer_account_opening_year": {"type": "integer", "minimum": 1950, "maximum": 2030},
        "customer_has_accepted_marketing_terms": {"type": "boolean"},
    },
    "required": ["customer_full_legal_name_as_registered", "customer_primary_residential_address",
                 "customer_preferred_contact_channel", "customer_account_opening_year",
                 "customer_has_accepted_marketing_terms"],
    "additionalProperties": False,
}


def post_all(server, bodies):
    """Sends all bodies at once; returns (wall seconds, responses)."""
    def one(body):
        r = requests.post(server.url + "/generate", json=body, timeout=1200)
        assert r.status_code == 200, r.text
        return r.json()

    with concurrent.futures.ThreadPoolExecutor(len(bodies)) as pool:
        start = time.perf_counter()
        out = list(pool.map(one, bodies))
        return time.perf_counter() - start, out


def jump_forward_tokens(server):
    return server.server_info()["internal_states"][0]["jump_forward_tokens"]


def throughput(server, args):
    """Rounds of (free batch, constrained batch); the ratio is the median over rounds of the
    ratio within a round, which the VM's drift over minutes affects least."""
    prompts = [f"A JSON list of people who live in {city}:\n" for city in CITIES[:args.clients]]
    base = {"max_new_tokens": args.max_new_tokens, "temperature": 0, "ignore_eos": True}
    kinds = {"free": base, "constrained": {**base, "json_schema": json.dumps(PEOPLE)}}
    post_all(server, [{"text": p, "sampling_params": s} for p in prompts[:2]
                      for s in kinds.values()])  # warm-up: compile, first allocations
    rounds = []
    for _ in range(args.rounds):
        row = {}
        for kind, sampling in kinds.items():
            before = jump_forward_tokens(server)
            wall, out = post_all(server, [{"text": p, "sampling_params": sampling}
                                          for p in prompts])
            tokens = [o["meta_info"]["completion_tokens"] for o in out]
            assert tokens == [args.max_new_tokens] * len(prompts), tokens
            if kind == "constrained":
                for o in out:
                    assert o["text"].startswith("["), o["text"][:80]
            row[kind] = {"wall_s": wall, "tokens": sum(tokens), "tok_s": sum(tokens) / wall,
                         "jump_forward_tokens": jump_forward_tokens(server) - before}
        row["ratio"] = row["constrained"]["tok_s"] / row["free"]["tok_s"]
        row["us_per_token"] = (1 / row["constrained"]["tok_s"] - 1 / row["free"]["tok_s"]) * 1e6
        rounds.append(row)
    by_ratio = sorted(rounds, key=lambda r: r["ratio"])
    return {"rounds": rounds, "median": by_ratio[len(by_ratio) // 2]}


def forced_keys(server, args):
    prompts = [f"The customer record of a person from {city}:\n"
               for city in CITIES[:args.clients]]
    sampling = {"max_new_tokens": 256, "temperature": 0, "json_schema": json.dumps(LONG_KEYS)}
    post_all(server, [{"text": prompts[0], "sampling_params": sampling}])
    walls = []
    for _ in range(args.rounds):
        before = jump_forward_tokens(server)
        wall, out = post_all(server, [{"text": p, "sampling_params": sampling} for p in prompts])
        forced = jump_forward_tokens(server) - before
        walls.append(wall)
    wall = min(walls)
    tokens = sum(o["meta_info"]["completion_tokens"] for o in out)
    finished = sum(o["meta_info"]["finish_reason"]["type"] == "stop" for o in out)
    return {"requests": len(prompts), "finished_by_grammar": finished, "tokens": tokens,
            "jump_forward_tokens": forced, "sampled_tokens": tokens - forced, "wall_s": wall,
            "wall_s_rounds": walls,
            "example": out[0]["text"]}


def collect_traces(server, schemas, sampling, path):
    """Runs every schema once; writes {"schema", "ids"} lines for those that compiled."""
    def one(item):
        _, text = item
        r = requests.post(server.url + "/generate", json={
            "text": "Here is a JSON configuration file:\n",
            "sampling_params": {**sampling, "json_schema": text}}, timeout=1200)
        return text, r.status_code, r.json()

    with concurrent.futures.ThreadPoolExecutor(16) as pool:
        results = list(pool.map(one, schemas))
    n = 0
    with open(path, "w") as f:
        for text, status, body in results:
            if status == 200 and body["output_ids"]:
                f.write(json.dumps({"schema": text, "ids": body["output_ids"]}) + "\n")
                n += 1
    return n


def replay(mask_bench, tokenizer, traces, compact=False):
    cmd = [str(mask_bench), str(tokenizer), "--replay", str(traces)] + (["--compact"] if compact
                                                                         else [])
    print("+", " ".join(cmd), flush=True)
    out = subprocess.run(cmd, check=True, capture_output=True, text=True).stdout
    return json.loads(out.strip().splitlines()[-1])


def fmt(x, digits=1):
    return f"{x:,.{digits}f}"


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--radixserve", default=str(BUILD / "radixserve"))
    ap.add_argument("--mask-bench", default=str(BUILD / "grammar_mask_bench"))
    ap.add_argument("--model", default=str(SMOLLM2))
    ap.add_argument("--clients", type=int, default=32)
    ap.add_argument("--max-new-tokens", type=int, default=128)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--skip-mask", action="store_true", help="skip part 3")
    ap.add_argument("--out-file")
    args = ap.parse_args()
    import server_util
    server_util.BUILD = pathlib.Path(args.radixserve).parent
    tmp = pathlib.Path(tempfile.mkdtemp(prefix="radix-so-bench-"))
    result = {"model": args.model, "clients": args.clients, "max_new_tokens": args.max_new_tokens}

    for label, extra in (("jump_forward", []), ("no_jump_forward",
                                                ["--disable-grammar-jump-forward"])):
        server = Server(args.model, "--max-running-requests", str(args.clients), *extra)
        try:
            result[label] = {"throughput": throughput(server, args),
                             "forced_keys": forced_keys(server, args)}
            if label == "jump_forward" and not args.skip_mask:
                result["smollm2_traces"] = collect_traces(
                    server, corpus(), {"max_new_tokens": 64, "temperature": 0},
                    tmp / "smollm2.jsonl")
        finally:
            server.stop()
        print(json.dumps(result[label]), flush=True)

    if not args.skip_mask:
        result["mask_smollm2"] = replay(args.mask_bench, args.model, tmp / "smollm2.jsonl")
        folder = tmp / "qwen3-tiny"
        folder.mkdir()
        (folder / "config.json").write_text(json.dumps(QWEN3_CONFIG))
        for name in ("tokenizer.json", "tokenizer_config.json"):
            (folder / name).symlink_to(QWEN3_TOKENIZER / name)
        server = Server(folder, "--load-format", "dummy", "--max-running-requests", "32")
        try:
            result["qwen3_traces"] = collect_traces(
                server, corpus(), {"max_new_tokens": 128, "temperature": 1.0, "sampling_seed": 7,
                                   "logit_bias": closing_token_bias(folder / "tokenizer.json")},
                tmp / "qwen3.jsonl")
        finally:
            server.stop()
        result["mask_qwen3"] = replay(args.mask_bench, folder / "tokenizer.json",
                                      tmp / "qwen3.jsonl")

    rows = []
    for label, name in (("jump_forward", "default"),
                        ("no_jump_forward", "--disable-grammar-jump-forward")):
        t = result[label]["throughput"]["median"]
        ratios = ", ".join(f"{r['ratio']:.3f}" for r in result[label]["throughput"]["rounds"])
        rows.append(f"| {name} | {fmt(t['free']['tok_s'])} | {fmt(t['constrained']['tok_s'])} | "
                    f"**{t['ratio']:.3f}** ({ratios}) | {fmt(t['us_per_token'])} | "
                    f"{t['constrained']['jump_forward_tokens']} |")
    print(f"\nThroughput, {args.clients} concurrent requests x {args.max_new_tokens} tokens "
          "(output tok/s of the median round):")
    print("| server | unconstrained | json_schema | ratio, median (rounds) | "
          "extra us per token | jump-forward tokens |\n|---|---:|---:|---:|---:|---:|")
    print("\n".join(rows))
    print("\nLong forced keys:")
    print("| server | tokens | jump-forward tokens | sampled tokens | wall s (best) |"
          "\n|---|---:|---:|---:|---:|")
    for label, name in (("jump_forward", "default"),
                        ("no_jump_forward", "--disable-grammar-jump-forward")):
        f = result[label]["forced_keys"]
        print(f"| {name} | {f['tokens']} | {f['jump_forward_tokens']} | {f['sampled_tokens']} | "
              f"{fmt(f['wall_s'], 2)} |")
    if not args.skip_mask:
        print("\nMask cost per token (grammar_mask_bench --replay, one core):")
        print("| vocabulary | traces | tokens | mean us | p50 us | p90 us | p99 us | max us | "
              "1st-pass p50/p99 us | accept p50 us |\n|---|---:|---:|---:|---:|---:|---:|---:|"
              "---:|---:|")
        for key, name in (("mask_smollm2", "SmolLM2"), ("mask_qwen3", "Qwen3")):
            m = result[key]
            name = f"{name} ({m['vocab_size']:,} tokens)"
            k, f, a = m["mask"], m["mask_first_pass"], m["accept"]
            print(f"| {name} | {m['traces']} | {k['n']} | {fmt(k['mean_us'])} | "
                  f"{fmt(k['p50_us'])} | {fmt(k['p90_us'])} | {fmt(k['p99_us'])} | "
                  f"{fmt(k['max_us'])} | {fmt(f['p50_us'])} / {fmt(f['p99_us'])} | "
                  f"{fmt(a['p50_us'])} |")
    if args.out_file:
        pathlib.Path(args.out_file).write_text(json.dumps(result, indent=1))


if __name__ == "__main__":
    main()

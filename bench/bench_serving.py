#!/usr/bin/env python3
"""Online serving benchmark in the manner of SGLang's bench_serving, for radixserve and llama-server.

Sends a request set (bench_datasets.py: random, sharegpt, generated-shared-prefix) to the OpenAI
completions route with streaming, at a Poisson --request-rate (inf: all at once) under an optional
--max-concurrency, and reports request and token throughput with TTFT, ITL, TPOT and E2E latency
(mean, median, p99) as a table and, with --output-file, as JSON.

Both servers generate exactly the requested counts: max_tokens plus ignore_eos (radixserve), and
n_predict plus ignore_eos (llama-server); --backend changes nothing else. Metric definitions:
TTFT = first streamed text after the request was sent; ITL = gaps between later streamed chunks;
TPOT = (E2E - TTFT) / (output tokens - 1); output tokens come from the server's usage (or the
number of streamed chunks when a server sends no usage).

    python bench/bench_serving.py --backend radixserve --base-url http://127.0.0.1:30000 \
        --dataset-name random --num-prompts 32 --random-input-len 256 --random-output-len 128 \
        --random-range-ratio 1 --max-concurrency 32 --output-file out.json

The tokenizer (--tokenizer) is a GGUF file (llama.cpp's vocabulary, read by llama-cpp-python) or a
Hugging Face tokenizer.json / directory; by default the SmolLM2 GGUF in the model cache.
"""

import argparse
import asyncio
import json
import math
import os
import pathlib
import random
import sys
import time

import aiohttp
import numpy as np

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))
import bench_datasets  # noqa: E402

MODELS = pathlib.Path(os.environ.get("RADIX_MODELS",
                                     pathlib.Path.home() / ".cache/radixserve/models"))
DEFAULT_TOKENIZER = MODELS / "smollm2-135m-instruct-q4_1.gguf"


def request_body(backend, model, req, stream=True):
    body = {"model": model, "prompt": req.prompt, "max_tokens": req.output_len,
            "temperature": 0.0, "stream": stream, "ignore_eos": True}
    if stream:
        body["stream_options"] = {"include_usage": True}
    if backend == "llama-server":
        body.update({"n_predict": req.output_len, "cache_prompt": True})
    return body


def new_output():
    return {"success": False, "ttft": 0.0, "latency": 0.0, "itl": [], "chunks": 0,
            "generated_text": "", "prompt_tokens": None, "completion_tokens": None, "error": "",
            "sent_at": None}


async def send_one(session, url, body, out=None):
    """Streams one completion; returns a dict of timings, text and token counts (filled in place
    in `out` when given, so a cancelled request still shows when it was sent and its TTFT)."""
    out = new_output() if out is None else out
    start = time.perf_counter()
    out["sent_at"] = start
    last = start
    try:
        async with session.post(url, json=body) as resp:
            if resp.status != 200:
                out["error"] = f"HTTP {resp.status}: {(await resp.text())[:500]}"
                return out
            async for raw in resp.content:
                line = raw.decode("utf-8", "replace").strip()
                if not line.startswith("data:"):
                    continue
                data = line[len("data:"):].strip()
                if data == "[DONE]":
                    break
                chunk = json.loads(data)
                if chunk.get("error"):
                    out["error"] = json.dumps(chunk["error"])[:500]
                    return out
                usage = chunk.get("usage")
                if usage:
                    out["prompt_tokens"] = usage.get("prompt_tokens")
                    out["completion_tokens"] = usage.get("completion_tokens")
                text = "".join(c.get("text") or "" for c in chunk.get("choices") or [])
                if not text:
                    continue
                now = time.perf_counter()
                if out["chunks"] == 0:
                    out["ttft"] = now - start
                else:
                    out["itl"].append(now - last)
                last = now
                out["chunks"] += 1
                out["generated_text"] += text
        out["latency"] = time.perf_counter() - start
        out["success"] = out["chunks"] > 0 or body["max_tokens"] == 0
        if not out["success"]:
            out["error"] = "no text streamed"
    except (aiohttp.ClientError, asyncio.TimeoutError, json.JSONDecodeError) as e:
        out["error"] = f"{type(e).__name__}: {e}"
    return out


async def arrivals(requests, rate, rng):
    """Yields requests with exponential gaps (Poisson process) at `rate` per second."""
    for req in requests:
        yield req
        if math.isfinite(rate):
            await asyncio.sleep(rng.expovariate(rate))


async def run_benchmark(args, requests, model):
    url = args.base_url.rstrip("/") + "/v1/completions"
    timeout = aiohttp.ClientTimeout(total=args.request_timeout)
    semaphore = asyncio.Semaphore(args.max_concurrency) if args.max_concurrency else None
    async with aiohttp.ClientSession(timeout=timeout,
                                     # A connection per request, as SGLang's bench_serving
                                     # does: reusing keep-alive connections races with servers
                                     # that close idle ones (llama-server after 5 s).
                                     connector=aiohttp.TCPConnector(limit=0, force_close=True)
                                     ) as session:
        for i in range(args.warmup_requests):
            warm = bench_datasets.BenchRequest(f"Warm-up request {i}: say something.", 0, 4)
            result = await send_one(session, url, request_body(args.backend, model, warm))
            if not result["success"]:
                raise SystemExit(f"warm-up request failed: {result['error']}")

        outputs = [new_output() for _ in requests]

        async def limited(req, out):
            if semaphore is None:
                return await send_one(session, url, request_body(args.backend, model, req), out)
            async with semaphore:
                return await send_one(session, url, request_body(args.backend, model, req), out)

        async def send_all():
            tasks = []
            async for i, req in arrivals(list(enumerate(requests)), args.request_rate,
                                         random.Random(args.seed + 1)):
                tasks.append(asyncio.create_task(limited(req, outputs[i])))
            await asyncio.gather(*tasks)

        start = time.perf_counter()
        sender = asyncio.create_task(send_all())
        try:
            await asyncio.wait_for(sender, timeout=args.max_duration or None)
        except asyncio.TimeoutError:
            pass  # wait_for cancelled everything still running or waiting to be sent
        duration = time.perf_counter() - start
    for out in outputs:
        if not out["success"] and not out["error"]:
            out["error"] = "cut off by --max-duration" if out["sent_at"] else "not sent"
    return outputs, duration, start


def summarize(values_s):
    """mean/median/p99/std in milliseconds of a list of seconds (zeros when empty)."""
    arr = np.array(values_s or [0.0]) * 1000.0
    return {"mean": float(arr.mean()), "median": float(np.median(arr)),
            "p99": float(np.percentile(arr, 99)), "std": float(arr.std())}


def ttft_lower_bound(outputs, start, duration):
    """Mean TTFT over all requests that a run cut off by --max-duration guarantees: a known TTFT
    where the first token came, the time waited so far for a request sent without an answer, and
    0 for a request never sent."""
    end = start + duration
    bounds = []
    for out in outputs:
        if out["chunks"] > 0:
            bounds.append(out["ttft"])
        elif out["sent_at"] is not None:
            bounds.append(end - out["sent_at"])
        else:
            bounds.append(0.0)
    return summarize(bounds)["mean"]


def compute_metrics(requests, outputs, duration):
    ttfts, itls, tpots, e2es = [], [], [], []
    completed = input_tokens = output_tokens = 0
    for req, out in zip(requests, outputs):
        if not out["success"]:
            continue
        completed += 1
        out_len = out["completion_tokens"] if out["completion_tokens"] is not None \
            else out["chunks"]
        in_len = out["prompt_tokens"] if out["prompt_tokens"] is not None else req.prompt_len
        input_tokens += in_len
        output_tokens += out_len
        ttfts.append(out["ttft"])
        itls.extend(out["itl"])
        e2es.append(out["latency"])
        if out_len > 1:
            tpots.append((out["latency"] - out["ttft"]) / (out_len - 1))
    return {
        "completed": completed,
        "failed": len(outputs) - completed,
        "duration_s": duration,
        "total_input_tokens": input_tokens,
        "total_output_tokens": output_tokens,
        "request_throughput": completed / duration,
        "input_throughput": input_tokens / duration,
        "output_throughput": output_tokens / duration,
        "total_token_throughput": (input_tokens + output_tokens) / duration,
        "concurrency": sum(e2es) / duration,
        "ttft_ms": summarize(ttfts),
        "itl_ms": summarize(itls),
        "tpot_ms": summarize(tpots),
        "e2e_ms": summarize(e2es),
    }


def print_table(args, m):
    rows = [
        ("Backend", args.backend), ("Dataset", args.dataset_name),
        ("Max concurrency", args.max_concurrency or "unlimited"),
        ("Request rate (req/s)", args.request_rate),
        ("Successful requests", m["completed"]), ("Failed requests", m["failed"]),
        ("Benchmark duration (s)", f"{m['duration_s']:.2f}"),
        ("Total input tokens", m["total_input_tokens"]),
        ("Total generated tokens", m["total_output_tokens"]),
        ("Request throughput (req/s)", f"{m['request_throughput']:.2f}"),
        ("Input token throughput (tok/s)", f"{m['input_throughput']:.2f}"),
        ("Output token throughput (tok/s)", f"{m['output_throughput']:.2f}"),
        ("Total token throughput (tok/s)", f"{m['total_token_throughput']:.2f}"),
        ("Concurrency", f"{m['concurrency']:.2f}"),
    ]
    for key, title in (("e2e_ms", "E2E latency"), ("ttft_ms", "TTFT"), ("itl_ms", "ITL"),
                       ("tpot_ms", "TPOT")):
        for stat in ("mean", "median", "p99"):
            rows.append((f"{stat.capitalize()} {title} (ms)", f"{m[key][stat]:.2f}"))
    width = max(len(k) for k, _ in rows) + 2
    print("=" * (width + 14))
    for key, value in rows:
        print(f"{key:<{width}}{value}")
    print("=" * (width + 14))


def build_requests(args):
    tok = bench_datasets.WordTokenizer(args.tokenizer)
    rng = random.Random(args.seed)
    if args.dataset_name == "random":
        reqs = bench_datasets.random_requests(tok, rng, args.num_prompts, args.random_input_len,
                                              args.random_output_len, args.random_range_ratio)
    elif args.dataset_name == "sharegpt":
        reqs = bench_datasets.sharegpt_requests(tok, rng, args.num_prompts,
                                                args.sharegpt_max_input_len,
                                                args.sharegpt_max_output_len)
    else:
        reqs = bench_datasets.shared_prefix_requests(
            tok, rng, args.gsp_num_groups, args.gsp_prompts_per_group,
            args.gsp_system_prompt_len, args.gsp_question_len, args.gsp_output_len,
            args.gsp_range_ratio)
    if args.prompt_format == "ids":
        bench_datasets.to_token_ids(tok, reqs)
    return reqs


def served_model(base_url):
    import urllib.request
    with urllib.request.urlopen(base_url.rstrip("/") + "/v1/models", timeout=30) as resp:
        data = json.load(resp)["data"]
    return data[0]["id"]


def parse_args(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--backend", choices=["radixserve", "llama-server"], default="radixserve")
    p.add_argument("--base-url", default="http://127.0.0.1:30000")
    p.add_argument("--model", help="model name sent in requests (default: from /v1/models)")
    p.add_argument("--tokenizer", default=str(DEFAULT_TOKENIZER),
                   help="GGUF file or HF tokenizer.json (or its directory)")
    p.add_argument("--dataset-name", choices=["random", "sharegpt", "generated-shared-prefix"],
                   default="random")
    p.add_argument("--num-prompts", type=int, default=100)
    p.add_argument("--random-input-len", type=int, default=1024)
    p.add_argument("--random-output-len", type=int, default=128)
    p.add_argument("--random-range-ratio", type=float, default=0.0)
    p.add_argument("--sharegpt-max-input-len", type=int, default=2048)
    p.add_argument("--sharegpt-max-output-len", type=int, default=512)
    p.add_argument("--gsp-num-groups", type=int, default=16)
    p.add_argument("--gsp-prompts-per-group", type=int, default=8)
    p.add_argument("--gsp-system-prompt-len", type=int, default=1024)
    p.add_argument("--gsp-question-len", type=int, default=64)
    p.add_argument("--gsp-output-len", type=int, default=128)
    p.add_argument("--gsp-range-ratio", type=float, default=1.0)
    p.add_argument("--prompt-format", choices=["text", "ids"], default="text",
                   help="send prompts as text or as token-id lists")
    p.add_argument("--request-rate", type=float, default=float("inf"),
                   help="requests per second (Poisson arrivals); inf sends all at once")
    p.add_argument("--max-concurrency", type=int, default=0, help="0: unlimited")
    p.add_argument("--warmup-requests", type=int, default=1)
    p.add_argument("--request-timeout", type=float, default=3600.0)
    p.add_argument("--max-duration", type=float, default=0.0,
                   help="stop the run after this many seconds (0: never); requests not finished "
                        "are cancelled and the report gives a lower bound of the mean TTFT")
    p.add_argument("--seed", type=int, default=1)
    p.add_argument("--flush-cache", action="store_true",
                   help="POST /flush_cache before the run (radixserve)")
    p.add_argument("--output-file", help="write the metrics as JSON here")
    p.add_argument("--output-details", action="store_true",
                   help="include per-request lengths and timings in the JSON")
    p.add_argument("--quick", action="store_true",
                   help="smoke test: 4 prompts of 32 in / 8 out unless given explicitly")
    args = p.parse_args(argv)
    if args.quick:
        defaults = {"num_prompts": 4, "random_input_len": 32, "random_output_len": 8,
                    "gsp_num_groups": 2, "gsp_prompts_per_group": 2, "gsp_system_prompt_len": 32,
                    "gsp_question_len": 8, "gsp_output_len": 8, "sharegpt_max_input_len": 256,
                    "sharegpt_max_output_len": 16}
        for key, value in defaults.items():
            if getattr(args, key) == p.get_default(key):
                setattr(args, key, value)
    return args


def main(argv=None):
    args = parse_args(argv)
    requests = build_requests(args)
    model = args.model or served_model(args.base_url)
    if args.flush_cache:
        import urllib.request
        urllib.request.urlopen(urllib.request.Request(args.base_url.rstrip("/") + "/flush_cache",
                                                      method="POST"), timeout=60).read()
    outputs, duration, start = asyncio.run(run_benchmark(args, requests, model))
    metrics = compute_metrics(requests, outputs, duration)
    cut = sum(1 for o in outputs if not o["success"] and o["error"] in (
        "cut off by --max-duration", "not sent"))
    metrics["cut_off"] = cut
    if cut:
        metrics["ttft_mean_lower_bound_ms"] = ttft_lower_bound(outputs, start, duration) * 1000.0
    print_table(args, metrics)
    if cut:
        print(f"{cut} requests cut off by --max-duration {args.max_duration:g} s; mean TTFT over "
              f"all requests >= {metrics['ttft_mean_lower_bound_ms']:.0f} ms")
    errors = [o["error"] for o in outputs if not o["success"] and o["error"] not in (
        "cut off by --max-duration", "not sent")]
    for err in errors[:3]:
        print(f"error: {err}", file=sys.stderr)
    report = {"backend": args.backend, "dataset": args.dataset_name,
              "config": {k: v for k, v in vars(args).items() if k != "output_file"},
              "metrics": metrics}
    report["config"]["request_rate"] = str(args.request_rate)
    if args.output_details:
        report["requests"] = [
            {"prompt_len": r.prompt_len, "output_len": r.output_len,
             "prompt_tokens": o["prompt_tokens"], "completion_tokens": o["completion_tokens"],
             "chunks": o["chunks"], "success": o["success"],
             "sent_s": None if o["sent_at"] is None else o["sent_at"] - start, "ttft_s": o["ttft"],
             "latency_s": o["latency"], "error": o["error"]}
            for r, o in zip(requests, outputs)]
    if args.output_file:
        pathlib.Path(args.output_file).parent.mkdir(parents=True, exist_ok=True)
        pathlib.Path(args.output_file).write_text(json.dumps(report, indent=2) + "\n")
    return 0 if not errors else 1


if __name__ == "__main__":
    sys.exit(main())

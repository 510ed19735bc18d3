#!/usr/bin/env python3
"""SGLang's own `bench_serving` (`python -m sglang.bench_serving --backend sglang-oai`, from the
sglang wheel in the torch venv) pointed at radixserve and at llama-server on the same GGUF, one
server at a time, 2 threads each: random-ids prompts of a fixed length, ignore_eos, so both
generate exactly the requested tokens. Prints one table row per server and the ratio.

    $RADIX_VENV/bin/python bench/sglang_serving.py --peer-bin $(bench/build_peer.sh) \\
        --radixserve $RADIX_BUILD_DIR/radixserve --model shape-llama-1b-q4_k_m.gguf \\
        --out-dir DIR [--clients 32] [--prompts 32] [--input-len 512] [--output-len 256]

llama-server runs with one slot per client (-np CLIENTS, -c CLIENTS x (input + output + 64)) and
continuous batching; radixserve with its defaults and --threads 2.
"""
import argparse
import json
import pathlib
import subprocess
import sys

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))
sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[1] / "tests/fixtures"))
from compare import ManagedServer, free_port  # noqa: E402
from torch_env import smollm2_tokenizer_dir, torch_python  # noqa: E402


def bench(url, args, out_file):
    cmd = [torch_python(), "-m", "sglang.bench_serving", "--backend", "sglang-oai",
           "--base-url", url, "--tokenizer", args.tokenizer or smollm2_tokenizer_dir(),
           "--dataset-name", "random-ids", "--random-input-len", str(args.input_len),
           "--random-output-len", str(args.output_len), "--random-range-ratio", "1.0",
           "--num-prompts", str(args.prompts), "--max-concurrency", str(args.clients),
           "--seed", "1", "--disable-tqdm", "--output-file", str(out_file)]
    print("+ " + " ".join(cmd), flush=True)
    subprocess.run(cmd, check=True, cwd=out_file.parent)
    result = json.loads(out_file.read_text().splitlines()[-1])
    assert result["completed"] == args.prompts, result
    return result


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--peer-bin", required=True)
    p.add_argument("--radixserve", required=True)
    p.add_argument("--model", required=True)
    p.add_argument("--out-dir", required=True)
    p.add_argument("--tokenizer", help="HF tokenizer folder (default: SmolLM2's, the shapes' vocabulary)")
    p.add_argument("--clients", type=int, default=32)
    p.add_argument("--prompts", type=int, default=32)
    p.add_argument("--input-len", type=int, default=512)
    p.add_argument("--output-len", type=int, default=256)
    p.add_argument("--radixserve-arg", action="append", default=[])
    args = p.parse_args()
    out = pathlib.Path(args.out_dir)
    out.mkdir(parents=True, exist_ok=True)
    results = {}
    port = free_port()
    cmd = [args.radixserve, "--model-path", args.model, "--threads", "2", "--host", "127.0.0.1",
           "--port", port, *args.radixserve_arg]
    with ManagedServer(cmd, port, out / "radixserve.log") as srv:
        results["radixserve"] = bench(srv.url, args, out / "radixserve.jsonl")
    port = free_port()
    ctx = args.clients * (args.input_len + args.output_len + 64)
    # llama-server sends an SSE comment (":") every 30 s to a stream still waiting for its first
    # token; bench_serving's client parses every line as JSON, counts such a request as failed and
    # drops it (llama-server logs "stop: cancel task"). Off, every request completes.
    cmd = [pathlib.Path(args.peer_bin) / "llama-server", "-m", args.model, "-t", 2, "-tb", 2,
           "-np", args.clients, "-cb", "-c", ctx, "--sse-ping-interval", -1,
           "--host", "127.0.0.1", "--port", port]
    with ManagedServer(cmd, port, out / "llama-server.log") as srv:
        results["llama-server"] = bench(srv.url, args, out / "llama-server.jsonl")
    (out / "summary.json").write_text(json.dumps(results, indent=2))
    print(f"\nsglang.bench_serving --backend sglang-oai, {args.clients} clients, "
          f"{args.prompts} prompts, random-ids {args.input_len} in / {args.output_len} out\n")
    print("| server | output tok/s | mean TTFT ms | mean TPOT ms | mean E2E ms |")
    print("|---|---:|---:|---:|---:|")
    for name, r in results.items():
        print(f"| {name} | {r['output_throughput']:.1f} | {r['mean_ttft_ms']:.0f} | "
              f"{r['mean_tpot_ms']:.1f} | {r['mean_e2e_latency_ms']:.0f} |")
    rs, ls = results["radixserve"], results["llama-server"]
    print(f"\nradixserve / llama-server: output throughput {rs['output_throughput'] / ls['output_throughput']:.2f}x, "
          f"mean TTFT {ls['mean_ttft_ms'] / rs['mean_ttft_ms']:.2f}x lower")


if __name__ == "__main__":
    main()

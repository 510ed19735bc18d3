#!/usr/bin/env python3
"""Decode time per step with 1 and many concurrent streams, for one or more radixserve binaries
side by side (issue 15 part 1: before/after event formatting left the engine thread).

    python bench/decode_step.py --binary before=/path/radixserve --binary after=/path/radixserve
                                [--model GGUF] [--streams 1,256] [--max-new N] [--rounds R]
                                [--server-args "MORE ARGS"] [--sampling JSON]

For each binary and each stream count, one server at a time: N streaming /generate requests
(distinct short prompts, ignore_eos, max_new_tokens N, greedy unless --sampling gives other
sampling parameters) are sent at once and read by an asyncio
client that only counts SSE events. Two figures per run:
  - engine: the median of the server's own decode step time, from its "Decode batch" lines
    (--decode-log-interval 1: each line's gen throughput covers one step, so step time =
    #running-req / throughput), over the lines with every stream running;
  - client: (time the last stream ended - time the last stream got its first event) /
    (max_new - 1): the wall time per step as the clients see it.
Best (lowest) of --rounds rounds each. Binaries alternate per round, so a machine whose speed
drifts affects both alike; compare the ratios of one run.

With --peer-bin DIR (bench/build_peer.sh), each round also runs llama.cpp's
`llama-batched-bench -npp 16 -ntg N -npl STREAMS -t 2 -tb 2` on the same GGUF right after the
binaries, and the summary gives each binary's aggregate decode tok/s (streams / engine step time)
against the peer's S_TG (decode tok/s of all sequences), best of the rounds each, and the ratio.
"""
import argparse
import asyncio
import json
import pathlib
import re
import shlex
import statistics
import subprocess
import sys
import time

REPO = pathlib.Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "tests/e2e"))
from server_util import Server  # noqa: E402

DEFAULT_MODEL = REPO.parent / "shared/models/stories260K/gguf/stories260K.gguf"
DECODE_LINE = re.compile(r"Decode batch, #running-req: (\d+),.*gen throughput \(token/s\): ([\d.]+)")


def start_server(binary, model, streams, max_new, extra=()):
    tokens = max(16384, streams * (max_new + 64) * 2)
    return Server(model, "--max-running-requests", max(streams, 1), "--max-total-tokens", tokens,
                  "--decode-log-interval", 1, "--skip-server-warmup", "--disable-radix-cache",
                  *extra, binary=binary)


def step_times(server, streams):
    """The decode step times (s) of the server's Decode batch lines with `streams` running."""
    times = []
    for line in server.log_path.read_text(errors="replace").splitlines():
        m = DECODE_LINE.search(line)
        if m and int(m.group(1)) == streams and float(m.group(2)) > 0:
            times.append(streams / float(m.group(2)))
    return times


def peer_decode(peer_bin, model, streams, max_new):
    """llama-batched-bench's S_TG (decode tok/s of all `streams` sequences)."""
    out = subprocess.run([str(pathlib.Path(peer_bin) / "llama-batched-bench"), "-m", model,
                          "-t", "2", "-tb", "2", "-npp", "16", "-ntg", str(max_new),
                          "-npl", str(streams), "-c", str(streams * (max_new + 16) + 256)],
                         capture_output=True, text=True, check=True).stdout
    for line in out.splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if len(cells) == 10 and cells[2] == str(streams):
            return float(cells[7])
    raise RuntimeError("no S_TG row for %d sequences in llama-batched-bench's output:\n%s"
                       % (streams, out))


async def one_stream(port, prompt, max_new, sampling):
    """Returns (time of the first event, time of the end)."""
    body = json.dumps({"text": prompt, "stream": True,
                       "sampling_params": {"max_new_tokens": max_new, "ignore_eos": True,
                                           **sampling}}).encode()
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    writer.write(b"POST /generate HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
                 b"Connection: close\r\nContent-Length: " + str(len(body)).encode() + b"\r\n\r\n" +
                 body)
    await writer.drain()
    first = None
    while True:
        chunk = await reader.read(65536)
        if not chunk:
            break
        if first is None and b"data:" in chunk:
            first = time.perf_counter()
    end = time.perf_counter()
    writer.close()
    return first or end, end


async def burst(port, streams, max_new, sampling):
    results = await asyncio.gather(*(one_stream(port, f"Story {i}: once upon a time", max_new,
                                                sampling)
                                     for i in range(streams)))
    last_first = max(r[0] for r in results)
    last_end = max(r[1] for r in results)
    return (last_end - last_first) / max(max_new - 1, 1)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--binary", action="append", required=True, help="label=path")
    ap.add_argument("--model", default=str(DEFAULT_MODEL))
    ap.add_argument("--streams", default="1,256")
    ap.add_argument("--max-new", type=int, default=64)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--peer-bin", help="llama.cpp bin directory (bench/build_peer.sh)")
    ap.add_argument("--sampling", default='{"temperature": 0}',
                    help="the requests' sampling parameters besides max_new_tokens and "
                         "ignore_eos, as JSON (default greedy; e.g. '{\"temperature\": 0.7, "
                         "\"top_p\": 0.9}' for a sampled decode)")
    ap.add_argument("--server-args", default="",
                    help="more radixserve arguments, one string (e.g. \"--mem-fraction-static "
                         "0.6\" for a model whose weights leave the default too little KV room)")
    args = ap.parse_args()
    binaries = [b.split("=", 1) for b in args.binary]
    sampling = json.loads(args.sampling)
    streams_list = [int(s) for s in args.streams.split(",")]
    best = {}
    peer_best = {}
    for streams in streams_list:
        for r in range(args.rounds):
            for label, path in binaries:
                server = start_server(path, args.model, streams, args.max_new,
                                      shlex.split(args.server_args))
                try:
                    client = asyncio.run(burst(server.port, streams, args.max_new, sampling))
                    time.sleep(0.2)
                    engine = step_times(server, streams)
                finally:
                    server.stop()
                engine_ms = statistics.median(engine) * 1e3 if engine else float("nan")
                key = (label, streams)
                old = best.get(key, (float("inf"), float("inf")))
                best[key] = (min(old[0], engine_ms), min(old[1], client * 1e3))
                print(f"round {r} {label:>8} streams {streams:4d}: engine {engine_ms:8.3f} ms/step "
                      f"({len(engine)} lines), client {client * 1e3:8.3f} ms/step", flush=True)
            if args.peer_bin:
                tok_s = peer_decode(args.peer_bin, args.model, streams, args.max_new)
                peer_best[streams] = max(peer_best.get(streams, 0.0), tok_s)
                print(f"round {r} llama.cpp streams {streams:4d}: S_TG {tok_s:8.2f} tok/s", flush=True)
    print()
    print(f"{'binary':>8} {'streams':>7} {'engine ms/step':>15} {'client ms/step':>15}")
    for (label, streams), (engine_ms, client_ms) in best.items():
        print(f"{label:>8} {streams:7d} {engine_ms:15.3f} {client_ms:15.3f}")
    if len(binaries) == 2:
        a, b = binaries[0][0], binaries[1][0]
        for streams in streams_list:
            ea, ca = best[(a, streams)]
            eb, cb = best[(b, streams)]
            print(f"{a}/{b} at {streams} streams: engine {ea / eb:.2f}x, client {ca / cb:.2f}x")
    if args.peer_bin:
        print()
        print(f"{'binary':>8} {'streams':>7} {'tok/s':>9} {'llama.cpp':>9} {'speed-up':>8}")
        for (label, streams), (engine_ms, _) in best.items():
            tok_s = streams / engine_ms * 1e3
            print(f"{label:>8} {streams:7d} {tok_s:9.1f} {peer_best[streams]:9.1f} "
                  f"{tok_s / peer_best[streams]:7.2f}x")


if __name__ == "__main__":
    main()

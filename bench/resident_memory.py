#!/usr/bin/env python3
"""Resident memory of radixserve and llama-server serving the same GGUF files (issue 18: "report
resident memory per model next to llama.cpp's").

    python bench/resident_memory.py --peer-bin $(bench/build_peer.sh) \
        --radixserve <build>/radixserve MODEL.gguf [MODEL.gguf ...] [--out FILE.json]

For each file, one server at a time: radixserve with its defaults and `--threads 2`, then
`llama-server -t 2 -c 4096`. Each gets one short completion (so lazily touched pages are in),
then the script reads VmRSS, RssAnon and RssFile from /proc/<pid>/status and VmHWM (the peak
resident size, start-up included). Prints one markdown row per file: MB, anonymous + file-backed
in parentheses. A file-backed page is the mapped GGUF, which the kernel can drop and read back;
an anonymous page is the server's own copy (packed panels, KV cache, buffers).
"""
import argparse
import json
import pathlib
import sys
import urllib.request

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))
from compare import ManagedServer, free_port  # noqa: E402

FIELDS = ("VmRSS", "RssAnon", "RssFile", "VmHWM")


def status_mb(pid):
    """The FIELDS of /proc/<pid>/status in MB (10^6 bytes)."""
    out = {}
    for line in pathlib.Path(f"/proc/{pid}/status").read_text().splitlines():
        key, _, value = line.partition(":")
        if key in FIELDS:
            out[key] = int(value.split()[0]) * 1024 / 1e6
    missing = [f for f in FIELDS if f not in out]
    if missing:
        raise RuntimeError(f"/proc/{pid}/status lacks {missing}")
    return out


def one_completion(url):
    body = json.dumps({"prompt": "The capital of France is", "max_tokens": 8,
                       "temperature": 0}).encode()
    req = urllib.request.Request(url + "/v1/completions", data=body,
                                 headers={"Content-Type": "application/json"})
    with urllib.request.urlopen(req, timeout=600) as r:
        if r.status != 200:
            raise RuntimeError(f"{url}: completion answered {r.status}")
        r.read()


def measure(cmd, port, log_path):
    with ManagedServer(cmd, port, log_path, timeout=1800) as srv:
        one_completion(srv.url)
        return status_mb(srv.proc.pid)


def cell(m):
    return f"{m['VmRSS']:,.0f} ({m['RssAnon']:,.0f} + {m['RssFile']:,.0f}); peak {m['VmHWM']:,.0f}"


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("models", nargs="+", type=pathlib.Path)
    p.add_argument("--peer-bin", required=True, type=pathlib.Path,
                   help="llama.cpp's bin directory (bench/build_peer.sh)")
    p.add_argument("--radixserve", required=True, type=pathlib.Path)
    p.add_argument("--log-dir", type=pathlib.Path, default=pathlib.Path("/tmp"))
    p.add_argument("--out", type=pathlib.Path, help="also write the numbers as JSON here")
    args = p.parse_args()
    for path in [args.radixserve, args.peer_bin / "llama-server", *args.models]:
        if not path.exists():
            p.error(f"{path} does not exist")
    results = {}
    print("| file | file size MB | radixserve MB | llama-server MB |")
    print("|---|---:|---:|---:|")
    for model in args.models:
        port = free_port()
        ours = measure([args.radixserve, "--model-path", model, "--threads", 2,
                        "--host", "127.0.0.1", "--port", port],
                       port, args.log_dir / f"rss-{model.stem}-radixserve.log")
        port = free_port()
        peer = measure([args.peer_bin / "llama-server", "-m", model, "-t", 2, "-tb", 2,
                        "-c", 4096, "--host", "127.0.0.1", "--port", port],
                       port, args.log_dir / f"rss-{model.stem}-llama-server.log")
        size = model.stat().st_size / 1e6
        results[model.name] = {"file_mb": size, "radixserve": ours, "llama_server": peer}
        print(f"| {model.name} | {size:,.0f} | {cell(ours)} | {cell(peer)} |", flush=True)
    if args.out:
        args.out.write_text(json.dumps(results, indent=2))


if __name__ == "__main__":
    main()

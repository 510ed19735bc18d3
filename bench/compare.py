#!/usr/bin/env python3
"""radixserve against the llama.cpp peer on the same GGUF, 2 threads; driven by bench/compare.sh.

For each format (Q4_1, BF16):
  single stream  peer: llama-bench pp512, tg128, tg128 at depth 2048 (-d).
                 radixserve (and llama-server, for reference) through bench_serving.py with
                 max concurrency 1: prefill tok/s = prompt tokens / median TTFT of 512-token prompts
                 with 1 output token; decode tok/s = 1000 / mean ITL of 128-token generations after
                 a short prompt and after a 2048-token prompt.
  serving        32 concurrent clients, random 256 in / 128 out; shared prefix 16 groups x 8
                 prompts, 1024-token system prompt, 64-token questions, 128 out; both servers.
Only one server runs at a time. Writes every raw result and summary.json under --out-dir and prints
the ratio table (radixserve / peer; above 1 means radixserve is faster).
"""

import argparse
import json
import os
import pathlib
import socket
import subprocess
import sys
import time
import urllib.request

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))
import bench_serving  # noqa: E402

FULL = {
    "bench_reps": 3, "pp": 512, "tg": 128, "depth": 2048, "prefill_prompts": 3,
    "decode_prompts": 2, "depth_prompts": 1,
    "serve_clients": 32, "serve_prompts": 32, "serve_in": 256, "serve_out": 128,
    "gsp": (16, 8, 1024, 64, 128), "ctx_per_slot": 2304,
    # llama-server needs ~40 minutes for the shared-prefix run (it re-prefills the 1,024-token
    # system prompt per slot); it is cut off here and its mean TTFT reported as a lower bound.
    "gsp_max_duration": 900, "gsp_formats": ("q4_1",),
}
QUICK = {
    "bench_reps": 1, "pp": 64, "tg": 16, "depth": 256, "prefill_prompts": 1,
    "decode_prompts": 1, "depth_prompts": 1,
    "serve_clients": 4, "serve_prompts": 4, "serve_in": 32, "serve_out": 8,
    "gsp": (2, 2, 64, 8, 8), "ctx_per_slot": 512,
    "gsp_max_duration": 0, "gsp_formats": ("q4_1",),
}


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class ManagedServer:
    """Starts a server command, waits for /health, stops it on exit."""

    def __init__(self, cmd, port, log_path, timeout=600):
        self.url = f"http://127.0.0.1:{port}"
        self.log = open(log_path, "w")
        print(f"+ {' '.join(map(str, cmd))}", flush=True)
        self.proc = subprocess.Popen(list(map(str, cmd)), stdout=self.log,
                                     stderr=subprocess.STDOUT)
        deadline = time.time() + timeout
        while time.time() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(f"{cmd[0]} exited with {self.proc.returncode}; see {log_path}")
            try:
                with urllib.request.urlopen(self.url + "/health", timeout=2) as r:
                    if r.status == 200:
                        return
            except OSError:
                pass
            time.sleep(0.5)
        self.stop()
        raise RuntimeError(f"{cmd[0]} did not become healthy; see {log_path}")

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.stop()

    def stop(self):
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(timeout=60)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        self.log.close()


def llama_bench(peer_bin, model, cfg, out_dir, tag):
    """pp, tg, and tg at depth through llama-bench; returns {metric: tok/s}."""
    exe = pathlib.Path(peer_bin) / "llama-bench"
    base = [str(exe), "-m", str(model), "-t", "2", "-r", str(cfg["bench_reps"]), "-o", "json"]
    runs = {"pp": base + ["-p", str(cfg["pp"]), "-n", "0"],
            "tg": base + ["-p", "0", "-n", str(cfg["tg"])],
            "tg_depth": base + ["-p", "0", "-n", str(cfg["tg"]), "-d", str(cfg["depth"])]}
    result = {}
    for name, cmd in runs.items():
        cached = out_dir / f"{tag}_llama_bench_{name}.json"
        if RESUME and cached.exists():
            result[name] = json.loads(cached.read_text())[0]["avg_ts"]
            continue
        print(f"+ {' '.join(cmd)}", flush=True)
        proc = subprocess.run(cmd, capture_output=True, text=True, check=True)
        (out_dir / f"{tag}_llama_bench_{name}.json").write_text(proc.stdout)
        entry = json.loads(proc.stdout)[0]
        result[name] = entry["avg_ts"]
    return result


RESUME = False  # --resume: reuse result files already in --out-dir


def serving_run(backend, url, tokenizer, out_file, args_list):
    if RESUME and pathlib.Path(out_file).exists():
        return json.loads(pathlib.Path(out_file).read_text())["metrics"]
    argv = ["--backend", backend, "--base-url", url, "--tokenizer", str(tokenizer),
            "--output-file", str(out_file), "--output-details", *map(str, args_list)]
    print(f"+ bench_serving.py {' '.join(argv)}", flush=True)
    rc = bench_serving.main(argv)
    report = json.loads(pathlib.Path(out_file).read_text())
    if rc != 0 or report["metrics"]["failed"] - report["metrics"].get("cut_off", 0):
        raise RuntimeError(f"bench_serving failed for {backend}; see {out_file}")
    return report["metrics"]


def single_stream(backend, url, tokenizer, cfg, out_dir, tag):
    common = ["--dataset-name", "random", "--random-range-ratio", "1", "--max-concurrency", "1"]
    pre = serving_run(backend, url, tokenizer, out_dir / f"{tag}_{backend}_prefill.json",
                      common + ["--num-prompts", cfg["prefill_prompts"], "--random-input-len",
                                cfg["pp"], "--random-output-len", 1])
    dec = serving_run(backend, url, tokenizer, out_dir / f"{tag}_{backend}_decode.json",
                      common + ["--num-prompts", cfg["decode_prompts"], "--random-input-len", 16,
                                "--random-output-len", cfg["tg"]])
    deep = serving_run(backend, url, tokenizer, out_dir / f"{tag}_{backend}_decode_depth.json",
                       common + ["--num-prompts", cfg["depth_prompts"], "--random-input-len",
                                 cfg["depth"], "--random-output-len", cfg["tg"]])
    return {"pp": cfg["pp"] / (pre["ttft_ms"]["median"] / 1000.0),
            "tg": 1000.0 / dec["itl_ms"]["mean"],
            "tg_depth": 1000.0 / deep["itl_ms"]["mean"]}


def serving(backend, url, tokenizer, cfg, out_dir, tag):
    rnd = serving_run(backend, url, tokenizer, out_dir / f"{tag}_{backend}_serve_random.json",
                      ["--dataset-name", "random", "--random-range-ratio", "1",
                       "--num-prompts", cfg["serve_prompts"], "--random-input-len",
                       cfg["serve_in"], "--random-output-len", cfg["serve_out"],
                       "--max-concurrency", cfg["serve_clients"]])
    out = {"random_out_tps": rnd["output_throughput"],
           "random_total_tps": rnd["total_token_throughput"],
           "random_ttft_ms": rnd["ttft_ms"]["mean"], "random_itl_ms": rnd["itl_ms"]["mean"],
           "gsp_out_tps": None, "gsp_ttft_ms": None, "gsp_ttft_is_bound": False,
           "gsp_duration_s": None}
    if tag not in cfg["gsp_formats"]:
        return out
    groups, per_group, sys_len, q_len, out_len = cfg["gsp"]
    gsp = serving_run(backend, url, tokenizer, out_dir / f"{tag}_{backend}_serve_gsp.json",
                      ["--dataset-name", "generated-shared-prefix", "--gsp-num-groups", groups,
                       "--gsp-prompts-per-group", per_group, "--gsp-system-prompt-len", sys_len,
                       "--gsp-question-len", q_len, "--gsp-output-len", out_len,
                       "--max-concurrency", cfg["serve_clients"],
                       "--max-duration", cfg["gsp_max_duration"]])
    cut = gsp.get("cut_off", 0)
    out.update({"gsp_out_tps": None if cut else gsp["output_throughput"],
                "gsp_ttft_ms": gsp["ttft_mean_lower_bound_ms"] if cut else gsp["ttft_ms"]["mean"],
                "gsp_ttft_is_bound": bool(cut), "gsp_duration_s": gsp["duration_s"],
                "gsp_completed": gsp["completed"]})
    return out


def run_format(args, cfg, tag, model, out_dir):
    res = {"model": str(model)}
    res["peer_bench"] = llama_bench(args.peer_bin, model, cfg, out_dir, tag)
    port = free_port()
    rs_cmd = [args.radixserve, "--model-path", model, "--threads", 2, "--host", "127.0.0.1",
              "--port", port, *args.radixserve_arg]
    with ManagedServer(rs_cmd, port, out_dir / f"{tag}_radixserve.log") as srv:
        res["radixserve_single"] = single_stream("radixserve", srv.url, model, cfg, out_dir, tag)
        res["radixserve_serving"] = serving("radixserve", srv.url, model, cfg, out_dir, tag)
    if args.no_peer_server:
        res["peer_server_single"] = res["peer_serving"] = None
        return res
    port = free_port()
    slots = cfg["serve_clients"]
    peer_cmd = [pathlib.Path(args.peer_bin) / "llama-server", "-m", model, "-t", 2, "-tb", 2,
                "-np", slots, "-cb", "-c", slots * cfg["ctx_per_slot"], "--host", "127.0.0.1",
                "--port", port]
    with ManagedServer(peer_cmd, port, out_dir / f"{tag}_llama_server.log") as srv:
        res["peer_server_single"] = single_stream("llama-server", srv.url, model, cfg, out_dir,
                                                  tag)
        res["peer_serving"] = serving("llama-server", srv.url, model, cfg, out_dir, tag)
    return res


def ratio_rows(tag, res, cfg):
    pb, ps, rs = res["peer_bench"], res["peer_serving"], res["radixserve_serving"]
    rss = res["radixserve_single"]
    pss = res["peer_server_single"] or {"pp": None, "tg": None, "tg_depth": None}
    ps = ps or {k: None for k in rs}
    d = cfg["depth"]
    return [
        (tag, f"prefill pp{cfg['pp']} tok/s", pb["pp"], pss["pp"], rss["pp"], True),
        (tag, f"decode tg{cfg['tg']} tok/s", pb["tg"], pss["tg"], rss["tg"], True),
        (tag, f"decode tg{cfg['tg']} @ depth {d} tok/s", pb["tg_depth"], pss["tg_depth"],
         rss["tg_depth"], True),
        (tag, "serve random: output tok/s", ps["random_out_tps"], None, rs["random_out_tps"],
         True),
        (tag, "serve random: mean TTFT ms", ps["random_ttft_ms"], None, rs["random_ttft_ms"],
         False),
        (tag, "serve random: mean ITL ms", ps["random_itl_ms"], None, rs["random_itl_ms"], False),
    ] + ([] if rs["gsp_ttft_ms"] is None else [
        (tag, "serve shared prefix: output tok/s", ps["gsp_out_tps"], None, rs["gsp_out_tps"],
         True),
        (tag, "serve shared prefix: mean TTFT ms" +
         (" (llama-server: lower bound, cut off)" if ps.get("gsp_ttft_is_bound") else ""),
         ps["gsp_ttft_ms"], None, rs["gsp_ttft_ms"], False),
    ])


def format_table(rows):
    lines = ["| model | metric | llama.cpp | llama-server (HTTP) | radixserve | speed-up |",
             "|---|---|---:|---:|---:|---:|"]
    for tag, name, peer, peer_http, ours, higher_better in rows:
        speedup = "-"
        if peer and ours:
            speedup = f"{(ours / peer if higher_better else peer / ours):.2f}x"
            if "lower bound" in name:
                speedup = ">= " + speedup
        cells = [f"{v:.1f}" if v is not None else "-" for v in (peer, peer_http, ours)]
        lines.append(f"| {tag} | {name} | {' | '.join(cells)} | {speedup} |")
    return "\n".join(lines)


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--peer-bin", required=True, help="directory with llama-server, llama-bench")
    p.add_argument("--radixserve", required=True, help="radixserve binary")
    p.add_argument("--model", action="append", required=True, metavar="TAG=GGUF",
                   help="format tag and GGUF path, repeatable (e.g. q4_1=/path/model.gguf)")
    p.add_argument("--out-dir", required=True)
    p.add_argument("--radixserve-arg", action="append", default=[], metavar="ARG",
                   help="one more radixserve argument, repeatable (e.g. "
                        "--radixserve-arg=--mem-fraction-static --radixserve-arg=0.7)")
    p.add_argument("--quick", action="store_true", help="tiny sizes, for smoke tests")
    p.add_argument("--resume", action="store_true",
                   help="reuse the result files of an interrupted run in --out-dir")
    p.add_argument("--no-peer-server", action="store_true",
                   help="skip llama-server (single stream from llama-bench only, no serving peer)")
    args = p.parse_args()
    global RESUME
    RESUME = args.resume
    cfg = QUICK if args.quick else FULL
    out_dir = pathlib.Path(args.out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    summary = {"quick": args.quick, "config": {k: list(v) if isinstance(v, tuple) else v
                                               for k, v in cfg.items()},
               "machine": {"nproc": os.cpu_count()}, "formats": {}}
    rows = []
    for spec in args.model:
        tag, model = spec.split("=", 1)
        summary["formats"][tag] = run_format(args, cfg, tag, pathlib.Path(model), out_dir)
        rows += ratio_rows(tag, summary["formats"][tag], cfg)
        (out_dir / "summary.json").write_text(json.dumps(summary, indent=2) + "\n")
    table = format_table(rows)
    (out_dir / "table.md").write_text(table + "\n")
    print("\nspeed-up = radixserve / llama.cpp for rates, llama.cpp / radixserve for latencies "
          "(above 1: radixserve is better). Single-stream llama.cpp column: llama-bench.\n")
    print(table)
    print(f"\nresults: {out_dir}")


if __name__ == "__main__":
    main()

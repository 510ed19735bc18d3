#!/usr/bin/env python3
"""Tokenizer encode speed: radixserve's `radix_tokenize --bench` vs HF `tokenizers` (Rust),
both single-threaded, on ~1 MB of mixed text built deterministically from the oracle corpus
(prose, code, numbers, whitespace, CJK, other scripts, emoji, special-token literals).

    RADIX_BUILD_DIR=... python bench/tokenizer_bench.py [--mb 1] [--repeat 3] [name ...]

Prints one line per tokenizer: bytes, tokens (must be equal for both), seconds per encode
(best of --repeat) and the ratio hf_seconds / our_seconds (> 1 means we are faster).
"""

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

os.environ.setdefault("RAYON_NUM_THREADS", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")

ORACLE_DIR = Path(__file__).resolve().parents[1] / "tests" / "oracle" / "tokenizer"
sys.path.insert(0, str(ORACLE_DIR))
from tokenizer_corpus import build_corpus  # noqa: E402
from tokenizer_oracle_util import GGUF_TOKENIZERS, JSON_TOKENIZERS, binary_path  # noqa: E402


def mixed_text(megabytes):
    pieces = [c["text"] for c in build_corpus()]
    target = int(megabytes * 1_000_000)
    out, size, i = [], 0, 0
    while size < target:
        s = pieces[i % len(pieces)] + "\n"
        out.append(s)
        size += len(s.encode("utf-8"))
        i += 1
    return "".join(out)


def bench_ours(path, text_file, repeat, lines):
    best = None
    for _ in range(repeat):
        out = subprocess.run([str(binary_path()), "--tokenizer", str(path), "--bench", text_file,
                              "--lines", "1" if lines else "0"],
                             capture_output=True, text=True, check=True)
        r = json.loads(out.stdout)
        best = r if best is None or r["seconds"] < best["seconds"] else best
    return best


def bench_hf(path, text, repeat, lines):
    import tokenizers

    tok = tokenizers.Tokenizer.from_file(str(path))
    tok.no_padding()  # like ours: no padding, no truncation (MiniLM's file asks for both)
    tok.no_truncation()
    tok.encode(text[:10000], add_special_tokens=False)  # warm-up
    inputs = None
    if lines:  # split on "\n" only, as radix_tokenize does
        parts = text.split("\n")
        inputs = [p + "\n" for p in parts[:-1]] + ([parts[-1]] if parts[-1] else [])
    best, n = None, 0
    for _ in range(repeat):
        start = time.perf_counter()
        if lines:
            # encode_batch runs on RAYON_NUM_THREADS=1 threads: single-threaded.
            n = sum(len(e.ids) for e in tok.encode_batch(inputs, add_special_tokens=False))
        else:
            n = len(tok.encode(text, add_special_tokens=False).ids)
        elapsed = time.perf_counter() - start
        best = elapsed if best is None or elapsed < best else best
    return {"tokens": n, "seconds": best}


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--mb", type=float, default=1.0)
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--lines", action="store_true",
                    help="encode line by line (many short requests) instead of one 1 MB string")
    ap.add_argument("names", nargs="*")
    args = ap.parse_args()
    text = mixed_text(args.mb)
    with tempfile.NamedTemporaryFile("w", suffix=".txt", delete=False, encoding="utf-8") as f:
        f.write(text)
        text_file = f.name
    try:
        names = args.names or sorted(JSON_TOKENIZERS)
        for name in names:
            path = JSON_TOKENIZERS.get(name) or GGUF_TOKENIZERS.get(name)
            if path is None or not path.exists():
                print(f"{name:14s} missing")
                continue
            ours = bench_ours(path, text_file, args.repeat, args.lines)
            line = f"{name:14s} bytes={ours['bytes']} ours: {ours['tokens']} tok {ours['seconds']:.3f}s"
            if name in JSON_TOKENIZERS:
                hf = bench_hf(path, text, args.repeat, args.lines)
                same = "same" if hf["tokens"] == ours["tokens"] else "DIFFERENT"
                line += (f"  hf: {hf['tokens']} tok {hf['seconds']:.3f}s ({same} count)"
                         f"  ratio hf/ours = {hf['seconds'] / ours['seconds']:.2f}x")
            print(line, flush=True)
    finally:
        os.unlink(text_file)


if __name__ == "__main__":
    main()

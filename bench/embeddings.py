#!/usr/bin/env python3
"""Embedding throughput: radixserve's /v1/embeddings against sentence-transformers (PyTorch, CPU)
on the same model and machine, in one run (issue 19's performance target).

    $RADIX_TORCH_VENV/bin/python bench/embeddings.py [--model FOLDER] [--threads 2]
                                                     [--rounds 3] [--out-file F.json]

Two workloads, as the issue names them: 256 short sentences (corpus sentences, 3-60 tokens) and
32 documents of 512 tokens (corpus text joined and cut to the model's 512 positions by the
tokenizer). radixserve: the whole workload in one /v1/embeddings call to a server started with
--threads (its compute pool), after one warm-up call; sentence-transformers: SentenceTransformer.encode of the same texts with
torch.set_num_threads(--threads), batch_size 32 (its default) and 256, after one warm-up. Each
figure is the best of --rounds rounds (sentences/s); the ratio is radixserve / the faster
sentence-transformers setting. The two never run at the same time. The outputs are compared
too (cosine), so that the speed is of the same computation.
"""
import argparse
import json
import pathlib
import sys
import time

import numpy as np
import requests

REPO = pathlib.Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "tests/e2e"))
sys.path.insert(0, str(REPO / "tests/oracle/model"))
from bert_reference import MINILM, load_corpus  # noqa: E402
from server_util import Server  # noqa: E402


def workloads(tokenizer):
    corpus = load_corpus()
    short = [t for t in corpus if 3 <= len(tokenizer(t)["input_ids"]) <= 60]
    short = (short * (256 // len(short) + 1))[:256]
    text = " ".join(corpus)
    ids = tokenizer(text, add_special_tokens=False)["input_ids"]
    docs = []
    for i in range(32):
        # Overlapping windows of the corpus, 510 tokens + [CLS] [SEP] (decoding and re-encoding
        # can change the count by a few: trim until the text encodes to at most 512).
        n = 510
        while True:
            doc = tokenizer.decode(ids[i * 200:i * 200 + n])
            if len(tokenizer(doc)["input_ids"]) <= 512:
                break
            n -= 4
        docs.append(doc)
    return {"256 short sentences": short, "32 x 512-token documents": docs}


def best_of(rounds, fn):
    times = []
    for _ in range(rounds):
        start = time.perf_counter()
        out = fn()
        times.append(time.perf_counter() - start)
    return min(times), out


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--model", default=MINILM)
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--out-file")
    args = parser.parse_args()

    import torch
    from sentence_transformers import SentenceTransformer

    torch.set_num_threads(args.threads)
    st = SentenceTransformer(args.model, device="cpu")
    st.max_seq_length = 512
    sets = workloads(st.tokenizer)
    results = {}

    srv = Server(pathlib.Path(args.model), "--skip-server-warmup", "--threads", str(args.threads),
                 "--max-prefill-tokens", "16384",
                 "--max-running-requests", "256")
    try:
        for name, texts in sets.items():
            def call():
                r = requests.post(srv.url + "/v1/embeddings", json={"input": texts}, timeout=600)
                r.raise_for_status()
                return np.array([d["embedding"] for d in r.json()["data"]])
            call()
            seconds, ours = best_of(args.rounds, call)
            results[name] = {"radixserve_per_s": len(texts) / seconds, "ours": ours}
    finally:
        srv.stop()

    for name, texts in sets.items():
        row = results[name]
        for batch in (32, 256):
            def encode():
                return st.encode(texts, batch_size=batch, convert_to_numpy=True)
            encode()
            seconds, theirs = best_of(args.rounds, encode)
            row[f"st_batch{batch}_per_s"] = len(texts) / seconds
        a, b = row.pop("ours"), theirs
        row["min_cosine"] = float(((a * b).sum(1) / (np.linalg.norm(a, axis=1) *
                                                      np.linalg.norm(b, axis=1))).min())
        row["ratio"] = row["radixserve_per_s"] / max(row["st_batch32_per_s"],
                                                     row["st_batch256_per_s"])

    print(f"model {args.model}, {args.threads} threads, best of {args.rounds}")
    print(f"{'workload':28} {'radixserve/s':>13} {'ST b32/s':>10} {'ST b256/s':>10} "
          f"{'ratio':>6} {'min cos':>9}")
    for name, row in results.items():
        print(f"{name:28} {row['radixserve_per_s']:13.1f} {row['st_batch32_per_s']:10.1f} "
              f"{row['st_batch256_per_s']:10.1f} {row['ratio']:6.2f} {row['min_cosine']:9.6f}")
    if args.out_file:
        pathlib.Path(args.out_file).write_text(json.dumps(results, indent=2))


if __name__ == "__main__":
    main()

#!/usr/bin/env python3
"""Embedding throughput: radixserve's /v1/embeddings against sentence-transformers (PyTorch, CPU)
and ONNX Runtime on the same model and machine, in one run (issue 19's performance target).

    $RADIX_TORCH_VENV/bin/python bench/embeddings.py [--model FOLDER] [--threads 2]
                                                     [--rounds 3] [--out-file F.json]

Two workloads, as the issue names them: 256 short sentences (corpus sentences, 3-60 tokens) and
32 documents of 512 tokens (corpus text joined and cut to the model's 512 positions by the
tokenizer). radixserve: the whole workload in one /v1/embeddings call to a server started with
--threads (its compute pool), after one warm-up call; sentence-transformers: SentenceTransformer.encode of the same texts with
torch.set_num_threads(--threads), batch_size 32 (its default) and 256, after one warm-up. Each
figure is the best of --rounds rounds (sentences/s); the ratio is radixserve / the faster
sentence-transformers setting. ONNX Runtime: the same transformer exported by torch.onnx, run
plain and after ORT's own BERT graph optimizer (fused attention, skip LayerNorm, bias GELU;
onnxruntime.transformers.optimizer), intra-op threads = --threads, batches of 32 and 256 padded
to their longest text, tokenization, mean pooling and normalization included; the ratio is then
taken against the fastest of every sentence-transformers and ONNX Runtime setting. No two of
them run at the same time. The outputs are compared too (cosine), so that the speed is of the
same computation.
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


def onnx_sessions(st, threads, workdir):
    """(name, session) for the exported transformer, plain and ORT-optimized."""
    import onnxruntime as ort
    import torch
    from onnxruntime.transformers.optimizer import optimize_model

    class Wrapped(torch.nn.Module):
        def __init__(self, inner):
            super().__init__()
            self.inner = inner

        def forward(self, input_ids, attention_mask, token_type_ids):
            return self.inner(input_ids=input_ids, attention_mask=attention_mask,
                              token_type_ids=token_type_ids).last_hidden_state

    cfg = st[0].auto_model.config
    model = Wrapped(st[0].auto_model.eval())
    plain = workdir / "model.onnx"
    enc = st.tokenizer(["a b c", "d"], padding=True, return_tensors="pt")
    names = ["input_ids", "attention_mask", "token_type_ids"]
    axes = {n: {0: "batch", 1: "seq"} for n in names}
    axes["last_hidden_state"] = {0: "batch", 1: "seq"}
    with torch.no_grad():
        torch.onnx.export(model, (enc["input_ids"], enc["attention_mask"], enc["token_type_ids"]),
                          str(plain), input_names=names, output_names=["last_hidden_state"],
                          dynamic_axes=axes, opset_version=17, dynamo=False)
    fused = workdir / "model_opt.onnx"
    optimize_model(str(plain), model_type="bert", num_heads=cfg.num_attention_heads,
                   hidden_size=cfg.hidden_size).save_model_to_file(str(fused))
    out = []
    for name, path in (("ort", plain), ("ort_opt", fused)):
        so = ort.SessionOptions()
        so.intra_op_num_threads = threads
        so.inter_op_num_threads = 1
        so.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
        out.append((name, ort.InferenceSession(str(path), so,
                                               providers=["CPUExecutionProvider"])))
    return out


def ort_encode(st, session, texts, batch):
    rows = []
    for i in range(0, len(texts), batch):
        enc = st.tokenizer(texts[i:i + batch], padding=True, truncation=True, max_length=512,
                           return_tensors="np")
        feeds = {k: enc[k].astype(np.int64) for k in ("input_ids", "attention_mask",
                                                      "token_type_ids")}
        hidden = session.run(None, feeds)[0]
        mask = feeds["attention_mask"][:, :, None].astype(np.float32)
        pooled = (hidden * mask).sum(1) / np.maximum(mask.sum(1), 1e-9)
        rows.append(pooled / np.maximum(np.linalg.norm(pooled, axis=1, keepdims=True), 1e-12))
    return np.concatenate(rows)


def cosine_min(a, b):
    return float(((a * b).sum(1) / (np.linalg.norm(a, axis=1) * np.linalg.norm(b, axis=1))).min())


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

    import tempfile
    with tempfile.TemporaryDirectory() as tmp:
        sessions = onnx_sessions(st, args.threads, pathlib.Path(tmp))
        for name, texts in sets.items():
            row = results[name]
            ours = row.pop("ours")
            peers = []
            for batch in (32, 256):
                def encode():
                    return st.encode(texts, batch_size=batch, convert_to_numpy=True)
                encode()
                seconds, theirs = best_of(args.rounds, encode)
                row[f"st_batch{batch}_per_s"] = len(texts) / seconds
                row[f"st_batch{batch}_min_cosine"] = cosine_min(ours, theirs)
                peers.append(f"st_batch{batch}_per_s")
                for label, session in sessions:
                    def run():
                        return ort_encode(st, session, texts, batch)
                    run()
                    seconds, theirs = best_of(args.rounds, run)
                    row[f"{label}_batch{batch}_per_s"] = len(texts) / seconds
                    row[f"{label}_batch{batch}_min_cosine"] = cosine_min(ours, theirs)
                    peers.append(f"{label}_batch{batch}_per_s")
            best = max(peers, key=lambda k: row[k])
            row["fastest_peer"] = best
            row["ratio"] = row["radixserve_per_s"] / row[best]
            row["min_cosine"] = min(v for k, v in row.items() if k.endswith("_min_cosine"))

    print(f"model {args.model}, {args.threads} threads, best of {args.rounds}")
    for name, row in results.items():
        print(f"{name}: radixserve {row['radixserve_per_s']:.1f}/s")
        for k, v in row.items():
            if k.endswith("_per_s") and k != "radixserve_per_s":
                print(f"  {k[:-6]:18} {v:8.1f}/s  min cosine {row[k[:-6] + '_min_cosine']:.6f}")
        print(f"  ratio to the fastest ({row['fastest_peer'][:-6]}): {row['ratio']:.2f}")
    if args.out_file:
        pathlib.Path(args.out_file).write_text(json.dumps(results, indent=2))


if __name__ == "__main__":
    main()

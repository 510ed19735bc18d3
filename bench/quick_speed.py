#!/usr/bin/env python3
"""Quick prefill and decode speed of one radixserve start (what bench/compare.py measures in
full, in a minute): starts `BINARY --model-path GGUF --threads 2 --mem-fraction-static 0.5
[EXTRA...]`, then twice: a 512-token prompt with max_new_tokens 1 (prefill tok/s = 512 / time),
and a 16-token prompt decoding 129 tokens minus the time of the same prompt with 1 token
(decode tok/s = 128 / difference). Greedy, ignore_eos, random token ids (seed 0).

    python bench/quick_speed.py BINARY GGUF [--depth D | --prefill-depth D] [EXTRA_ARGS...]

--depth D instead decodes 128 tokens after a D-token prompt (llama-bench's `-p 0 -n 128 -d D`):
the prompt and 129 new tokens streamed, decode tok/s = 128 / (time of the last event - time of
the first), twice, each with a fresh random prompt (no prefix-cache hit).

--prefill-depth D instead prefills a D-token prompt once (the radix cache keeps it) and then, twice,
the same prompt with 512 fresh tokens after it: prefill tok/s = 512 / time (llama-bench's
`-p 512 -n 0 -d D`). Give `--context-length` when the model's own context is shorter than D + 512.

One line per repetition. Radixserve's decode speed on some VMs depends on the start (see
docs/performance.md): compare several starts, alternating with the peer.
"""
import json
import random
import socket
import subprocess
import sys
import time
import urllib.request


def main():
    binary, model, extra = sys.argv[1], sys.argv[2], sys.argv[3:]
    depth = prefill_depth = None
    if extra[:1] == ["--depth"]:
        depth, extra = int(extra[1]), extra[2:]
    elif extra[:1] == ["--prefill-depth"]:
        prefill_depth, extra = int(extra[1]), extra[2:]
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    with open("/tmp/quick-speed-server.log", "w") as log:
        server = subprocess.Popen([binary, "--model-path", model, "--port", str(port), "--threads",
                                   "2", "--mem-fraction-static", "0.5", *extra],
                                  stdout=log, stderr=subprocess.STDOUT)
    url = f"http://127.0.0.1:{port}"
    try:
        for _ in range(600):
            try:
                urllib.request.urlopen(url + "/health", timeout=2)
                break
            except OSError:
                time.sleep(0.5)

        def generate(ids, n):
            body = json.dumps({"input_ids": ids, "sampling_params": {
                "max_new_tokens": n, "ignore_eos": True, "temperature": 0}}).encode()
            start = time.time()
            request = urllib.request.Request(url + "/generate", body,
                                             {"Content-Type": "application/json"})
            json.load(urllib.request.urlopen(request, timeout=600))
            return time.time() - start

        def decode_at_depth(ids, n):
            body = json.dumps({"input_ids": ids, "stream": True, "sampling_params": {
                "max_new_tokens": n, "ignore_eos": True, "temperature": 0}}).encode()
            request = urllib.request.Request(url + "/generate", body,
                                             {"Content-Type": "application/json"})
            stamps = []
            with urllib.request.urlopen(request, timeout=3600) as response:
                for line in response:
                    if line.startswith(b"data:") and not line.startswith(b"data: [DONE]"):
                        stamps.append(time.time())
            return (n - 1) / (stamps[-1] - stamps[0])

        random.seed(0)
        generate([random.randrange(100, 40000) for _ in range(16)], 8)  # warm-up
        if prefill_depth is not None:
            prefix = [random.randrange(100, 40000) for _ in range(prefill_depth)]
            generate(prefix, 1)
            for _ in range(2):
                ids = prefix + [random.randrange(100, 40000) for _ in range(512)]
                print(f"prefill512 at depth {prefill_depth}: {512 / generate(ids, 1):.1f} tok/s",
                      flush=True)
            return
        if depth is not None:
            for _ in range(2):
                ids = [random.randrange(100, 40000) for _ in range(depth)]
                print(f"decode at depth {depth}: {decode_at_depth(ids, 129):.1f} tok/s", flush=True)
            return
        for _ in range(2):
            prefill = generate([random.randrange(100, 40000) for _ in range(512)], 1)
            ids = [random.randrange(100, 40000) for _ in range(16)]
            decode = generate(ids, 129) - generate(ids[:8] + [5], 1)
            print(f"prefill512 {512 / prefill:.1f} tok/s; decode {128 / decode:.1f} tok/s",
                  flush=True)
    finally:
        server.terminate()
        server.wait()


if __name__ == "__main__":
    main()

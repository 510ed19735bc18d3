"""--kv-cache-dtype int8 (one byte per element plus one f32 scale per token and KV head) end to end
on SmolLM2: the startup log and /server_info report it, a token takes the bytes the layout says
(against the shape read from the GGUF file), greedy output does not depend on prefix reuse,
chunking or the disk tier (each token's row is quantized on its own), the pool does not leak;
LightLLM's --mode triton_int8kv / ppl_int8kv select it and --mode triton_fp8kv selects fp8_e4m3.
Accuracy against an fp16 KV cache is tests/oracle/model/test_kv_fp8_oracle.py's."""
import re
import subprocess
import time

import pytest
import requests

from server_util import BUILD, SMOLLM2, Server
from test_kv_dtype_auto import kv_row_bytes
from test_kv_fp8 import PROMPT, assert_cached_repeat, generate


def int8_bytes_per_token(path):
    """layers x 2 x kv_heads x (head_dim + 4): kv_row_bytes counts head_dim per KV head."""
    gguf = pytest.importorskip("gguf")
    reader = gguf.GGUFReader(str(path))
    arch = bytes(reader.fields["general.architecture"].parts[-1]).decode()
    layers = int(reader.fields[f"{arch}.block_count"].parts[-1][0])
    kv_heads = int(reader.fields[f"{arch}.attention.head_count_kv"].parts[-1][0])
    return kv_row_bytes(path) + layers * 2 * kv_heads * 4


def full_log(server):
    server.log.flush()
    return server.log_path.read_text(errors="replace")


@pytest.fixture(scope="module")
def model():
    if not SMOLLM2.exists():
        pytest.fail(f"{SMOLLM2} missing: run scripts/setup")
    return SMOLLM2


@pytest.fixture(scope="module")
def int8_text(model):
    """The greedy continuation with an int8 KV cache, prompt prefilled in one step, no cache."""
    server = Server(model, "--skip-server-warmup", "--kv-cache-dtype", "int8",
                    "--disable-radix-cache")
    try:
        return generate(server, PROMPT)["text"]
    finally:
        assert server.stop() == 0


def test_int8_serves_and_reports_its_dtype(model, int8_text):
    server = Server(model, "--skip-server-warmup", "--kv-cache-dtype", "int8",
                    "--chunked-prefill-size", "16")
    try:
        logs = full_log(server)
        assert "dtype: int8" in logs
        assert int(re.search(r"bytes/token=(\d+)", logs).group(1)) == int8_bytes_per_token(model)
        assert server.server_info()["kv_cache_dtype"] == "int8"
        first = generate(server, PROMPT)
        assert first["meta_info"]["completion_tokens"] == 24 and first["text"].strip()
        assert first["text"] == int8_text  # chunked prefill: the same codes
        assert_cached_repeat(server, first)
    finally:
        assert server.stop() == 0


def test_int8_holds_more_tokens_than_fp16_in_the_same_memory(model):
    """The pool is sized as memory / bytes per token (docs/kv_cache.md)."""
    per_token = {}
    for dtype in ("fp16", "int8"):
        server = Server(model, "--skip-server-warmup", "--kv-cache-dtype", dtype)
        try:
            per_token[dtype] = int(re.search(r"bytes/token=(\d+)", full_log(server)).group(1))
        finally:
            assert server.stop() == 0
    # SmolLM2's head_dim is 64: 2 bytes x 64 against 64 + 4 bytes per head.
    assert per_token["fp16"] / per_token["int8"] == pytest.approx(128 / 68)


def test_lightllm_int8kv_mode_selects_the_int8_cache(model, int8_text):
    server = Server(model, "--skip-server-warmup", "--mode", "triton_int8kv",
                    "triton_gqa_attention", "--disable-radix-cache")
    try:
        assert server.server_info()["kv_cache_dtype"] == "int8"
        assert generate(server, PROMPT)["text"] == int8_text
        logs = full_log(server)
        assert "--mode triton_gqa_attention selects a GPU attention kernel" in logs
        assert "--mode triton_int8kv" not in logs
    finally:
        assert server.stop() == 0
    server = Server(model, "--skip-server-warmup", "--mode", "triton_fp8kv")
    try:
        assert server.server_info()["kv_cache_dtype"] == "fp8_e4m3"
    finally:
        assert server.stop() == 0


@pytest.mark.parametrize("args", [["--mode", "ppl_int8kv", "--kv-cache-dtype", "fp8_e4m3"],
                                  ["--mode", "ppl_int8kv", "triton_fp8kv"]])
def test_conflicting_kv_modes_exit_2(model, args):
    proc = subprocess.run([str(BUILD / "radixserve"), "--model-path", str(model), *args],
                          capture_output=True, text=True, timeout=60)
    assert proc.returncode == 2, proc.stderr[-2000:]
    assert "--mode" in proc.stderr


def test_int8_blocks_come_back_from_the_disk_tier(model, tmp_path):
    """The disk tier stores rows as bytes, scales included: a prefix flushed from RAM and read
    back from disk gives the output it gave when it was computed."""
    # ~400 tokens: six whole 64-token blocks, above SGLang's 256-token prefetch threshold.
    text = " ".join([PROMPT] * 8)
    server = Server(model, "--skip-server-warmup", "--kv-cache-dtype", "int8",
                    "--enable-hierarchical-cache", "--hicache-storage-backend", "file",
                    "--hicache-storage-prefetch-policy", "wait_complete", "--page-size", "16",
                    env={"SGLANG_HICACHE_FILE_BACKEND_STORAGE_DIR": str(tmp_path)})
    try:
        first = generate(server, text)
        deadline = time.time() + 30
        while server.server_info()["internal_states"][0]["hicache_storage"]["stored_blocks"] < 6:
            assert time.time() < deadline, "blocks not stored"
            time.sleep(0.05)
        server.assert_no_leak()
        assert requests.post(server.url + "/flush_cache", timeout=30).status_code == 200
        out = generate(server, text)
        assert out["meta_info"]["cached_tokens_details"]["storage"] >= 256
        assert out["text"] == first["text"]
    finally:
        assert server.stop() == 0

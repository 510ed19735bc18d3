"""--kv-cache-dtype fp8_e4m3 / fp8_e5m2 end to end on SmolLM2: the startup log and /server_info
report the dtype, a token takes half the fp16 bytes (against the shape read from the GGUF file),
greedy generation works, prefix reuse and chunked prefill do not change the output, the KV pool
does not leak; --quantization-param-path loads SGLang's JSON scales and is refused with a
non-fp8_e4m3 dtype or a file that does not fit the model."""
import json
import re
import subprocess

import pytest
import requests

from server_util import BUILD, SMOLLM2, Server, free_port
from test_kv_dtype_auto import kv_row_bytes

PROMPT = ("The history of the printing press shows how a single invention can change the way "
          "people share ideas. Before movable type, books were copied by hand, which made them "
          "rare and expensive. When printers began to arrange small metal letters in frames,")


def generate(server, text, n=24):
    reply = requests.post(server.url + "/generate", timeout=120, json={
        "text": text, "sampling_params": {"max_new_tokens": n, "temperature": 0}})
    assert reply.status_code == 200, reply.text
    return reply.json()


def assert_cached_repeat(server, first):
    """The same prompt again finds it in the radix cache; stored codes read back the same
    whether written by this request or the last one, so greedy output cannot change."""
    second = generate(server, PROMPT)
    assert second["meta_info"]["cached_tokens"] > 0
    assert second["text"] == first["text"]
    server.assert_no_leak()


@pytest.fixture(scope="module")
def model():
    if not SMOLLM2.exists():
        pytest.fail(f"{SMOLLM2} missing: run scripts/setup")
    return SMOLLM2


@pytest.mark.parametrize("dtype,name", [("fp8_e4m3", "float8_e4m3fn"),
                                        ("fp8_e5m2", "float8_e5m2")])
def test_fp8_serves_and_reports_its_dtype(model, dtype, name):
    server = Server(model, "--skip-server-warmup", "--kv-cache-dtype", dtype,
                    "--chunked-prefill-size", "16")
    try:
        logs = server.logs()
        assert f"dtype: {name}" in logs
        assert int(re.search(r"bytes/token=(\d+)", logs).group(1)) == kv_row_bytes(model)
        assert server.server_info()["kv_cache_dtype"] == dtype
        first = generate(server, PROMPT)
        assert first["meta_info"]["completion_tokens"] == 24
        assert first["text"].strip()
        assert_cached_repeat(server, first)
    finally:
        assert server.stop() == 0
    if dtype != "fp8_e4m3":
        return
    # Without chunking (one prefill step) the stored codes, hence the output, are the same.
    server = Server(model, "--skip-server-warmup", "--kv-cache-dtype", dtype,
                    "--disable-radix-cache")
    try:
        assert generate(server, PROMPT)["text"] == first["text"]
    finally:
        assert server.stop() == 0


def test_quantization_param_path_scales(model, tmp_path):
    layers = 30  # SmolLM2-135M
    path = tmp_path / "kv_scales.json"
    path.write_text(json.dumps({"model_type": "llama", "kv_cache": {
        "dtype": "float8_e4m3fn",
        "scaling_factor": {"0": {str(i): 0.05 for i in range(layers)}}}}))
    server = Server(model, "--skip-server-warmup", "--kv-cache-dtype", "fp8_e4m3",
                    "--quantization-param-path", path)
    try:
        assert "per-layer scales from --quantization-param-path" in server.logs()
        assert generate(server, PROMPT, 8)["meta_info"]["completion_tokens"] == 8
    finally:
        assert server.stop() == 0


def run_cli(*args):
    return subprocess.run([str(BUILD / "radixserve"), "--model-path", str(SMOLLM2),
                           "--port", str(free_port()), "--skip-server-warmup", *map(str, args)],
                          capture_output=True, text=True, timeout=120)


def test_quantization_param_path_is_refused_when_it_cannot_apply(model, tmp_path):
    path = tmp_path / "kv_scales.json"
    path.write_text(json.dumps({"kv_cache": {"dtype": "float8_e4m3fn",
                                             "scaling_factor": {"0": {"0": 0.5}}}}))
    proc = run_cli("--kv-cache-dtype", "fp16", "--quantization-param-path", path)
    assert proc.returncode == 2
    assert "--quantization-param-path" in proc.stderr + proc.stdout
    # fp8_e4m3 but only layer 0 of 30: startup stops, naming the flag and the missing layer.
    proc = run_cli("--kv-cache-dtype", "fp8_e4m3", "--quantization-param-path", path)
    assert proc.returncode != 0
    out = proc.stderr + proc.stdout
    assert "--quantization-param-path" in out and "layer 1" in out

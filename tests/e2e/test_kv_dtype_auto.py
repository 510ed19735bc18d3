"""--kv-cache-dtype auto resolves to the model's data type (SGLang's rule): --dtype when given,
else the checkpoint's torch_dtype; for GGUF the F32/F16/BF16 file type, and fp16 (llama.cpp's
default KV type) for block-quantized files. Checked through the KV bytes per token the startup
log reports, against the shape read from the file with the `gguf` package."""
import re

import pytest
import requests

from server_util import SMOLLM2, STORIES, Server


def kv_row_bytes(path):
    """layers x 2 x kv_heads x head_dim, from the GGUF metadata."""
    gguf = pytest.importorskip("gguf")
    reader = gguf.GGUFReader(str(path))
    arch = bytes(reader.fields["general.architecture"].parts[-1]).decode()

    def value(key):
        return int(reader.fields[f"{arch}.{key}"].parts[-1][0])

    head_dim = value("embedding_length") // value("attention.head_count")
    if f"{arch}.attention.key_length" in reader.fields:
        head_dim = value("attention.key_length")
    return value("block_count") * 2 * value("attention.head_count_kv") * head_dim


def bytes_per_token(model, *args):
    server = Server(model, "--skip-server-warmup", *args)
    try:
        logs = server.logs()
    finally:
        assert server.stop() == 0
    match = re.search(r"bytes/token=(\d+)", logs)
    assert match, logs
    return int(match.group(1))


@pytest.mark.parametrize("model,args,element_bytes", [
    (SMOLLM2, (), 2),                                   # Q4_1 GGUF: fp16
    (SMOLLM2, ("--kv-cache-dtype", "fp32"), 4),
    (SMOLLM2, ("--dtype", "float32"), 4),               # auto follows --dtype
    (STORIES, (), 4),                                   # an all-F32 GGUF keeps fp32
], ids=["q4_1-auto", "q4_1-fp32", "q4_1-dtype-float32", "f32-gguf-auto"])
def test_auto_kv_dtype(model, args, element_bytes):
    if not model.exists():
        pytest.fail(f"{model} missing: run scripts/setup")
    assert bytes_per_token(model, *args) == kv_row_bytes(model) * element_bytes


def test_dtype_converts_weight_matrices_and_warns_about_activations():
    """--dtype bfloat16 on an all-F32 GGUF: the weight matrices are stored as bf16 (the load log's
    weight bytes drop to about half), the KV cache follows (2 bytes per element), a warning says
    activations stay float32, and the server still answers."""
    if not STORIES.exists():
        pytest.fail(f"{STORIES} missing")

    def start(*args):
        server = Server(STORIES, "--skip-server-warmup", *args)
        logs = server.logs()
        reply = requests.post(server.url + "/generate", timeout=60,
                              json={"text": "Once upon a time",
                                    "sampling_params": {"max_new_tokens": 4}})
        assert server.stop() == 0
        assert reply.status_code == 200, reply.text
        weight_mb = float(re.search(r"weight bytes=([0-9.]+) MB", logs).group(1))
        return logs, weight_mb, int(re.search(r"bytes/token=(\d+)", logs).group(1))

    logs32, mb32, kv32 = start()
    logs16, mb16, kv16 = start("--dtype", "bfloat16")
    assert "activations stay float32" not in logs32
    assert "activations stay float32" in logs16
    assert re.search(r"--dtype bfloat16: [1-9]\d* weight matrices converted", logs16)
    assert 0.45 * mb32 < mb16 < 0.75 * mb32  # norms and the rest stay f32
    assert kv16 * 2 == kv32

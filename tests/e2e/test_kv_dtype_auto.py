"""--kv-cache-dtype auto resolves to the model's data type (SGLang's rule): --dtype when given,
else the checkpoint's torch_dtype; for GGUF the F32/F16/BF16 file type, and fp16 (llama.cpp's
default KV type) for block-quantized files. Checked through the KV bytes per token the startup
log reports, against the shape read from the file with the `gguf` package."""
import re

import pytest

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

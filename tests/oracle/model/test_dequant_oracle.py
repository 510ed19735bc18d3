"""Dequantization of every supported GGUF block format against the `gguf` package's NumPy
implementation, on random blocks (scales kept finite), via radix_logits --dump-tensor."""
import json
import subprocess

import numpy as np
import pytest

from model_oracle_helpers import radix_logits_binary

gguf = pytest.importorskip("gguf")
from gguf.quants import dequantize  # noqa: E402

Q = gguf.GGMLQuantizationType
# type -> byte offsets of float16 scale fields inside one block
SCALE_FIELDS = {
    Q.Q8_0: [0], Q.Q4_0: [0], Q.Q5_0: [0], Q.Q4_1: [0, 2], Q.Q5_1: [0, 2],
    Q.Q4_K: [0, 2], Q.Q5_K: [0, 2], Q.Q6_K: [208], Q.F16: None, Q.BF16: None, Q.F32: None,
    Q.MXFP4: [],  # its scale is an exponent byte, set below
}


def random_tensor(qtype, rows, cols, rng):
    block, type_size = gguf.GGML_QUANT_SIZES[qtype]
    n_bytes = rows * cols // block * type_size
    raw = rng.integers(0, 256, size=n_bytes, dtype=np.uint8)
    if qtype == Q.F32:
        raw = rng.uniform(-2, 2, size=rows * cols).astype(np.float32).view(np.uint8)
    elif qtype == Q.F16:
        raw = rng.uniform(-2, 2, size=rows * cols).astype(np.float16).view(np.uint8)
    elif qtype == Q.BF16:
        f = rng.uniform(-2, 2, size=rows * cols).astype(np.float32)
        raw = (f.view(np.uint32) >> 16).astype(np.uint16).view(np.uint8)
    elif qtype == Q.MXFP4:
        blocks = raw.reshape(-1, type_size)
        # Exponents spread over the range whose products stay finite (2^(250 - 127) * 6), the
        # subnormal scales of 0 and 1 included.
        blocks[:, 0] = (np.arange(len(blocks)) * 37) % 251
        blocks[:3, 0] = [0, 1, 250]
        raw = blocks.reshape(-1)
    else:
        blocks = raw.reshape(-1, type_size)
        for off in SCALE_FIELDS[qtype]:
            scales = rng.uniform(-0.05, 0.05, size=len(blocks)).astype(np.float16)
            blocks[:, off:off + 2] = scales.view(np.uint8).reshape(-1, 2)
        raw = blocks.reshape(-1)
    return raw.reshape(rows, -1)


@pytest.mark.parametrize("qtype", list(SCALE_FIELDS), ids=lambda q: q.name)
def test_dequantize_matches_gguf_package(qtype, tmp_path):
    rng = np.random.default_rng(int(qtype) + 17)
    rows, cols = 3, 512
    raw = random_tensor(qtype, rows, cols, rng)
    path = tmp_path / "q.gguf"
    writer = gguf.GGUFWriter(str(path), "llama")
    writer.add_tensor("t", raw, raw_dtype=qtype)
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()
    expect = dequantize(raw, qtype).astype(np.float32).reshape(rows, cols)
    out = tmp_path / "t.f32"
    proc = subprocess.run([radix_logits_binary(), "--model", str(path), "--dump-tensor", "t",
                           "--out", str(out)], capture_output=True, text=True, check=False)
    assert proc.returncode == 0, proc.stderr
    assert json.loads(proc.stdout)["shape"] == [rows, cols]
    got = np.fromfile(out, dtype=np.float32).reshape(rows, cols)
    np.testing.assert_allclose(got, expect, rtol=1e-6, atol=1e-7)

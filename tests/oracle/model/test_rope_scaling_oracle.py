"""YaRN rope scaling: our inverse frequencies and attention factor against the published
formula (Peng et al. 2023, as transformers' _compute_yarn_parameters implements it), written
here in NumPy; GGUF yarn metadata against the HF rope_scaling form; and a yarn-scaled model's
logits against llama.cpp's own YaRN implementation on the same GGUF file."""
import json
import math
import subprocess

import numpy as np
import pytest

from model_oracle_helpers import STORIES_GGUF, STORIES_HF, radix_logits_binary, require, run_radix
from test_llama_oracle import STORY, llama_cpp_logits, tokenize


def yarn_reference(theta, dim, factor, original, beta_fast=32.0, beta_slow=1.0, mscale=None,
                   mscale_all_dim=None, attention_factor=None, truncate=True):
    """(inv_freq, attention_factor) from the YaRN formula, in float32 like transformers."""
    def correction_dim(rotations):
        return dim * math.log(original / (rotations * 2 * math.pi)) / (2 * math.log(theta))

    low, high = correction_dim(beta_fast), correction_dim(beta_slow)
    if truncate:
        low, high = math.floor(low), math.ceil(high)
    low, high = max(low, 0), min(high, dim - 1)
    if low == high:
        high += 0.001
    pos_freqs = np.float32(theta) ** (np.arange(0, dim, 2, dtype=np.float32) / np.float32(dim))
    extrapolation = np.float32(1.0) / pos_freqs
    interpolation = np.float32(1.0) / (np.float32(factor) * pos_freqs)
    ramp = np.clip((np.arange(dim // 2, dtype=np.float32) - low) / (high - low), 0, 1)
    keep = np.float32(1) - ramp.astype(np.float32)
    inv_freq = interpolation * (1 - keep) + extrapolation * keep

    def get_mscale(scale, m=1.0):
        return 1.0 if scale <= 1 else 0.1 * m * math.log(scale) + 1.0

    if attention_factor is None:
        if mscale and mscale_all_dim:
            attention_factor = get_mscale(factor, mscale) / get_mscale(factor, mscale_all_dim)
        else:
            attention_factor = get_mscale(factor)
    return inv_freq, attention_factor


def rope_info(model, override=None):
    cmd = [radix_logits_binary(), "--model", model, "--rope-info"]
    if override is not None:
        cmd += ["--json-model-override-args", json.dumps(override)]
    proc = subprocess.run(cmd, capture_output=True, text=True, check=False)
    assert proc.returncode == 0, proc.stderr
    return json.loads(proc.stdout)


# (hf config fields, rope_scaling) cases: head_dim 64 / 128, several bases, the mscale pair,
# an explicit attention_factor, no truncation, beta overrides.
CASES = [
    ({"hidden_size": 512, "num_attention_heads": 8, "rope_theta": 10000.0},
     {"rope_type": "yarn", "factor": 4.0, "original_max_position_embeddings": 4096}),
    ({"hidden_size": 1024, "num_attention_heads": 8, "rope_theta": 1000000.0},
     {"type": "yarn", "factor": 8.0, "original_max_position_embeddings": 32768,
      "beta_fast": 16, "beta_slow": 2}),
    ({"hidden_size": 1024, "num_attention_heads": 8, "rope_theta": 10000.0},
     {"rope_type": "yarn", "factor": 40.0, "original_max_position_embeddings": 4096,
      "mscale": 1.0, "mscale_all_dim": 0.707}),
    ({"hidden_size": 512, "num_attention_heads": 8, "rope_theta": 500000.0},
     {"rope_type": "yarn", "factor": 2.0, "original_max_position_embeddings": 8192,
      "attention_factor": 0.9, "truncate": False}),
]


@pytest.mark.parametrize("fields,scaling", CASES)
def test_yarn_inv_freq_and_attention_factor(fields, scaling):
    model = require(STORIES_HF)
    override = dict(fields, head_dim=fields["hidden_size"] // fields["num_attention_heads"],
                    max_position_embeddings=131072, rope_scaling=scaling)
    info = rope_info(model, override)
    dim = override["head_dim"]
    ref_inv, ref_attn = yarn_reference(
        fields["rope_theta"], dim, scaling["factor"], scaling["original_max_position_embeddings"],
        scaling.get("beta_fast", 32.0), scaling.get("beta_slow", 1.0), scaling.get("mscale"),
        scaling.get("mscale_all_dim"), scaling.get("attention_factor"),
        scaling.get("truncate", True))
    ours = np.array(info["inv_freq"], dtype=np.float32)
    assert info["rotary_dim"] == dim
    np.testing.assert_allclose(ours, ref_inv, rtol=2e-6)
    assert info["attention_factor"] == pytest.approx(ref_attn, rel=1e-12)
    # The ramp really mixes: the highest frequency stays, the lowest is divided by the factor.
    assert ours[0] == pytest.approx(1.0, rel=1e-6)
    plain = 1.0 / fields["rope_theta"] ** ((dim - 2) / dim)
    assert ours[-1] == pytest.approx(plain / scaling["factor"], rel=1e-5)


def test_yarn_without_factor_uses_context_ratio():
    """transformers: no factor means max_position_embeddings / original_max_position_embeddings."""
    model = require(STORIES_HF)
    info = rope_info(model, {"max_position_embeddings": 16384, "rope_scaling": {
        "rope_type": "yarn", "factor": None, "original_max_position_embeddings": 4096}})
    ref_inv, ref_attn = yarn_reference(10000.0, 8, 4.0, 4096)
    np.testing.assert_allclose(np.array(info["inv_freq"], dtype=np.float32), ref_inv, rtol=2e-6)
    assert info["attention_factor"] == pytest.approx(ref_attn)


def _stories_with_yarn(tmp_path, factor, original):
    """stories260K GGUF with llama.cpp's yarn metadata keys added."""
    gguf = pytest.importorskip("gguf")
    from gguf.scripts.gguf_new_metadata import MetadataDetails, copy_with_new_metadata

    src = require(STORIES_GGUF)
    out = tmp_path / "stories260K-yarn.gguf"
    reader = gguf.GGUFReader(src, "r")
    arch = reader.fields["general.architecture"].contents()
    writer = gguf.GGUFWriter(str(out), arch=arch, endianess=reader.endianess)
    T = gguf.GGUFValueType
    new = {
        f"{arch}.rope.scaling.type": MetadataDetails(T.STRING, "yarn"),
        f"{arch}.rope.scaling.factor": MetadataDetails(T.FLOAT32, float(factor)),
        f"{arch}.rope.scaling.original_context_length": MetadataDetails(T.UINT32, original),
    }
    copy_with_new_metadata(reader, writer, new, [])
    return str(out)


def test_gguf_yarn_metadata_equals_hf_rope_scaling(tmp_path):
    model = _stories_with_yarn(tmp_path, 4.0, 128)
    hf = require(STORIES_HF)
    a = rope_info(model)
    b = rope_info(hf, {"rope_scaling": {"rope_type": "yarn", "factor": 4.0,
                                        "original_max_position_embeddings": 128}})
    assert a == b
    assert a["attention_factor"] == pytest.approx(0.1 * math.log(4.0) + 1.0)


def test_yarn_model_matches_llama_cpp(tmp_path):
    """llama.cpp applies YaRN inside its rope op (ramp, interpolation, mscale on cos/sin)."""
    model = _stories_with_yarn(tmp_path, 4.0, 128)
    tokens = tokenize(model, STORY)
    ref = llama_cpp_logits(model, tokens, 512)
    ours = run_radix(model, tokens, tmp_path, "--threads", "2")
    plain = run_radix(require(STORIES_GGUF), tokens, tmp_path, "--threads", "2")
    max_diff = np.abs(ours - ref).max()
    print(f"stories260K yarn x4: {len(tokens)} tokens, max |dlogit| {max_diff:.2e}, "
          f"vs unscaled {np.abs(plain - ref).max():.2e}")
    assert np.abs(plain - ref).max() > 100 * max_diff  # the scaling is visible
    assert (ours.argmax(-1) == ref.argmax(-1)).mean() == 1.0
    assert max_diff < 1e-3

"""DeepSeek-V3's multi-token-prediction (NextN) block, the draft of --speculative-algorithm NEXTN,
against llama.cpp's own MTP graph on the same random-weight file (deepseek_checkpoint.py with
mtp=True; mtp_reference.py drives llama.cpp's MTP context as its speculative driver does): entry q
pairs token q with the main model's output-normed hidden state of position q - 1 (zeros at 0), and
its logits at every position of a 481-token prompt must match, fed whole and in chunks (the block
keeps its own latent KV cache). The main model's hidden states are compared too, and the block's
logits from the HF form of the same weights (model.layers.L.* as the real V3 checkpoint names it)
and from a Q8_0 file.

Only the "v3" variant: llama.cpp's MTP graph needs a compressed query (q_lora_rank > 0)."""
import json
import subprocess

import numpy as np
import pytest

from deepseek_checkpoint import dequantized, write_gguf, write_hf
from model_oracle_helpers import log_softmax, radix_logits_binary
from mtp_reference import llama_cpp_mtp
from test_deepseek_oracle import compare
from test_llama_oracle import STORY, llama_cpp_logits, tokenize

SEED = 7


def radix_mtp(model, tokens, tmp_path, *extra):
    """(logits, hidden, mtp_logits) from radix_logits over the teacher-forced tokens."""
    files = {k: tmp_path / f"{k}.f32" for k in ("logits", "hidden", "mtp")}
    tokens_file = tmp_path / "tokens.txt"
    tokens_file.write_text(",".join(str(t) for t in tokens))
    proc = subprocess.run(
        [radix_logits_binary(), "--model", str(model), "--tokens-file", str(tokens_file),
         "--threads", "2", "--logits-out", str(files["logits"]), "--hidden-out",
         str(files["hidden"]), "--mtp-logits-out", str(files["mtp"]), *extra],
        capture_output=True, text=True, check=False)
    assert proc.returncode == 0, proc.stderr
    report = json.loads(proc.stdout)
    n, vocab, hidden = report["n_tokens"], report["n_vocab"], report["n_hidden"]
    read = lambda k, w: np.fromfile(files[k], dtype=np.float32).reshape(n, w)  # noqa: E731
    return read("logits", vocab), read("hidden", hidden), read("mtp", vocab)


@pytest.fixture(scope="module")
def v3(tmp_path_factory):
    folder = tmp_path_factory.mktemp("mtp")
    model = folder / "deepseek-v3-mtp.gguf"
    w = write_gguf(str(model), "F32", seed=SEED, variant="v3", mtp=True)
    tokens = tokenize(str(model), STORY)
    h, mtp = llama_cpp_mtp(model, tokens)
    return {"model": model, "weights": w, "tokens": tokens, "h": h, "mtp": mtp,
            "folder": folder}


@pytest.mark.parametrize("chunk", [0, 37])
def test_mtp_block_matches_llama_cpp(v3, tmp_path, chunk):
    extra = ["--chunk", str(chunk)] if chunk else []
    logits, hidden, mtp = radix_mtp(v3["model"], v3["tokens"], tmp_path, *extra)
    compare(hidden, v3["h"], "deepseek v3 hidden states", max_abs=1e-4)
    compare(mtp, v3["mtp"], f"deepseek v3 MTP logits (chunk {chunk or 'all'})")
    # The main model is untouched by the block (its logits are llama.cpp's on the same file).
    compare(logits, llama_cpp_logits(str(v3["model"]), v3["tokens"], 512), "deepseek v3 logits")
    # The block is not the main head: its predictions differ from the main model's.
    assert (mtp.argmax(-1) != logits.argmax(-1)).mean() > 0.5


def test_mtp_hf_form_matches_llama_cpp(v3, tmp_path):
    """model.layers.L.{enorm, hnorm, eh_proj, shared_head.*, embed_tokens} and the layer's own
    tensors, read from the HF folder, compute llama.cpp's block on the GGUF of the same weights."""
    hf = tmp_path / "hf"
    write_hf(str(hf), v3["weights"], "v3")
    _, hidden, mtp = radix_mtp(hf, v3["tokens"], tmp_path)
    compare(hidden, v3["h"], "deepseek v3 HF hidden states", max_abs=1e-4)
    compare(mtp, v3["mtp"], "deepseek v3 HF MTP logits")


def test_mtp_own_embedding_and_head(tmp_path):
    """A block with its own embed_tokens and shared_head_head (llama.cpp prefers them)."""
    model = tmp_path / "deepseek-v3-mtp-own.gguf"
    write_gguf(str(model), "F32", seed=SEED, variant="v3", mtp=True, mtp_own_head=True)
    tokens = tokenize(str(model), STORY)
    _, ref = llama_cpp_mtp(model, tokens)
    _, _, mtp = radix_mtp(model, tokens, tmp_path)
    compare(mtp, ref, "deepseek v3 MTP logits, own embedding and head")


def test_mtp_q8_0_matches_llama_cpp(tmp_path):
    """Q8_0 matrices meet Q8_0-rounded activations as in llama.cpp. Where the main model's router
    picked another expert on a rounding tie (test_deepseek_oracle's Q8_0 test allows those), the
    state entering the block differs by O(1), and so do the block's logits at the next entry:
    those rows belong to the main model's verdict. Elsewhere the block meets the rounding bound:
    confident rows agree and the log-probabilities stay close; the block's logits are flat (median
    top-two gap 0.21), so int8 rounding alone reorders its top-1 often (llama.cpp's own Q8_0 file
    against its decoded F32 file: 86 % agreement), hence 90 % rather than the main model's 97 %.
    With exact float activations it computes llama.cpp's block on the decoded F32 file."""
    model = tmp_path / "deepseek-v3-mtp-q8_0.gguf"
    w = write_gguf(str(model), "Q8_0", seed=SEED, variant="v3", mtp=True)
    tokens = tokenize(str(model), STORY)
    h_ref, ref = llama_cpp_mtp(model, tokens)
    _, h, mtp = radix_mtp(model, tokens, tmp_path)
    state_diff = np.r_[0.0, np.abs(h - h_ref).max(-1)[:-1]]
    kept = state_diff < 0.1
    top1 = mtp.argmax(-1) == ref.argmax(-1)
    top2 = np.sort(ref, axis=-1)[:, -2:]
    confident = (top2[:, 1] - top2[:, 0] >= 0.5) & kept
    nxt = np.array(tokens[1:])
    lp = lambda l: log_softmax(l[:-1])[np.arange(len(nxt)), nxt]  # noqa: E731
    dlp = np.abs(lp(mtp) - lp(ref))[kept[:-1]].mean()
    print(f"deepseek v3 Q8_0 MTP logits: {kept.sum()} of {len(kept)} rows with the same state, "
          f"top-1 {top1[kept].mean():.4f} (all rows {top1.mean():.4f}), mean |dlogprob| "
          f"{dlp:.4f}, confident {confident.sum()} disagree {(~top1[confident]).sum()}")
    assert kept.mean() >= 0.9
    assert top1[kept].mean() >= 0.9
    assert dlp < 0.05
    assert (~top1[confident]).sum() <= 1  # the block's own router (see the main test)
    decoded = tmp_path / "deepseek-v3-mtp-decoded.gguf"
    write_gguf(str(decoded), "F32", variant="v3", weights=dequantized(w, "Q8_0"))
    _, ref_decoded = llama_cpp_mtp(decoded, tokens)
    _, _, exact = radix_mtp(model, tokens, tmp_path, "--exact-activations")
    compare(exact, ref_decoded, "deepseek v3 Q8_0 MTP logits, exact activations")


def test_mtp_refused_without_a_block(tmp_path):
    model = tmp_path / "deepseek-v3.gguf"
    write_gguf(str(model), "F32", seed=SEED, variant="v3")
    tokens_file = tmp_path / "tokens.txt"
    tokens_file.write_text("1,2,3")
    proc = subprocess.run(
        [radix_logits_binary(), "--model", str(model), "--tokens-file", str(tokens_file),
         "--mtp-logits-out", str(tmp_path / "mtp.f32")], capture_output=True, text=True)
    assert proc.returncode != 0
    assert "no multi-token-prediction block" in proc.stderr, proc.stderr

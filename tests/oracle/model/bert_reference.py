"""An independent BERT sentence embedder in NumPy (float32 products, float64 LayerNorm and
pooling), written from the HF BertModel definition and the sentence-transformers Pooling /
Normalize modules, reading the model folder's safetensors, config.json, modules.json and
1_Pooling/config.json. No torch, no radixserve code.
Shared by the model oracle and the embedding route tests."""
import json
import math
import os

# Many small matrix products: OpenBLAS's threads only fight each other (and the server under
# test) on a small machine. Read when NumPy loads OpenBLAS, so import this module first.
os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")

import numpy as np  # noqa: E402

MODELS = os.environ.get("RADIX_MODELS_DIR", "/root/.cache/radixserve/models")
MINILM = os.path.join(MODELS, "all-MiniLM-L6-v2")
CORPUS = os.path.join(os.path.dirname(os.path.abspath(__file__)), "../../data/embedding_corpus.json")


def load_corpus():
    with open(CORPUS, encoding="utf-8") as f:
        return json.load(f)


def hf_tokenizer(folder):
    """HF `tokenizers` with the file's fixed padding / truncation turned off (BERT folders often
    pad to 128), so ids are those of the text alone."""
    from tokenizers import Tokenizer

    tok = Tokenizer.from_file(os.path.join(folder, "tokenizer.json"))
    tok.no_padding()
    tok.no_truncation()
    return tok


def _erf(x):
    """erf to within 1.5e-7 (Abramowitz & Stegun 7.1.26), vectorized: math.erf per element is
    minutes on a corpus. That error is far below what separates HF's erf GELU from the tanh
    approximation (up to ~1e-3), which the cosine bound of the tests would notice."""
    t = 1.0 / (1.0 + 0.3275911 * np.abs(x))
    poly = t * (0.254829592 + t * (-0.284496736 + t * (1.421413741 + t * (-1.453152027 +
                                                                          t * 1.061405429))))
    return np.sign(x) * (1.0 - poly * np.exp(-x * x))


class NumpyBert:
    def __init__(self, folder):
        from safetensors.numpy import load_file

        with open(os.path.join(folder, "config.json")) as f:
            self.config = json.load(f)
        raw = load_file(os.path.join(folder, "model.safetensors"))
        self.w = {k.removeprefix("bert."): v.astype(np.float32) for k, v in raw.items()}
        # Linear layers as x @ W^T with W^T stored contiguously (much faster in NumPy).
        self.wt = {k: np.ascontiguousarray(v.T) for k, v in self.w.items()
                   if k.startswith("encoder.") and v.ndim == 2}
        self.mode, self.normalize = self._pooling(folder)

    @staticmethod
    def _pooling(folder):
        with open(os.path.join(folder, "modules.json")) as f:
            modules = json.load(f)
        mode, normalize = None, False
        for m in modules:
            if m["type"].endswith(".Pooling"):
                with open(os.path.join(folder, m["path"], "config.json")) as f:
                    p = json.load(f)
                if p.get("pooling_mode_mean_tokens"):
                    mode = "mean"
                elif p.get("pooling_mode_cls_token"):
                    mode = "cls"
                elif p.get("pooling_mode_lasttoken"):
                    mode = "lasttoken"
            if m["type"].endswith(".Normalize"):
                normalize = True
        return mode, normalize

    def _layer_norm(self, x, prefix):
        eps = self.config["layer_norm_eps"]
        x = x.astype(np.float64)
        mean = x.mean(-1, keepdims=True)
        var = ((x - mean) ** 2).mean(-1, keepdims=True)
        y = (x - mean) / np.sqrt(var + eps) * self.w[prefix + ".weight"] + self.w[prefix + ".bias"]
        return y.astype(np.float32)

    def _linear(self, x, prefix):
        return x @ self.wt[prefix + ".weight"] + self.w[prefix + ".bias"]

    def hidden_states(self, ids):
        w, c = self.w, self.config
        n = len(ids)
        x = (w["embeddings.word_embeddings.weight"][ids] +
             w["embeddings.position_embeddings.weight"][:n] +
             w["embeddings.token_type_embeddings.weight"][0])
        x = self._layer_norm(x, "embeddings.LayerNorm")
        heads = c["num_attention_heads"]
        hd = c["hidden_size"] // heads
        for i in range(c["num_hidden_layers"]):
            p = f"encoder.layer.{i}."
            q = self._linear(x, p + "attention.self.query").reshape(n, heads, hd).transpose(1, 0, 2)
            k = self._linear(x, p + "attention.self.key").reshape(n, heads, hd).transpose(1, 0, 2)
            v = self._linear(x, p + "attention.self.value").reshape(n, heads, hd).transpose(1, 0, 2)
            s = q @ k.transpose(0, 2, 1) / math.sqrt(hd)
            s = np.exp(s - s.max(-1, keepdims=True))
            s /= s.sum(-1, keepdims=True)
            a = (s @ v).transpose(1, 0, 2).reshape(n, heads * hd)
            x = self._layer_norm(x + self._linear(a, p + "attention.output.dense"),
                                 p + "attention.output.LayerNorm")
            h = self._linear(x, p + "intermediate.dense")
            h = 0.5 * h * (1.0 + _erf(h / math.sqrt(2.0)))
            x = self._layer_norm(x + self._linear(h, p + "output.dense"), p + "output.LayerNorm")
        return x

    def embed(self, ids):
        h = self.hidden_states(ids).astype(np.float64)
        e = {"mean": h.mean(0), "cls": h[0], "lasttoken": h[-1]}[self.mode]
        if self.normalize:
            e = e / max(np.linalg.norm(e), 1e-12)
        return e


def cosines(a, b):
    a = np.asarray(a, dtype=np.float64)
    b = np.asarray(b, dtype=np.float64)
    return (a * b).sum(-1) / (np.linalg.norm(a, axis=-1) * np.linalg.norm(b, axis=-1))

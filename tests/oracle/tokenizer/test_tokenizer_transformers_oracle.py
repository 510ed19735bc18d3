"""Our tokenizer against transformers' AutoTokenizer (what SGLang tokenizes with) for the
tokenizers that ship a tokenizer_config.json: BOS/EOS per add_bos_token / add_eos_token, and
transformers' own decode. A spread-out subset of the corpus keeps this quick.

transformers 5 rebuilds SentencePiece-style classes (LlamaTokenizer, GemmaTokenizer) from the
vocabulary with its own pre-tokenizer instead of the file's normalizer, which changes leading
space handling; SGLang's transformers 4.x and HF `tokenizers` use the file as written. Those
classes are covered by test_tokenizer_json_oracle.py (HF `tokenizers` on the same file) only."""

import pytest
from tokenizer_oracle_util import JSON_TOKENIZERS, RadixTokenize, mismatch_report

transformers = pytest.importorskip("transformers")


@pytest.fixture(scope="module", params=sorted(JSON_TOKENIZERS))
def pair(request):
    path = JSON_TOKENIZERS[request.param]
    if not (path.parent / "tokenizer_config.json").exists():
        pytest.skip(f"no tokenizer_config.json beside {path}")
    ref = transformers.AutoTokenizer.from_pretrained(str(path.parent))
    rebuilt = ("LlamaTokenizer", "GemmaTokenizer")
    if int(transformers.__version__.split(".")[0]) >= 5 and type(ref).__name__ in rebuilt:
        pytest.skip(f"by design: transformers {transformers.__version__} rebuilds "
                    f"{type(ref).__name__}")
    ours = RadixTokenize(path)
    yield ref, ours
    ours.close()


def test_encode_and_decode_like_auto_tokenizer(pair, corpus):
    ref, ours = pair
    texts = [c["text"] for c in corpus[::7]]
    theirs = [ref.encode(t) for t in texts]
    bad, report = mismatch_report(texts, ours.encode(texts), theirs)
    assert not bad, report
    for skip in (True, False):
        want = [ref.decode(ids, skip_special_tokens=skip) for ids in theirs]
        bad, report = mismatch_report(texts, ours.decode(theirs, skip_special_tokens=skip), want)
        assert not bad, report

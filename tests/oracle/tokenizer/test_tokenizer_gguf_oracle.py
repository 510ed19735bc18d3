"""GGUF vocabularies (tokenizer.ggml.*) against independent references:
llama.cpp (llama-cpp-python, the GGUF format's own runtime) when installed; the model's original
HF tokenizer.json where we have it (stories260K); transformers' GGUF conversion for decoding."""

import pytest
from tokenizer_oracle_util import GGUF_TOKENIZERS, JSON_TOKENIZERS, RadixTokenize, mismatch_report
from tokenizer_gguf_reference import llama_cpp_vocab, transformers_gguf_tokenizer

tokenizers = pytest.importorskip("tokenizers")


@pytest.fixture(scope="module", params=sorted(GGUF_TOKENIZERS))
def gguf(request):
    path = GGUF_TOKENIZERS[request.param]
    if not path.exists():
        pytest.skip(f"{path} missing")
    ours = RadixTokenize(path)
    yield request.param, path, ours
    ours.close()


def test_encode_matches_llama_cpp(gguf, corpus):
    name, path, ours = gguf
    llm = llama_cpp_vocab(path)
    if llm is None:
        pytest.skip("llama-cpp-python not installed")
    texts = [c["text"] for c in corpus]
    for add_special in (True, False):
        theirs = [llm.tokenize(t.encode("utf-8"), add_bos=add_special, special=True) for t in texts]
        got = ours.encode(texts, add_special_tokens=add_special)
        bad, report = mismatch_report(texts, got, theirs)
        assert not bad, report
    theirs = [llm.tokenize(t.encode("utf-8"), add_bos=False, special=False) for t in texts]
    got = ours.encode(texts, add_special_tokens=False, parse_special=False)
    bad, report = mismatch_report(texts, got, theirs)
    assert not bad, report


def test_special_ids_match_llama_cpp(gguf):
    """BOS and the end-of-generation set (EOS, EOT, text-detected markers) as llama.cpp sees them."""
    name, path, ours = gguf
    llm = llama_cpp_vocab(path)
    if llm is None:
        pytest.skip("llama-cpp-python not installed")
    import llama_cpp

    vocab = llama_cpp.llama_model_get_vocab(llm._model.model)
    eog = sorted(i for i in range(llm.n_vocab()) if llama_cpp.llama_vocab_is_eog(vocab, i))
    info = ours.run([{"op": "info"}])[0]
    assert info["vocab_size"] == llm.n_vocab()
    assert info["bos_id"] == llm.token_bos()
    assert sorted(info["eos_ids"]) == eog
    assert info["eos_ids"][0] == llm.token_eos()


def test_stories260k_gguf_matches_its_tokenizer_json(corpus):
    gguf_path = GGUF_TOKENIZERS["stories260K_gguf"]
    json_path = JSON_TOKENIZERS["stories260K"]
    if not gguf_path.exists() or not json_path.exists():
        pytest.skip("stories260K files missing")
    ref = tokenizers.Tokenizer.from_file(str(json_path))
    ours = RadixTokenize(gguf_path)
    try:
        texts = [c["text"] for c in corpus]
        for add_special in (True, False):
            theirs = [e.ids for e in ref.encode_batch(texts, add_special_tokens=add_special)]
            got = ours.encode(texts, add_special_tokens=add_special)
            bad, report = mismatch_report(texts, got, theirs)
            assert not bad, report
        ids = [e.ids for e in ref.encode_batch(texts)]
        for skip in (True, False):
            bad, report = mismatch_report(texts, ours.decode(ids, skip_special_tokens=skip),
                                          ref.decode_batch(ids, skip_special_tokens=skip))
            assert not bad, report
    finally:
        ours.close()


def test_smollm2_gguf_matches_hf_pipeline(corpus):
    """SmolLM2's published tokenizer.json splits digits individually before byte-level BPE;
    transformers' GGUF conversion keeps the vocabulary and merges but drops that split, so the
    reference is the converted tokenizer with SmolLM2's pre-tokenizer restored."""
    path = GGUF_TOKENIZERS["smollm2_gguf"]
    if not path.exists():
        pytest.skip(f"{path} missing")
    ref, _ = transformers_gguf_tokenizer(path)
    ref.pre_tokenizer = tokenizers.pre_tokenizers.Sequence([
        tokenizers.pre_tokenizers.Digits(individual_digits=True),
        tokenizers.pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=True)])
    ours = RadixTokenize(path)
    try:
        texts = [c["text"] for c in corpus]
        theirs = [e.ids for e in ref.encode_batch(texts, add_special_tokens=False)]
        bad, report = mismatch_report(texts, ours.encode(texts, add_special_tokens=False), theirs)
        assert not bad, report
    finally:
        ours.close()


@pytest.mark.parametrize("skip_special", [True, False])
def test_decode_and_stream_match_transformers(gguf, corpus, skip_special):
    """Text assembly as transformers' converted tokenizer (what SGLang decodes GGUF models with).
    Which tokens skip_special_tokens drops follows llama.cpp's token classes (control and unknown,
    including the markers it promotes by their spelling), as for encoding."""
    name, path, ours = gguf
    ref, _ = transformers_gguf_tokenizer(path)
    texts = [c["text"] for c in corpus]
    ids = ours.encode(texts)
    if skip_special:
        llm = llama_cpp_vocab(path)
        if llm is None:
            pytest.skip("llama-cpp-python not installed")
        import llama_cpp

        mask = llama_cpp.LLAMA_TOKEN_ATTR_CONTROL | llama_cpp.LLAMA_TOKEN_ATTR_UNKNOWN
        hidden = {i for i in {t for seq in ids for t in seq} if llm._model.token_get_attr(i) & mask}
        theirs = ref.decode_batch([[i for i in seq if i not in hidden] for seq in ids],
                                  skip_special_tokens=False)
    else:
        theirs = ref.decode_batch(ids, skip_special_tokens=False)
    got = ours.decode(ids, skip_special_tokens=skip_special)
    bad, report = mismatch_report(texts, got, theirs)
    assert not bad, report
    streamed = [r["text"] for r in ours.stream(ids, skip_special_tokens=skip_special)]
    bad, report = mismatch_report(texts, streamed, got)
    assert not bad, report


def relabelled_vocab(path, pre, out, renamed=None):
    """A vocabulary-only GGUF: every key of `path` but tokenizer.ggml.pre, which becomes `pre`,
    so one byte-level vocabulary exercises each pre-tokenizer llama.cpp knows by that name; the
    tokens at the ids of `renamed` (id -> text) are renamed."""
    import gguf
    src = gguf.GGUFReader(str(path))
    writer = gguf.GGUFWriter(str(out), arch="llama")
    for name, field in src.fields.items():
        if name.startswith("GGUF.") or name == "general.architecture":
            continue
        if name == "tokenizer.ggml.pre":
            writer.add_string(name, pre)
        elif name == "tokenizer.ggml.tokens":
            tokens = list(field.contents())
            for i, t in (renamed or {}).items():
                tokens[i] = t
            writer.add_array(name, tokens)
        elif field.types[0] == gguf.GGUFValueType.ARRAY:
            writer.add_array(name, field.contents())
        else:
            writer.add_key_value(name, field.contents(), field.types[0])
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()


@pytest.mark.parametrize("pre", ["gpt-4o", "qwen2", "llama-bpe", "deepseek-v3", "deepseek-llm",
                                 "deepseek-coder", "gpt-2"])
def test_pre_tokenizers_match_llama_cpp(pre, corpus, tmp_path):
    """SmolLM2's byte-level vocabulary under each tokenizer.ggml.pre name (gpt-4o: gpt-oss's
    o200k splitting), against llama.cpp's tokenization of the same file."""
    path = GGUF_TOKENIZERS["smollm2_gguf"]
    if not path.exists():
        pytest.skip(f"{path} missing")
    out = tmp_path / f"vocab-{pre}.gguf"
    relabelled_vocab(path, pre, out)
    llm = llama_cpp_vocab(out)
    if llm is None:
        pytest.skip("llama-cpp-python not installed")
    texts = [c["text"] for c in corpus]
    theirs = [llm.tokenize(t.encode("utf-8"), add_bos=False, special=False) for t in texts]
    ours = RadixTokenize(out)
    try:
        got = ours.encode(texts, add_special_tokens=False, parse_special=False)
    finally:
        ours.close()
    bad, report = mismatch_report(texts, got, theirs)
    assert not bad, report


def test_harmony_markers_match_llama_cpp(tmp_path):
    """gpt-oss's harmony tokens (some of SmolLM2's control tokens renamed, pre gpt-4o): llama.cpp
    renders <|start|>, <|channel|>, <|message|> (and <|end|>, which no longer ends generation
    once <|return|> and <|call|> do) even when skipping special tokens; same EOG set, same ids."""
    path = GGUF_TOKENIZERS["smollm2_gguf"]
    if not path.exists():
        pytest.skip(f"{path} missing")
    renamed = {10: "<|end|>", 11: "<|return|>", 12: "<|call|>", 13: "<|start|>",
               14: "<|channel|>", 15: "<|message|>", 16: "<|constrain|>"}
    out = tmp_path / "vocab-harmony.gguf"
    relabelled_vocab(path, "gpt-4o", out, renamed)
    llm = llama_cpp_vocab(out)
    if llm is None:
        pytest.skip("llama-cpp-python not installed")
    import llama_cpp
    vocab = llama_cpp.llama_model_get_vocab(llm._model.model)
    eog = sorted(i for i in range(llm.n_vocab()) if llama_cpp.llama_vocab_is_eog(vocab, i))
    ours = RadixTokenize(out)
    try:
        info = ours.run([{"op": "info"}])[0]
        assert sorted(info["eos_ids"]) == eog
        assert 10 not in eog
        text = ("<|start|>assistant<|channel|>analysis<|message|>Think.<|end|><|start|>assistant"
                "<|channel|>final<|constrain|>json<|message|>Hi<|return|>")
        for special in (True, False):
            theirs = llm.tokenize(text.encode(), add_bos=False, special=special)
            assert ours.encode([text], add_special_tokens=False,
                               parse_special=special)[0] == theirs
        ids = llm.tokenize(text.encode(), add_bos=False, special=True)
        for skip in (True, False):
            theirs = llm.detokenize(ids, special=not skip).decode()
            assert ours.decode([ids], skip_special_tokens=skip)[0] == theirs, skip
    finally:
        ours.close()

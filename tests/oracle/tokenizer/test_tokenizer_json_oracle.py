"""Our tokenizer against HF `tokenizers` (the Rust library transformers' fast tokenizers use) on
every tokenizer.json we can get: exact ids, decode, round trip and streaming detokenization."""

import pytest
from tokenizer_oracle_util import JSON_TOKENIZERS, RadixTokenize, mismatch_report

tokenizers = pytest.importorskip("tokenizers")


@pytest.fixture(scope="module", params=sorted(JSON_TOKENIZERS))
def pair(request):
    path = JSON_TOKENIZERS[request.param]
    if not path.exists():
        pytest.skip(f"{path} missing")
    ours = RadixTokenize(path)
    ref = tokenizers.Tokenizer.from_file(str(path))
    ref.no_padding()  # a serving tokenizer neither pads nor truncates (MiniLM's file does both)
    ref.no_truncation()
    yield ref, ours
    ours.close()


def test_encode_ids_equal(pair, corpus):
    ref, ours = pair
    texts = [c["text"] for c in corpus]
    for add_special in (True, False):
        theirs = [e.ids for e in ref.encode_batch(texts, add_special_tokens=add_special)]
        got = ours.encode(texts, add_special_tokens=add_special)
        bad, report = mismatch_report(texts, got, theirs)
        assert not bad, report


def test_encode_without_special_parsing(pair, corpus):
    ref, ours = pair
    texts = [c["text"] for c in corpus if c["kind"] in ("special", "fixed")]
    ref.encode_special_tokens = True
    try:
        theirs = [e.ids for e in ref.encode_batch(texts, add_special_tokens=False)]
    finally:
        ref.encode_special_tokens = False
    got = ours.encode(texts, add_special_tokens=False, parse_special=False)
    bad, report = mismatch_report(texts, got, theirs)
    assert not bad, report


def test_invalid_utf8_reads_as_replacement(pair, corpus):
    ref, ours = pair
    items = [c for c in corpus if "raw_hex" in c]
    assert items
    theirs = [ref.encode(c["text"]).ids for c in items]
    got = ours.encode_hex([c["raw_hex"] for c in items])
    bad, report = mismatch_report([c["raw_hex"] for c in items], got, theirs)
    assert not bad, report


@pytest.mark.parametrize("skip_special", [True, False])
def test_decode_equal(pair, corpus, skip_special):
    ref, ours = pair
    texts = [c["text"] for c in corpus]
    ids = [e.ids for e in ref.encode_batch(texts, add_special_tokens=True)]
    theirs = ref.decode_batch(ids, skip_special_tokens=skip_special)
    got = ours.decode(ids, skip_special_tokens=skip_special)
    bad, report = mismatch_report(texts, got, theirs)
    assert not bad, report


def test_round_trip_where_reference_round_trips(pair, corpus):
    ref, ours = pair
    texts = [c["text"] for c in corpus]
    ids = [e.ids for e in ref.encode_batch(texts, add_special_tokens=False)]
    theirs = ref.decode_batch(ids, skip_special_tokens=False)
    round_trip = [i for i, t in enumerate(texts) if theirs[i] == t]
    assert round_trip, "the reference round-trips nothing?"
    ours_ids = ours.encode([texts[i] for i in round_trip], add_special_tokens=False)
    back = ours.decode(ours_ids, skip_special_tokens=False)
    sel = [texts[i] for i in round_trip]
    bad, report = mismatch_report(sel, back, sel)
    assert not bad, report


@pytest.mark.parametrize("skip_special", [True, False])
def test_streaming_equals_full_decode(pair, corpus, skip_special):
    ref, ours = pair
    texts = [c["text"] for c in corpus]
    ids = [e.ids for e in ref.encode_batch(texts, add_special_tokens=True)]
    replies = ours.stream(ids, skip_special_tokens=skip_special)
    theirs = ref.decode_batch(ids, skip_special_tokens=skip_special)
    got = [r["text"] for r in replies]
    bad, report = mismatch_report(texts, got, theirs)
    assert not bad, report
    for r in replies:  # every released piece is whole characters
        for piece in r["pieces"]:
            assert "\ufffd" not in piece or "\ufffd" in r["text"]


def test_streaming_after_a_prompt_continues_the_reference_text(pair, corpus):
    """With prompt ids as left context (SGLang seeds the window with the prompt's last 5 ids),
    the streamed text is what the reference's decode of prompt + output adds to the prompt's."""
    ref, ours = pair
    texts = [c["text"] for c in corpus]
    ids = [e.ids for e in ref.encode_batch(texts, add_special_tokens=False)]
    cases = []
    for full in ids:
        if len(full) < 2:
            continue
        cut = len(full) // 2
        whole = ref.decode(full, skip_special_tokens=True)
        head = ref.decode(full[:cut], skip_special_tokens=True)
        # Only where the reference's own text is left-to-right extendable at the cut and does
        # not depend on tokens more than 5 positions back.
        window = ref.decode(full[max(0, cut - 5):cut], skip_special_tokens=True)
        window_whole = ref.decode(full[max(0, cut - 5):], skip_special_tokens=True)
        if whole.startswith(head) and window_whole.startswith(window):
            cases.append((full[:cut], full[cut:], whole[len(head):]))
    assert len(cases) > len(ids) // 2
    replies = ours.run([{"op": "stream", "ids": out, "prompt_ids": prompt}
                        for prompt, out, _ in cases])
    got = [r["text"] for r in replies]
    want = [w for _, _, w in cases]
    bad, report = mismatch_report([c[0] for c in cases], got, want)
    assert not bad, report


def test_very_long_inputs(pair):
    """Long runs stress the regex engine (look-ahead over 200k spaces) and the merge loop."""
    ref, ours = pair
    texts = [" " * 200000 + "x", "a" * 300000, "\n \n" * 50000 + "end", "1" * 100000,
             "\u00e9" * 100000, "<s>" * 20000]
    theirs = [e.ids for e in ref.encode_batch(texts)]
    bad, report = mismatch_report([t[:20] for t in texts], ours.encode(texts), theirs, limit=2)
    assert not bad, report

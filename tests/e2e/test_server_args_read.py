"""LightLLM arguments this round made real, checked against the same server without them.

The guard that no argument marked as taking effect is silently ignored lives in
tests/unit/args/arg_readers_test.cpp: every argument whose entry in src/args/server_args.json says
cpu "yes" or "partial" is read outside src/args/ through its generated key:: constant, or says
"read_in": "args" with the reason."""
import re

import requests

from server_util import STORIES, Server


def generate(srv, prompt, max_new_tokens):
    r = requests.post(srv.url + "/generate", json={
        "text": prompt, "sampling_params": {"temperature": 0, "max_new_tokens": max_new_tokens}},
        timeout=60)
    assert r.status_code == 200, r.text
    return r.json()


def test_eos_id_replaces_the_models_end_of_sequence_ids():
    prompt = "Once upon a time"
    plain = Server(STORIES)
    try:
        ref = generate(plain, prompt, 12)
    finally:
        assert plain.stop() == 0
    ids = ref["output_ids"]
    stop_at = next(i for i in range(2, len(ids)) if ids[i] not in ids[:i])
    srv = Server(STORIES, "--eos_id", ids[stop_at])
    try:
        out = generate(srv, prompt, 12)
    finally:
        assert srv.stop() == 0
    assert out["output_ids"][:stop_at] == ids[:stop_at]
    assert out["meta_info"]["finish_reason"] == {"type": "stop", "matched": ids[stop_at]}


def test_disable_chunked_prefill_prefills_a_long_prompt_in_one_step():
    prompt = " ".join(["The little dog ran to the park and played with a ball."] * 12)
    logs = {}
    for flag in ([], ["--disable_chunked_prefill"]):
        srv = Server(STORIES, "--chunked-prefill-size", 32, "--disable-radix-cache", *flag)
        try:
            out = generate(srv, prompt, 2)
            logs[bool(flag)] = srv.logs()
        finally:
            assert srv.stop() == 0
        assert out["meta_info"]["prompt_tokens"] > 64
    chunks = [int(n) for n in re.findall(r"Prefill batch, #new-seq: \d+, #new-token: (\d+)",
                                          logs[False])]
    whole = [int(n) for n in re.findall(r"Prefill batch, #new-seq: \d+, #new-token: (\d+)",
                                         logs[True])]
    assert max(chunks) <= 32 and len(chunks) > 2, chunks
    assert whole and max(whole) > 64, whole

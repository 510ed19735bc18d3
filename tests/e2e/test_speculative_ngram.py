"""--speculative-algorithm NGRAM (issue 20), through a real server: greedy output is token for token
what the same server without speculation generates, on stories260K and SmolLM2, alone and with 32
concurrent requests, across page sizes, chunked-prefill sizes and the radix cache on and off;
stop strings, max_new_tokens and streaming inside an accepted run behave as without speculation;
sampled (seeded), logprob and grammar-constrained requests speculate too and produce the same
tokens (and logprobs) as without; the leak check holds after each run. Both servers use --enable-deterministic-inference, so a difference can only come from
speculation (batch shape no longer changes a row's logits).
"""
import concurrent.futures
import json
import re

import pytest
import requests

from e2e_util import run_radixserve
from server_util import SMOLLM2, STORIES, Server

STORY_OPENINGS = ["Once upon a time, there was a little girl named Lily.",
                  "Tom had a big red ball. He liked to play with it every day.",
                  "The sun was shining and the birds were singing.",
                  "Once upon a time, there was a little dog named Spot. Spot liked to run."]
STORY_TAILS = ["", " She", " One day,", " He was happy.", " The", " They played and played.",
               " Lily said,", " Once upon a time"]
STORY_PROMPTS = [o + t for t in STORY_TAILS for o in STORY_OPENINGS]
assert len(STORY_PROMPTS) == 32 and len(set(STORY_PROMPTS)) == 32

PASSAGES = [
    "The river runs through the old town, past the mill and the stone bridge, and on to the sea.",
    "To make tea, boil fresh water, warm the pot, add one spoon of leaves per cup and wait four "
    "minutes.",
    "The library opens at nine, closes at six, and lends up to five books for three weeks.",
    "Mars is the fourth planet from the Sun; its red colour comes from iron oxide on its surface.",
]
SMOL_PROMPTS = [f"Copy this sentence exactly.\nSentence: {p}\nCopy: {p[:n]}"
                for p in PASSAGES for n in (5, 9, 14, 20, 27, 33, 40, 47)]
assert len(SMOL_PROMPTS) == 32 and len(set(SMOL_PROMPTS)) == 32
SMOL_MAX_NEW = 20


def generate(srv, prompt, max_new, **sampling):
    params = {"max_new_tokens": max_new, "temperature": 0, **sampling}
    r = requests.post(srv.url + "/generate", json={"text": prompt, "sampling_params": params},
                      timeout=600)
    assert r.status_code == 200, r.text
    return r.json()


def run_batch(srv, prompts, max_new):
    with concurrent.futures.ThreadPoolExecutor(len(prompts)) as pool:
        return list(pool.map(lambda p: generate(srv, p, max_new, ignore_eos=True), prompts))


def serve(model, *args):
    if not model.exists():
        pytest.fail(f"{model} missing: run scripts/setup")
    return Server(model, "--skip-server-warmup", "--enable-deterministic-inference", *args)


def spec_args(page, chunk, radix, draft_tokens, breadth=None):
    # Drafting stays on whatever the batch size (the default stops it from 4 running sequences).
    args = ["--speculative-algorithm", "NGRAM", "--speculative-num-draft-tokens", draft_tokens,
            "--page-size", page, "--chunked-prefill-size", chunk,
            "--speculative-disable-by-batch-size", "0"]
    if breadth:  # wide trees: several children per node from every window
        args += ["--speculative-ngram-min-bfs-breadth", breadth[0],
                 "--speculative-ngram-max-bfs-breadth", breadth[1]]
    return args + ([] if radix else ["--disable-radix-cache"])


@pytest.fixture(scope="module")
def story_oracle():
    srv = serve(STORIES)
    yield srv
    assert srv.stop() == 0, srv.logs()


def check_against(oracle_bodies, bodies):
    mismatched = [i for i, (a, b) in enumerate(zip(oracle_bodies, bodies))
                  if a["output_ids"] != b["output_ids"]]
    assert not mismatched, f"requests {mismatched} differ from the run without speculation"
    tokens = sum(b["meta_info"]["completion_tokens"] for b in bodies)
    steps = sum(b["meta_info"]["spec_verify_ct"] for b in bodies)
    # The first token of each request comes from its prefill; fewer verify steps than the other
    # tokens means drafts were accepted (the comparison above covered accepted runs).
    assert steps < tokens - len(bodies), (steps, tokens)


# Tree drafts (the default breadths 1 to 10, and wide ones) move an accepted branch's K/V by slot
# swaps with page 1 and by row copies with larger pages; --speculative-ngram-match-type PROB
# builds its trees best first.
@pytest.mark.parametrize("page,chunk,radix,draft_tokens,breadth,match", [
    (1, 64, True, 8, None, "BFS"), (16, 4096, False, 4, None, "BFS"),
    (4, 32, True, 16, None, "BFS"), (1, 4096, False, 2, None, "BFS"),
    (1, 64, True, 12, (3, 6), "BFS"), (4, 64, False, 12, (3, 6), "BFS"),
    (1, 64, True, 10, (1, 3), "PROB")])
def test_stories_equal_without_speculation(story_oracle, page, chunk, radix, draft_tokens, breadth,
                                           match):
    max_new = 96
    oracle = run_batch(story_oracle, STORY_PROMPTS, max_new)
    assert all("spec_verify_ct" not in b["meta_info"] for b in oracle)
    srv = serve(STORIES, *spec_args(page, chunk, radix, draft_tokens, breadth),
                "--speculative-ngram-match-type", match)
    try:
        alone = [generate(srv, p, max_new, ignore_eos=True) for p in STORY_PROMPTS[:4]]
        check_against(oracle[:4], alone)
        check_against(oracle, run_batch(srv, STORY_PROMPTS, max_new))
        # Again, now with the n-gram table full of these outputs (and prefix hits with radix).
        check_against(oracle, run_batch(srv, STORY_PROMPTS, max_new))
        srv.assert_no_leak()
    finally:
        assert srv.stop() == 0, srv.logs()


# Under tensor parallelism the followers receive each tree with the batch; with pages of one slot
# an accepted branch moves by slot swaps in the leader's tables, with larger pages (whose K/V rows
# only each rank could copy) NGRAM drafts chains. (Pipeline parallelism refuses speculation.)
@pytest.mark.parametrize("layout,page", [(["--tp-size", 2], 1), (["--tp-size", 2], 4)],
                         ids=["tp2-page1", "tp2-page4"])
def test_tree_drafts_under_tensor_parallelism(layout, page):
    max_new = 64
    plain = serve(STORIES, *layout, "--page-size", page)
    try:
        oracle = run_batch(plain, STORY_PROMPTS, max_new)
    finally:
        assert plain.stop() == 0, plain.logs()
    srv = serve(STORIES, *layout, *spec_args(page, 64, True, 12, (2, 5)))
    try:
        check_against(oracle, run_batch(srv, STORY_PROMPTS, max_new))
        check_against(oracle, run_batch(srv, STORY_PROMPTS, max_new))
        srv.assert_no_leak()
    finally:
        assert srv.stop() == 0, srv.logs()


@pytest.fixture(scope="module")
def story_spec():
    srv = serve(STORIES, *spec_args(4, 64, True, 8))
    yield srv
    srv.assert_no_leak()
    assert srv.stop() == 0, srv.logs()


@pytest.mark.parametrize("max_new", [1, 2, 7, 33])
def test_max_new_tokens_inside_an_accepted_run(story_oracle, story_spec, max_new):
    for prompt in STORY_PROMPTS[:4]:
        want = generate(story_oracle, prompt, max_new, ignore_eos=True)
        got = generate(story_spec, prompt, max_new, ignore_eos=True)
        assert got["output_ids"] == want["output_ids"]
        assert len(got["output_ids"]) == max_new
        assert got["meta_info"]["finish_reason"] == want["meta_info"]["finish_reason"]


def test_stop_strings_and_eos_inside_an_accepted_run(story_oracle, story_spec):
    for prompt in STORY_PROMPTS[:8]:
        full = generate(story_oracle, prompt, 120)
        words = full["text"].split()
        # A stop string from the middle of the text (first occurrence ends the request).
        stop = " ".join(words[len(words) // 2:len(words) // 2 + 2])
        for sampling in ({}, {"stop": [stop]}, {"stop": [stop], "no_stop_trim": True}):
            want = generate(story_oracle, prompt, 120, **sampling)
            got = generate(story_spec, prompt, 120, **sampling)
            assert (got["text"], got["output_ids"]) == (want["text"], want["output_ids"]), sampling
            assert got["meta_info"]["finish_reason"] == want["meta_info"]["finish_reason"]


def stream_text(srv, prompt, max_new):
    body = {"text": prompt, "stream": True,
            "sampling_params": {"max_new_tokens": max_new, "temperature": 0, "ignore_eos": True}}
    text, chunks = "", 0
    with requests.post(srv.url + "/generate", json=body, stream=True, timeout=600) as r:
        assert r.status_code == 200
        for line in r.iter_lines():
            if not line.startswith(b"data: ") or line == b"data: [DONE]":
                continue
            event = json.loads(line[6:])
            text = event["text"]  # cumulative
            chunks += 1
    return text, chunks


def test_streaming_sends_the_accepted_tokens(story_oracle, story_spec):
    for prompt in STORY_PROMPTS[:4]:
        want, want_chunks = stream_text(story_oracle, prompt, 64)
        got, got_chunks = stream_text(story_spec, prompt, 64)
        assert got == want
        assert got_chunks <= want_chunks  # several accepted tokens share one event


SAMPLED = [
    {"temperature": 0.8, "top_p": 0.9},
    {"temperature": 0.5, "top_k": 20, "repetition_penalty": 1.1},
    {"temperature": 1.0, "min_p": 0.05, "frequency_penalty": 0.3, "presence_penalty": 0.2},
    {"temperature": 0.3},
]


def speculated(bodies):
    """Verify steps and the tokens they produced beyond each request's prefill token."""
    steps = sum(b["meta_info"]["spec_verify_ct"] for b in bodies)
    return steps, sum(b["meta_info"]["completion_tokens"] - 1 for b in bodies)


def test_sampled_requests_speculate_and_sample_what_they_would_without(story_oracle,
                                                                       story_spec):
    # Verification draws each row with the request's own seed at the same step as the one-token
    # path, so a seeded request gives the same tokens with and without speculation, alone and
    # in a batch of 32 with different seeds and sampling settings; a draft is kept exactly when
    # that draw equals it (probability p(draft), as rejection sampling with a point proposal).
    def sampled(i):
        return {**SAMPLED[i % len(SAMPLED)], "sampling_seed": 1000 + i, "ignore_eos": True}

    def run(srv):
        with concurrent.futures.ThreadPoolExecutor(len(STORY_PROMPTS)) as pool:
            return list(pool.map(lambda i: generate(srv, STORY_PROMPTS[i], 64, **sampled(i)),
                                 range(len(STORY_PROMPTS))))
    want = run(story_oracle)
    alone = [generate(story_spec, STORY_PROMPTS[i], 64, **sampled(i)) for i in range(4)]
    assert [b["output_ids"] for b in alone] == [b["output_ids"] for b in want[:4]]
    got = run(story_spec)
    assert [b["output_ids"] for b in got] == [b["output_ids"] for b in want]
    steps, tokens = speculated(got)
    assert steps < tokens, (steps, tokens)  # drafts were accepted for sampled requests
    # The same seed again (the n-gram table has changed meanwhile): the same tokens.
    again = generate(story_spec, STORY_PROMPTS[1], 64, **sampled(1))
    assert again["output_ids"] == want[1]["output_ids"]


def test_logprob_requests_speculate_with_the_same_logprobs(story_oracle, story_spec):
    for prompt in STORY_PROMPTS[:4]:
        body = {"text": prompt, "return_logprob": True, "top_logprobs_num": 2,
                "token_ids_logprob": [5, 17],
                "sampling_params": {"max_new_tokens": 48, "temperature": 0, "ignore_eos": True}}
        want = requests.post(story_oracle.url + "/generate", json=body, timeout=60).json()
        got = requests.post(story_spec.url + "/generate", json=body, timeout=60).json()
        assert got["output_ids"] == want["output_ids"]
        for key in ("output_token_logprobs", "output_top_logprobs",
                    "output_token_ids_logprobs"):
            a, b = got["meta_info"][key], want["meta_info"][key]
            assert json.dumps(a) == json.dumps(b) or _close(a, b), key
        steps, tokens = speculated([got])
        assert steps < tokens, (steps, tokens)


def _close(a, b):
    if isinstance(a, list):
        return len(a) == len(b) and all(_close(x, y) for x, y in zip(a, b))
    if isinstance(a, float) and isinstance(b, float):
        return abs(a - b) <= 1e-5
    return a == b


def test_constrained_requests_speculate_within_the_grammar(story_oracle, story_spec):
    # Drafts are checked by sampling each row under the grammar's mask (the grammar accepts only
    # the tokens kept), so output and validity are those of the run without speculation.
    regex = r"(Once upon a time, there was a little (girl|boy|dog) named [A-Z][a-z]+\. ){3}"
    bodies = []
    for i, prompt in enumerate(STORY_PROMPTS[:4]):
        for sampling in ({"temperature": 0}, {"temperature": 0.7, "sampling_seed": 7 + i}):
            params = {"regex": regex, "max_new_tokens": 120, **sampling}
            want = generate(story_oracle, prompt, 120, **params)
            got = generate(story_spec, prompt, 120, **params)
            assert got["output_ids"] == want["output_ids"], sampling
            assert re.fullmatch(regex, got["text"]), got["text"]
            bodies.append(got)
    steps, tokens = speculated(bodies)
    assert steps < tokens, (steps, tokens)


def test_drafting_stops_at_the_batch_size_threshold(story_oracle, radixserve_bin):
    # --speculative-disable-by-batch-size 1: no step ever has fewer than 1 running sequence, so
    # no draft is proposed: every decode step verifies nothing; the output is unchanged.
    srv = serve(STORIES, "--speculative-algorithm", "NGRAM",
                "--speculative-disable-by-batch-size", "1")
    try:
        want = run_batch(story_oracle, STORY_PROMPTS[:8], 48)
        got = run_batch(srv, STORY_PROMPTS[:8], 48)
        assert [b["output_ids"] for b in got] == [b["output_ids"] for b in want]
        steps, tokens = speculated(got)
        assert steps == tokens, (steps, tokens)
        srv.assert_no_leak()
    finally:
        assert srv.stop() == 0, srv.logs()
    proc = run_radixserve(radixserve_bin, "--model-path", STORIES,
                          "--print-config", "--speculative-algorithm", "NGRAM",
                          "--speculative-disable-by-batch-size", "-1")
    assert proc.returncode == 2 and "--speculative-disable-by-batch-size" in proc.stderr


@pytest.fixture(scope="module")
def smol_oracle():
    srv = serve(SMOLLM2)
    try:
        bodies = run_batch(srv, SMOL_PROMPTS, SMOL_MAX_NEW)
        srv.assert_no_leak()
    finally:
        assert srv.stop() == 0, srv.logs()
    return bodies


# One configuration (page 16, 64-token chunks, radix on): SmolLM2 is slow on 2 shared cores; the
# stories260K runs above cover the other page, chunk and radix combinations.
def test_smollm2_equal_without_speculation(smol_oracle):
    srv = serve(SMOLLM2, *spec_args(16, 64, True, 8))
    try:
        check_against(smol_oracle[:1], [generate(srv, SMOL_PROMPTS[0], SMOL_MAX_NEW,
                                                 ignore_eos=True)])
        check_against(smol_oracle, run_batch(srv, SMOL_PROMPTS, SMOL_MAX_NEW))
        srv.assert_no_leak()
    finally:
        assert srv.stop() == 0, srv.logs()


@pytest.mark.parametrize("args, named", [
    (["--speculative-algorithm", "EAGLE"], "--speculative-algorithm"),
    (["--speculative-algorithm", "EAGLE3"], "--speculative-algorithm"),
    (["--speculative-algorithm", "NGRAM", "--speculative-ngram-min-bfs-breadth", "4",
      "--speculative-ngram-max-bfs-breadth", "3"], "--speculative-ngram-max-bfs-breadth"),
    (["--speculative-algorithm", "NGRAM", "--speculative-num-draft-tokens", "1"],
     "--speculative-num-draft-tokens"),
    (["--speculative-algorithm", "NGRAM", "--speculative-ngram-min-match-window-size", "5",
      "--speculative-ngram-max-match-window-size", "3"],
     "--speculative-ngram-max-match-window-size"),
])
def test_unsupported_speculation_exits_2_naming_the_argument(radixserve_bin, args, named):
    proc = run_radixserve(radixserve_bin, "--model-path", STORIES, "--print-config", *args)
    assert proc.returncode == 2, proc.stdout
    assert named in proc.stderr

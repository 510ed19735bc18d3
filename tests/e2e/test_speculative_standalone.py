"""--speculative-algorithm STANDALONE (issue 20): a separate draft model with the target's tokenizer
proposes --speculative-num-steps tokens per step. The reference is the same server without
speculation (both with --enable-deterministic-inference, so only speculation could change a
token): greedy, seeded sampled and logprob requests give the same tokens (and logprobs), alone and
32 at once, across page sizes, chunked-prefill sizes, the radix cache on and off and under
retraction; the leak check holds after each run.

Drafts: stories260K's HF folder drafting for its own GGUF (the same weights: a draft KV cache kept
consistent with the target's must make nearly every draft the target's own choice, so the accept
length is checked too — stale draft K/V after a prefix hit, a chunk or a retraction would show as
rejections), a random-weight Granite checkpoint with the same tokenizer (mostly rejected drafts),
and SmolLM2's Q4_1 GGUF drafting for its F32 GGUF.
"""
import concurrent.futures
import json
import pathlib
import sys
import time

import pytest
import requests

from e2e_util import generate_retracting, run_radixserve
from server_util import MODELS, SHARED, SMOLLM2, STORIES, Server, free_port

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[1] / "oracle/model"))
from dense_checkpoint import write_gguf  # noqa: E402

STORIES_HF = SHARED / "models/stories260K/hf"
SMOLLM2_F32 = MODELS / "smollm2-135m-instruct-f32.gguf"

OPENINGS = ["Once upon a time, there was a little girl named Lily.",
            "Tom had a big red ball. He liked to play with it every day.",
            "The sun was shining and the birds were singing.",
            "Once upon a time, there was a little dog named Spot. Spot liked to run."]
TAILS = ["", " She", " One day,", " He was happy.", " The", " They played and played.",
         " Lily said,", " Once upon a time"]
PROMPTS = [o + t for t in TAILS for o in OPENINGS]
assert len(PROMPTS) == 32 and len(set(PROMPTS)) == 32
MAX_NEW = 96


def require(path):
    if not pathlib.Path(path).exists():
        pytest.fail(f"{path} missing: run scripts/setup")
    return path


def serve(model, *args):
    return Server(require(model), "--skip-server-warmup", "--enable-deterministic-inference",
                  *args)


def standalone(draft, steps, *args):
    # Drafting stays on whatever the batch size (the default stops it from 4 running sequences).
    return ["--speculative-algorithm", "STANDALONE",
            "--speculative-draft-model-path", str(require(draft)),
            "--speculative-num-steps", str(steps),
            "--speculative-disable-by-batch-size", "0", *args]


def generate(srv, prompt, max_new, **params):
    body = {"text": prompt,
            "sampling_params": {"max_new_tokens": max_new, "temperature": 0, "ignore_eos": True,
                                **params.pop("sampling", {})},
            **params}
    r = requests.post(srv.url + "/generate", json=body, timeout=600)
    assert r.status_code == 200, r.text
    return r.json()


def run_batch(srv, prompts, max_new=MAX_NEW, **params):
    with concurrent.futures.ThreadPoolExecutor(len(prompts)) as pool:
        return list(pool.map(lambda p: generate(srv, p, max_new, **params), prompts))


def verify_steps(bodies):
    """Verify steps and the tokens they produced (each request's first token is its prefill's)."""
    steps = sum(b["meta_info"]["spec_verify_ct"] for b in bodies)
    return steps, sum(b["meta_info"]["completion_tokens"] - 1 for b in bodies)


def check_same(want, got):
    mismatched = [i for i, (a, b) in enumerate(zip(want, got)) if a["output_ids"] != b["output_ids"]]
    assert not mismatched, f"requests {mismatched} differ from the run without speculation"


def check_accept_length(bodies, steps, share=0.75):
    # The draft is the target's own weights: a step should gain close to steps + 1 tokens (stale
    # draft K/V would propose other tokens: about 1 token per step).
    verify, tokens = verify_steps(bodies)
    assert tokens / verify >= share * (steps + 1), (verify, tokens)


@pytest.fixture(scope="module")
def story_oracle():
    srv = serve(STORIES)
    yield srv
    assert srv.stop() == 0, srv.logs()


@pytest.fixture(scope="module")
def granite_draft(tmp_path_factory):
    # A different architecture with random weights and stories260K's tokenizer.
    path = tmp_path_factory.mktemp("draft") / "granite-stories-vocab.gguf"
    write_gguf(str(path), "granite", seed=3)
    return path


@pytest.mark.parametrize("page,chunk,radix,steps,draft", [
    (1, 64, True, 3, "same"), (16, 4096, False, 5, "same"), (4, 32, True, 2, "granite"),
    (1, 4096, True, 1, "granite")])
def test_stories_equal_without_speculation(story_oracle, granite_draft, page, chunk, radix,
                                           steps, draft):
    oracle = run_batch(story_oracle, PROMPTS)
    draft_path = STORIES_HF if draft == "same" else granite_draft
    args = ["--page-size", str(page), "--chunked-prefill-size", str(chunk)]
    srv = serve(STORIES, *standalone(draft_path, steps, *args),
                *([] if radix else ["--disable-radix-cache"]))
    try:
        alone = [generate(srv, p, MAX_NEW) for p in PROMPTS[:4]]
        check_same(oracle[:4], alone)
        batch = run_batch(srv, PROMPTS)
        check_same(oracle, batch)
        # Again: with the radix cache on, every prompt is now a prefix hit whose draft K/V was
        # written by the first pass.
        again = run_batch(srv, PROMPTS)
        check_same(oracle, again)
        if draft == "same":
            for bodies in (alone, batch, again):
                check_accept_length(bodies, steps)
        else:
            verify, tokens = verify_steps(again)
            assert verify <= tokens, (verify, tokens)
        srv.assert_no_leak()
    finally:
        assert srv.stop() == 0, srv.logs()


def test_retraction_keeps_both_caches_consistent(story_oracle):
    # A pool too small for 32 requests at once: sequences are retracted and readmitted, their K/V
    # (target and draft) coming back from the radix cache or recomputed. One batch call queues
    # every request at once, so the pool runs out whatever the machine's speed.
    oracle = run_batch(story_oracle, PROMPTS, 160)
    srv = serve(STORIES, *standalone(STORIES_HF, 3, "--max-total-tokens", "1024",
                                     "--chunked-prefill-size", "64",
                                     "--schedule-conservativeness", "0.05"))
    try:
        got = generate_retracting(srv, PROMPTS, 160)
        check_same(oracle, got)
        # Steps short of memory drop every draft before retracting: fewer tokens per step.
        check_accept_length(got, 3, share=0.4)
        srv.assert_no_leak()
    finally:
        assert srv.stop() == 0, srv.logs()


@pytest.fixture(scope="module")
def story_spec():
    srv = serve(STORIES, *standalone(STORIES_HF, 4, "--page-size", "4"))
    yield srv
    srv.assert_no_leak()
    assert srv.stop() == 0, srv.logs()


SAMPLED = [
    {"temperature": 0.8},
    {"temperature": 0.7, "top_p": 0.9},
    {"temperature": 0.5, "top_k": 20, "repetition_penalty": 1.1},
    {"temperature": 1.0, "min_p": 0.05, "frequency_penalty": 0.3, "presence_penalty": 0.2},
]


def test_seeded_sampled_requests_equal_without_speculation(story_oracle, story_spec):
    def run(srv):
        with concurrent.futures.ThreadPoolExecutor(len(PROMPTS)) as pool:
            return list(pool.map(
                lambda i: generate(srv, PROMPTS[i], 64,
                                   sampling={**SAMPLED[i % 4], "sampling_seed": 500 + i}),
                range(len(PROMPTS))))
    want = run(story_oracle)
    got = run(story_spec)
    check_same(want, got)
    verify, tokens = verify_steps(got)
    assert verify < tokens, (verify, tokens)  # sampled requests keep drafts too


def test_logprobs_equal_without_speculation(story_oracle, story_spec):
    params = {"return_logprob": True, "top_logprobs_num": 3, "logprob_start_len": 0}
    for prompt in PROMPTS[:4]:
        want = generate(story_oracle, prompt, 40, **params)
        got = generate(story_spec, prompt, 40, **params)
        assert got["output_ids"] == want["output_ids"]
        for key in ("input_token_logprobs", "output_token_logprobs", "output_top_logprobs"):
            a, b = got["meta_info"][key], want["meta_info"][key]
            assert close(a, b), key
        verify, tokens = verify_steps([got])
        assert verify < tokens, (verify, tokens)


def close(a, b):
    if isinstance(a, list):
        return len(a) == len(b) and all(close(x, y) for x, y in zip(a, b))
    if isinstance(a, float) and isinstance(b, float):
        return abs(a - b) <= 1e-5
    return a == b


def test_stream_and_metrics(story_oracle, story_spec):
    want = generate(story_oracle, PROMPTS[5], 48)
    body = {"text": PROMPTS[5], "stream": True,
            "sampling_params": {"max_new_tokens": 48, "temperature": 0, "ignore_eos": True}}
    text = ""
    with requests.post(story_spec.url + "/generate", json=body, stream=True, timeout=120) as r:
        assert r.status_code == 200
        for line in r.iter_lines():
            if line.startswith(b"data: ") and line != b"data: [DONE]":
                chunk = json.loads(line[6:])
                text = chunk["text"]
    assert text == want["text"]
    info = requests.get(story_spec.url + "/server_info", timeout=30).json()
    assert info["speculative_algorithm"] == "STANDALONE"
    assert info["speculative_num_draft_tokens"] == 5


def test_smollm2_q4_1_drafting_for_f32(tmp_path):
    prompts = [f"Write one sentence about {t}." for t in ("the sea", "bread", "a cat", "trains")]
    oracle = serve(SMOLLM2_F32)
    try:
        want = run_batch(oracle, prompts, 40)
    finally:
        assert oracle.stop() == 0, oracle.logs()
    srv = serve(SMOLLM2_F32, *standalone(SMOLLM2, 3))
    try:
        got = run_batch(srv, prompts, 40)
        check_same(want, got)
        verify, tokens = verify_steps(got)
        assert tokens / verify >= 2.0, (verify, tokens)  # Q4_1 mostly agrees with F32
        srv.assert_no_leak()
    finally:
        assert srv.stop() == 0, srv.logs()


@pytest.mark.parametrize("args, named", [
    (["--speculative-algorithm", "STANDALONE"], "--speculative-draft-model-path"),
    (["--speculative-algorithm", "EAGLE3", "--speculative-draft-model-path", "x"],
     "--speculative-algorithm"),
    (["--speculative-algorithm", "STANDALONE", "--speculative-draft-model-path", "x",
      "--speculative-eagle-topk", "4"], "--speculative-eagle-topk"),
    (["--speculative-algorithm", "STANDALONE", "--speculative-draft-model-path", "x",
      "--speculative-num-steps", "0"], "--speculative-num-steps"),
    (["--speculative-algorithm", "NGRAM", "--speculative-draft-model-path", "x"],
     "--speculative-draft-model-path"),
    (["--speculative-algorithm", "STANDALONE", "--speculative-draft-model-path", "x",
      "--speculative-draft-model-revision", "main"], "--speculative-draft-model-revision"),
])
def test_bad_arguments_exit_2_naming_the_argument(radixserve_bin, args, named):
    proc = run_radixserve(radixserve_bin, "--model-path", STORIES, "--print-config", *args)
    assert proc.returncode == 2, proc.stdout
    assert named in proc.stderr


def test_draft_of_another_vocabulary_exits_2(radixserve_bin):
    # SmolLM2's 49152-token vocabulary cannot draft for stories260K's 512 tokens.
    proc = run_radixserve(radixserve_bin, "--model-path", STORIES, "--port", str(free_port()),
                          *standalone(SMOLLM2, 3))
    assert proc.returncode == 2, proc.stdout
    assert "--speculative-draft-model-path" in proc.stderr
    assert "vocabulary" in proc.stderr


def test_num_draft_tokens_is_adjusted_to_steps_plus_one(radixserve_bin):
    proc = run_radixserve(radixserve_bin, "--model-path", STORIES, "--print-config",
                          *standalone(STORIES_HF, 2), "--speculative-num-draft-tokens", "9")
    assert proc.returncode == 0, proc.stderr
    assert '"speculative_num_draft_tokens": 3' in proc.stdout.replace('":3', '": 3')
    assert "speculative_num_draft_tokens is adjusted" in proc.stderr + proc.stdout


def print_config(radixserve_bin, *args):
    proc = run_radixserve(radixserve_bin, "--model-path", STORIES, "--print-config", *args)
    assert proc.returncode == 0, proc.stderr
    return json.loads(proc.stdout[proc.stdout.index("{"):]), proc.stderr


def test_rtp_llm_sp_type_maps_onto_sglangs_algorithms(radixserve_bin):
    # RTP-LLM's prompt lookup: NGRAM with its match window and per-cycle draft count.
    config, stderr = print_config(radixserve_bin, "--sp-type", "deterministic",
                                  "--sp-min-token-match", "1", "--sp-max-token-match", "3",
                                  "--gen-num-per-cycle", "6")
    assert config["speculative_algorithm"] == "NGRAM"
    assert config["speculative_ngram_min_match_window_size"] == 1
    assert config["speculative_ngram_max_match_window_size"] == 3
    assert config["speculative_num_draft_tokens"] == 7
    assert "--sp-type deterministic runs as" in stderr
    # vanilla with a small model: STANDALONE drafting gen_num_per_cycle tokens; without one: off.
    config, _ = print_config(radixserve_bin, "--sp-type", "vanilla", "--gen-num-per-cycle", "4",
                             "--speculative-draft-model-path", str(STORIES_HF))
    assert config["speculative_algorithm"] == "STANDALONE"
    assert config["speculative_num_steps"] == 4
    config, _ = print_config(radixserve_bin, "--sp-type", "vanilla")
    assert config["speculative_algorithm"] is None


@pytest.mark.parametrize("args, named", [
    (["--sp-type", "eagle3"], "--sp-type"),
    (["--sp-type", "deterministic", "--speculative-algorithm", "NGRAM"], "--sp-type"),
    (["--mtp_mode", "deepseekv3", "--speculative-algorithm", "NGRAM"], "--mtp"),
])
def test_draft_head_arguments_of_other_servers_exit_2(radixserve_bin, args, named):
    proc = run_radixserve(radixserve_bin, "--model-path", STORIES, "--print-config", *args)
    assert proc.returncode == 2, proc.stdout
    assert named in proc.stderr


def test_lightllm_mtp_arguments_drive_a_draft_model(story_oracle):
    # LightLLM's --mtp_draft_model_dir and --mtp_step are SGLang's draft path and step count.
    # Drafting stays on with the 4 concurrent requests (the default stops it from 4 running).
    srv = serve(STORIES, "--speculative-algorithm", "STANDALONE", "--mtp_draft_model_dir",
                str(STORIES_HF), "--mtp_step", "2", "--speculative-disable-by-batch-size", "0")
    try:
        want = run_batch(story_oracle, PROMPTS[:4], 32)
        got = run_batch(srv, PROMPTS[:4], 32)
        check_same(want, got)
        check_accept_length(got, 2)
        srv.assert_no_leak()
    finally:
        assert srv.stop() == 0, srv.logs()


def test_prefix_loaded_from_the_disk_tier_gets_its_draft_rows_computed(story_oracle, tmp_path):
    # The disk tier stores the target's K/V only: a prefix loaded from it in a new server has no
    # draft rows, which the draft model then computes before drafting (accept length unchanged).
    prompt = ("Once upon a time, there was a little girl named Lily. She liked to play outside "
              "in the sun with her friends and her dog Max. One day, ") * 6
    want = generate(story_oracle, prompt, 60)
    env = {"SGLANG_HICACHE_FILE_BACKEND_STORAGE_DIR": str(tmp_path)}
    stored = []
    for _ in range(2):
        srv = Server(STORIES, "--skip-server-warmup", "--enable-deterministic-inference",
                     "--enable-hierarchical-cache", "--hicache-storage-backend", "file",
                     "--hicache-storage-prefetch-policy", "wait_complete",
                     *standalone(STORIES_HF, 3), env=env)
        try:
            got = generate(srv, prompt, 60)
            assert got["output_ids"] == want["output_ids"]
            check_accept_length([got], 3)
            stored.append(got["meta_info"]["cached_tokens_details"]["storage"])
            srv.assert_no_leak()
            # The blocks are written by the tier's I/O thread: wait for them before stopping.
            deadline = time.time() + 30
            while len(list(tmp_path.glob("*.rkv"))) < 4 and time.time() < deadline:
                time.sleep(0.1)
        finally:
            assert srv.stop() == 0, srv.logs()
    assert stored[0] == 0 and stored[1] >= 64, stored

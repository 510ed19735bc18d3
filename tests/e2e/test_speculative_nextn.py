"""--speculative-algorithm NEXTN: the checkpoint's own multi-token-prediction block (DeepSeek-V3's
NextN layer) drafts --speculative-num-steps tokens per step, fed by the target's hidden states.

The reference for the output is the same server without speculation (both with
--enable-deterministic-inference): greedy and seeded sampled requests give the same tokens, alone
and concurrently, across page sizes, chunked-prefill sizes and the radix cache on and off, and
nothing leaks. The reference for the drafts is llama.cpp's MTP graph (mtp_reference.py): replaying
the engine's verification over the final sequence with llama.cpp's block drafting (chained on its
own output states, as llama.cpp's MTP driver does) gives the number of verify steps each request
needs, which the served requests must report exactly. For that check the checkpoint is made
draftable: the main layers' attention and MLP outputs are zeroed (the target continues from its
newest token alone), and the block sees mostly its token (eh_proj is the identity on the
embedding plus a small random map of the state) and a scaled-down attention, so most drafts are
accepted while the state and the block's own K/V still decide a fair share of them."""
import concurrent.futures
import json
import pathlib
import sys
import time

import numpy as np
import pytest
import requests

from e2e_util import generate_retracting, run_radixserve
from server_util import STORIES, Server

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[1] / "oracle/model"))
from deepseek_checkpoint import SHAPES, random_weights, write_gguf  # noqa: E402
from deepseek_checkpoint import _stories_tokenizer  # noqa: E402
from mtp_reference import LlamaCppMtp  # noqa: E402
from test_llama_oracle import tokenize  # noqa: E402

OPENINGS = ["Once upon a time, there was a little girl named Lily.",
            "Tom had a big red ball. He liked to play with it every day.",
            "The sun was shining and the birds were singing.",
            "Once upon a time, there was a little dog named Spot. Spot liked to run."]
TAILS = ["", " She", " One day,", " They played and played."]
PROMPTS = [o + t for t in TAILS for o in OPENINGS]
MAX_NEW = 48


def serve(model, *args):
    return Server(model, "--skip-server-warmup", "--enable-deterministic-inference", *args)


def nextn(steps, *args):
    # Drafting stays on whatever the batch size (the default stops it from 4 running sequences).
    return ["--speculative-algorithm", "NEXTN", "--speculative-num-steps", str(steps),
            "--speculative-disable-by-batch-size", "0", *args]


def generate(srv, prompt, max_new=MAX_NEW, **sampling):
    """A request for `prompt`: text, or token ids."""
    body = {"text" if isinstance(prompt, str) else "input_ids": prompt,
            "sampling_params": {"max_new_tokens": max_new, "temperature": 0, "ignore_eos": True,
                                **sampling}}
    r = requests.post(srv.url + "/generate", json=body, timeout=600)
    assert r.status_code == 200, r.text
    return r.json()


def run_batch(srv, prompts, **sampling):
    with concurrent.futures.ThreadPoolExecutor(len(prompts)) as pool:
        return list(pool.map(lambda p: generate(srv, p, **sampling), prompts))


def check_same(want, got):
    mismatched = [i for i, (a, b) in enumerate(zip(want, got)) if a["output_ids"] != b["output_ids"]]
    assert not mismatched, f"requests {mismatched} differ from the run without speculation"


@pytest.fixture(scope="module")
def deepseek(tmp_path_factory):
    path = tmp_path_factory.mktemp("nextn") / "deepseek-v3-mtp.gguf"
    write_gguf(str(path), "F32", seed=7, variant="v3", mtp=True)
    return path


@pytest.fixture(scope="module")
def deepseek_oracle(deepseek):
    srv = serve(deepseek)
    yield srv
    assert srv.stop() == 0, srv.logs()


@pytest.mark.parametrize("page,chunk,radix,steps", [
    (1, 4096, True, 3), (16, 32, True, 2), (4, 4096, False, 1)])
def test_greedy_equal_without_speculation(deepseek, deepseek_oracle, page, chunk, radix, steps):
    oracle = run_batch(deepseek_oracle, PROMPTS)
    srv = serve(deepseek, *nextn(steps, "--page-size", str(page), "--chunked-prefill-size",
                                 str(chunk)), *([] if radix else ["--disable-radix-cache"]))
    try:
        check_same(oracle[:4], [generate(srv, p) for p in PROMPTS[:4]])
        check_same(oracle, run_batch(srv, PROMPTS))
        # Again: with the radix cache on every prompt is now a prefix hit, whose states and block
        # K/V the first pass left in the cached slots.
        again = run_batch(srv, PROMPTS)
        check_same(oracle, again)
        verify = sum(b["meta_info"]["spec_verify_ct"] for b in again)
        assert 0 < verify <= sum(b["meta_info"]["completion_tokens"] - 1 for b in again)
        srv.assert_no_leak()
    finally:
        assert srv.stop() == 0, srv.logs()


def test_retraction_keeps_the_states_and_block_cache_consistent(deepseek, deepseek_oracle):
    # A pool too small for 16 requests at once: sequences are retracted and readmitted, their K/V,
    # states and block rows coming back from the radix cache or recomputed.
    want = run_batch(deepseek_oracle, PROMPTS, max_new_tokens=96)
    srv = serve(deepseek, *nextn(3, "--max-total-tokens", "768", "--chunked-prefill-size", "64",
                                 "--schedule-conservativeness", "0.05"))
    try:
        check_same(want, generate_retracting(srv, PROMPTS, 96))
        srv.assert_no_leak()
    finally:
        assert srv.stop() == 0, srv.logs()


def test_seeded_sampled_requests_equal_without_speculation(deepseek, deepseek_oracle):
    def run(srv):
        with concurrent.futures.ThreadPoolExecutor(8) as pool:
            return list(pool.map(lambda i: generate(srv, PROMPTS[i], 32, temperature=0.8,
                                                    top_p=0.9, sampling_seed=100 + i), range(8)))
    want = run(deepseek_oracle)
    srv = serve(deepseek, *nextn(3))
    try:
        check_same(want, run(srv))
        srv.assert_no_leak()
    finally:
        assert srv.stop() == 0, srv.logs()


def test_return_hidden_states_beside_drafting_requests(deepseek):
    """Every forward computes every token's state for the block; a return_hidden_states request
    (which does not speculate) still gets exactly its own rows, while others draft beside it."""
    def hidden(srv):
        body = {"text": PROMPTS[0], "return_hidden_states": True,
                "sampling_params": {"max_new_tokens": 8, "temperature": 0, "ignore_eos": True}}
        with concurrent.futures.ThreadPoolExecutor(5) as pool:
            others = [pool.submit(generate, srv, p) for p in PROMPTS[1:5]]
            r = requests.post(srv.url + "/generate", json=body, timeout=600)
            drafted = sum(o.result()["meta_info"].get("spec_verify_ct", 0) for o in others)
        assert r.status_code == 200, r.text
        return r.json(), drafted
    plain = serve(deepseek, "--enable-return-hidden-states")
    try:
        want, _ = hidden(plain)
    finally:
        assert plain.stop() == 0, plain.logs()
    srv = serve(deepseek, "--enable-return-hidden-states", *nextn(3))
    try:
        got, drafted = hidden(srv)
        assert drafted > 0
        assert got["output_ids"] == want["output_ids"]
        assert got["meta_info"]["spec_verify_ct"] == 0  # it did not speculate
        flat = lambda m: np.concatenate([np.ravel(np.array(x, np.float32))  # noqa: E731
                                         for x in m["meta_info"]["hidden_states"]])
        np.testing.assert_allclose(flat(got), flat(want), atol=1e-5)
        srv.assert_no_leak()
    finally:
        assert srv.stop() == 0, srv.logs()


def draftable_weights():
    """deepseek_checkpoint's v3 weights with its NextN block, made draftable (module docstring)."""
    vocab = len(_stories_tokenizer()["tokenizer.ggml.tokens"])
    w = random_weights(7, vocab, "v3", mtp=True)
    L, H = SHAPES["v3"]["layers"], SHAPES["v3"]["hidden"]
    for name in list(w):
        if name.startswith("blk.") and ("ffn_down" in name or name.endswith("attn_output.weight")):
            layer = int(name.split(".")[1])
            w[name] = w[name] * (0.3 if layer == L and "attn_output" in name else 0.0)
    rng = np.random.default_rng(1)
    p = f"blk.{L}.nextn."
    w[p + "eh_proj.weight"] = np.concatenate(
        [np.eye(H), 0.15 * rng.standard_normal((H, H)) / np.sqrt(H)], axis=1)
    w[p + "enorm.weight"] = np.ones(H)
    w[p + "shared_head_norm.weight"] = w["output_norm.weight"]
    return {name: np.asarray(t, np.float32) for name, t in w.items()}


def predicted_verify_steps(ref, tokens, prompt_len, max_new, steps):
    """Verify steps of one request as the engine drafts and verifies it (engine_spec.cpp), with
    llama.cpp's block (mtp_reference.LlamaCppMtp) drafting: at newest position n, draft 1 is the
    argmax of the block's entry (token n, the main model's state of n - 1), each further draft of
    the entry (the previous draft, the block's output state for it), as llama.cpp's MTP driver
    chains them. Verification keeps the leading drafts equal to the target's tokens and commits
    one token more; the draft budget falls to the accepted count + 1 after a rejection and doubles
    after a full accept (up to `steps`); a step with one token left drafts nothing but counts."""
    h = ref.states(tokens)
    ref.truncate(0)
    state_before = lambda q: h[q - 1] if q > 0 else np.zeros_like(h[0])  # noqa: E731
    verify, n, committed, budget, fed = 0, prompt_len, 1, steps, 0
    while committed < max_new:
        verify += 1
        wanted = min(budget, max_new - committed - 1)
        if wanted <= 0:
            n, committed = n + 1, committed + 1
            continue
        # The block catches up over the committed entries, then drafts.
        logits, out = ref.block(tokens[fed:n + 1], [state_before(q) for q in range(fed, n + 1)],
                                fed)
        drafts, state = [int(logits[-1].argmax())], out[-1]
        while len(drafts) < wanted:
            logits, out = ref.block([drafts[-1]], [state], n + len(drafts))
            drafts.append(int(logits[-1].argmax()))
            state = out[-1]
        ref.truncate(n + 1)
        fed = n + 1
        accepted = 0
        while accepted < len(drafts) and drafts[accepted] == tokens[n + 1 + accepted]:
            accepted += 1
        n, committed = n + accepted + 1, committed + accepted + 1
        full = accepted == len(drafts) and committed < max_new
        budget = min(steps, 2 * len(drafts)) if full else accepted + 1
    return verify


@pytest.mark.parametrize("steps", [1, 3])
def test_drafts_are_llama_cpps_mtp_predictions(tmp_path, steps):
    model = tmp_path / "deepseek-v3-mtp-draftable.gguf"
    write_gguf(str(model), "F32", variant="v3", weights=draftable_weights())
    srv = serve(model, *nextn(steps, "--page-size", "4", "--chunked-prefill-size", "16"))
    try:
        prompts = [tokenize(str(model), p) for p in PROMPTS[:4]]
        alone = [generate(srv, p) for p in prompts]
        batch = run_batch(srv, prompts)
        check_same(alone, batch)
        saved = 0
        with LlamaCppMtp(model) as ref:
            for ids, body_alone, body_batch in zip(prompts, alone, batch):
                want = predicted_verify_steps(ref, ids + body_alone["output_ids"], len(ids),
                                              MAX_NEW, steps)
                for body in (body_alone, body_batch):
                    assert body["meta_info"]["spec_verify_ct"] == want, (ids, want)
                saved += MAX_NEW - 1 - want
        # The block drafts well here: many steps commit several tokens.
        assert saved > 4 * (MAX_NEW - 1) * 0.25, saved
        srv.assert_no_leak()
    finally:
        assert srv.stop() == 0, srv.logs()


def test_prefix_loaded_from_the_disk_tier_still_drafts(tmp_path):
    """The storage tier keeps the target's K/V only: in a new server, a prefix loaded from it has
    neither the block's K/V nor the target's states; the block's entries are recomputed pairing
    zeros for the missing states, so the request still drafts, and its output is exact."""
    model = tmp_path / "deepseek-v3-mtp-draftable.gguf"
    write_gguf(str(model), "F32", variant="v3", weights=draftable_weights())
    # Longer than the tier's prefetch threshold (256 tokens, as SGLang's).
    prompt = tokenize(str(model), " ".join(OPENINGS) * 4)
    (tmp_path / "tier").mkdir()
    env = {"SGLANG_HICACHE_FILE_BACKEND_STORAGE_DIR": str(tmp_path / "tier")}
    bodies = []
    for _ in range(2):
        srv = Server(model, "--skip-server-warmup", "--enable-deterministic-inference",
                     "--enable-hierarchical-cache", "--hicache-storage-backend", "file",
                     "--hicache-storage-prefetch-policy", "wait_complete", *nextn(3), env=env)
        try:
            bodies.append(generate(srv, prompt))
            srv.assert_no_leak()
            # The blocks are written by the tier's I/O thread: wait for them before stopping.
            deadline = time.time() + 30
            while len(list((tmp_path / "tier").glob("*.rkv"))) < 4 and time.time() < deadline:
                time.sleep(0.1)
        finally:
            assert srv.stop() == 0, srv.logs()
    first, second = bodies
    assert second["output_ids"] == first["output_ids"]
    stored = [b["meta_info"]["cached_tokens_details"]["storage"] for b in bodies]
    assert stored[0] == 0 and stored[1] >= 256, stored
    verify = second["meta_info"]["spec_verify_ct"]
    assert verify < MAX_NEW - 1, verify  # drafts were accepted


def test_model_without_a_block_exits_2(tmp_path, radixserve_bin):
    model = tmp_path / "deepseek-v3.gguf"
    write_gguf(str(model), "F32", seed=7, variant="v3")
    proc = run_radixserve(radixserve_bin, "--model-path", model, *nextn(3))
    assert proc.returncode == 2, proc.stdout
    assert "--speculative-algorithm" in proc.stderr
    assert "no multi-token-prediction block" in proc.stderr


def test_other_servers_mtp_arguments_map_onto_nextn(radixserve_bin):
    def config(*args):
        proc = run_radixserve(radixserve_bin, "--model-path", STORIES, "--print-config", *args)
        assert proc.returncode == 0, proc.stderr
        return json.loads(proc.stdout[proc.stdout.index("{"):]), proc.stderr
    # LightLLM: --mtp_mode deepseekv3 with --mtp_step; RTP-LLM: --sp-type mtp.
    c, stderr = config("--mtp_mode", "deepseekv3", "--mtp_step", "2")
    assert (c["speculative_algorithm"], c["speculative_num_steps"]) == ("NEXTN", 2)
    assert "runs as --speculative-algorithm NEXTN" in stderr
    c, _ = config("--sp-type", "mtp", "--gen-num-per-cycle", "4")
    assert (c["speculative_algorithm"], c["speculative_num_steps"]) == ("NEXTN", 4)
    proc = run_radixserve(radixserve_bin, "--model-path", STORIES, "--print-config",
                          "--speculative-algorithm", "NEXTN", "--speculative-draft-model-path",
                          str(STORIES))
    assert proc.returncode == 0, proc.stderr  # the draft path may name the model itself
    proc = run_radixserve(radixserve_bin, "--model-path", STORIES, "--print-config",
                          "--mtp_mode", "deepseekv3", "--mtp_draft_model_dir", "/elsewhere")
    assert proc.returncode == 2
    assert "--speculative-draft-model-path" in proc.stderr

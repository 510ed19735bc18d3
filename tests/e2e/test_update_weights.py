"""POST /update_weights_from_disk (SGLang's body and answer) on stories260K: a server started on the
original GGUF loads a copy whose float32 weights were perturbed (tests/fixtures/make_dequantized_gguf
copy_gguf) and from then on generates what llama.cpp (llama-cpp-python) generates from that copy,
with the prefix cache flushed (the old KV does not leak into new requests); a request running
during the update finishes with the old weights; mismatched checkpoints, bad fields and missing
paths are 400s; the admin key is enforced."""
import concurrent.futures
import pathlib
import sys

import numpy as np
import pytest
import requests

from server_util import STORIES, Server

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[1] / "fixtures"))
sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[1] / "oracle/model"))
from make_dequantized_gguf import copy_gguf, dequantized  # noqa: E402
from test_llama_oracle import STORY, tokenize  # noqa: E402
from test_moe_oracle import llama_cpp_greedy  # noqa: E402

MAX_NEW = 12


@pytest.fixture(scope="module")
def checkpoints(tmp_path_factory):
    root = tmp_path_factory.mktemp("weights")
    rng = np.random.default_rng(7)

    def perturbed(t):
        w = dequantized(t)
        if w.ndim == 2:  # matrices: a visible change of the function, norms untouched
            return (w + rng.normal(0.0, 0.05, w.shape)).astype(np.float32)
        return w

    new = root / "new.gguf"
    copy_gguf(str(STORIES), str(new), perturbed)
    return {"old": STORIES, "new": new}


@pytest.fixture(scope="module")
def prompts():
    story = tokenize(str(STORIES), STORY)
    return [story[:6], story[:11], story[3:20]]


def generate(srv, prompt, max_new=MAX_NEW):
    r = requests.post(srv.url + "/generate", json={
        "input_ids": prompt,
        "sampling_params": {"max_new_tokens": max_new, "temperature": 0, "ignore_eos": True}},
        timeout=120)
    assert r.status_code == 200, r.text
    return r.json()


def update(srv, headers=None, **body):
    return requests.post(srv.url + "/update_weights_from_disk", json=body, headers=headers,
                         timeout=300)


def test_update_serves_the_new_weights_as_llama_cpp_computes_them(checkpoints, prompts):
    old_ref = [llama_cpp_greedy(str(checkpoints["old"]), p, MAX_NEW) for p in prompts]
    new_ref = [llama_cpp_greedy(str(checkpoints["new"]), p, MAX_NEW) for p in prompts]
    assert old_ref != new_ref  # the perturbation changes the greedy continuations
    srv = Server(STORIES, "--skip-server-warmup", "--weight-version", "v1")
    try:
        for p, want in zip(prompts, old_ref):
            assert generate(srv, p)["output_ids"] == want
        r = update(srv, model_path=str(checkpoints["new"]), weight_version="v2")
        assert r.status_code == 200, r.text
        body = r.json()
        assert body["success"] is True and body["num_paused_requests"] == 0
        assert "Weight version updated to v2" in body["message"]
        # The prompts were cached under the old weights; after the flush none of that is reused
        # (the longest prompt first: later ones may reuse what it cached under the new weights).
        first = generate(srv, prompts[2])
        assert first["meta_info"]["cached_tokens"] == 0
        assert first["output_ids"] == new_ref[2]
        for p, want in zip(prompts, new_ref):
            out = generate(srv, p)
            assert out["output_ids"] == want
            assert out["meta_info"]["weight_version"] == "v2"
        info = requests.get(srv.url + "/get_model_info", timeout=10).json()
        assert info["weight_version"] == "v2"
        # And back.
        r = update(srv, model_path=str(checkpoints["old"]), flush_cache=True)
        assert r.status_code == 200, r.text
        assert generate(srv, prompts[0])["output_ids"] == old_ref[0]
        srv.assert_no_leak()
    finally:
        assert srv.stop() == 0, srv.logs()


def test_a_running_request_finishes_with_the_old_weights(checkpoints, prompts):
    srv = Server(STORIES, "--skip-server-warmup")
    try:
        long_ref = llama_cpp_greedy(str(checkpoints["old"]), prompts[0], 240)
        with concurrent.futures.ThreadPoolExecutor(2) as pool:
            running = pool.submit(generate, srv, prompts[0], 240)
            # Let the long request start decoding before the update arrives.
            seen = False
            for _ in range(2000):
                seen = requests.get(srv.url + "/get_load", timeout=10).json()[0]["num_reqs"] > 0
                if seen:
                    break
            assert seen
            r = update(srv, model_path=str(checkpoints["new"]))
            assert r.status_code == 200, r.text
            assert running.result()["output_ids"] == long_ref
        srv.assert_no_leak()
    finally:
        assert srv.stop() == 0, srv.logs()


def test_abort_all_requests_ends_the_running_ones(checkpoints, prompts):
    """abort_all_requests: a request decoding when the update arrives ends with an abort (its
    client gets the answer at once) instead of finishing with the old weights."""
    srv = Server(STORIES, "--skip-server-warmup", env={"RADIX_TEST_STEP_DELAY_MS": "20"})
    try:
        with concurrent.futures.ThreadPoolExecutor(2) as pool:
            running = pool.submit(generate, srv, prompts[0], 240)
            for _ in range(2000):
                if requests.get(srv.url + "/get_load", timeout=10).json()[0]["num_reqs"] > 0:
                    break
            r = update(srv, model_path=str(checkpoints["new"]), abort_all_requests=True)
            assert r.status_code == 200 and r.json()["success"] is True, r.text
            meta = running.result()["meta_info"]
        assert meta["finish_reason"]["type"] == "abort", meta
        assert meta["completion_tokens"] < 240
        srv.assert_no_leak()
    finally:
        assert srv.stop() == 0, srv.logs()


def test_keep_pause_and_flush_cache_false(checkpoints, prompts):
    """keep_pause: the engine stays paused after the update until /continue_generation (a new
    request waits meanwhile); flush_cache false: the prefix cached under the old weights is
    still matched (SGLang leaves the cache to the caller then)."""
    srv = Server(STORIES, "--skip-server-warmup")
    try:
        generate(srv, prompts[2])
        r = update(srv, model_path=str(checkpoints["new"]), keep_pause=True, flush_cache=False)
        assert r.status_code == 200 and r.json()["success"] is True, r.text
        assert srv.server_info()["internal_states"][0]["paused"] is True
        with concurrent.futures.ThreadPoolExecutor(1) as pool:
            waiting = pool.submit(generate, srv, prompts[2])
            with pytest.raises(concurrent.futures.TimeoutError):
                waiting.result(timeout=1.0)  # paused: no step runs
            r = requests.post(srv.url + "/continue_generation", json={}, timeout=30)
            assert r.status_code == 200, r.text
            out = waiting.result(timeout=120)
        assert srv.server_info()["internal_states"][0]["paused"] is False
        assert out["meta_info"]["cached_tokens"] > 0  # not flushed
        srv.assert_no_leak()
    finally:
        assert srv.stop() == 0, srv.logs()


def test_refusals(checkpoints, tmp_path):
    other = tmp_path / "other.gguf"
    # A checkpoint of another shape: the vocabulary cut (tensors keep their shapes but the
    # token embedding loses rows, so the config's vocab differs).
    srv = Server(STORIES, "--skip-server-warmup", "--admin-api-key", "secret")
    admin = {"Authorization": "Bearer secret"}
    try:
        r = update(srv, model_path=str(checkpoints["new"]))
        assert r.status_code == 401, r.text
        r = update(srv, admin, model_path=str(tmp_path / "missing.gguf"))
        assert r.status_code == 400 and r.json()["success"] is False, r.text
        for body, fragment in (({}, "model_path"),
                               ({"model_path": str(checkpoints["new"]), "token_step": 3},
                                "token_step"),
                               ({"model_path": str(checkpoints["new"]), "is_async": True},
                                "is_async"),
                               ({"model_path": str(checkpoints["new"]), "bogus": 1}, "bogus")):
            r = update(srv, admin, **body)
            assert r.status_code == 400 and fragment in r.text, r.text
        copy_gguf(str(STORIES), str(other),
                  lambda t: dequantized(t)[:256] if t.name == "token_embd.weight" else None)
        r = update(srv, admin, model_path=str(other))
        assert r.status_code == 400 and r.json()["success"] is False
        # Still serving the original weights.
        assert generate(srv, [1, 2, 3])["output_ids"]
        srv.assert_no_leak(admin)
    finally:
        assert srv.stop() == 0, srv.logs()


def test_every_data_parallel_replica_updates(checkpoints, prompts):
    new_ref = [llama_cpp_greedy(str(checkpoints["new"]), p, MAX_NEW) for p in prompts]
    srv = Server(STORIES, "--skip-server-warmup", "--dp-size", "2",
                 "--load-balance-method", "round_robin")
    try:
        r = update(srv, model_path=str(checkpoints["new"]))
        assert r.status_code == 200, r.text
        for p, want in list(zip(prompts, new_ref)) * 2:  # both replicas, round robin
            assert generate(srv, p)["output_ids"] == want
        srv.assert_no_leak()
    finally:
        assert srv.stop() == 0, srv.logs()


def test_get_weights_by_name_reads_hf_layout_from_hf_and_gguf(checkpoints):
    """SGLang's /get_weights_by_name: the first truncate_size rows of a parameter by its HF name,
    checked against the HF folder's safetensors (numpy), for the HF folder and for the GGUF, whose
    Q/K rows llama.cpp's converter stored in interleaved order; and after a weight update, the
    new checkpoint's values."""
    from safetensors.numpy import load_file

    hf_dir = STORIES.parents[1] / "hf"
    want = load_file(str(hf_dir / "model.safetensors"))
    names = ["model.layers.0.self_attn.q_proj.weight", "model.layers.1.self_attn.k_proj.weight",
             "model.layers.2.mlp.down_proj.weight", "model.embed_tokens.weight"]
    for path in (hf_dir, STORIES):
        srv = Server(path, "--skip-server-warmup")
        try:
            for name in names:
                r = requests.post(srv.url + "/get_weights_by_name",
                                  json={"name": name, "truncate_size": 7}, timeout=60)
                assert r.status_code == 200, r.text
                assert np.allclose(r.json(), want[name][:7], atol=1e-6), (path, name)
            norm = requests.get(srv.url + "/get_weights_by_name",
                                json={"name": "model.norm.weight"}, timeout=60).json()
            assert np.allclose(norm, want["model.norm.weight"][:100], atol=1e-6)
            tied = requests.post(srv.url + "/get_weights_by_name",
                                 json={"name": "lm_head.weight", "truncate_size": 3},
                                 timeout=60).json()
            assert np.allclose(tied, want["model.embed_tokens.weight"][:3], atol=1e-6)
            bad = requests.post(srv.url + "/get_weights_by_name", json={"name": "nope"},
                                timeout=60)
            assert bad.status_code == 400 and "Get parameter by name failed" in bad.text
            if path == STORIES:
                r = update(srv, model_path=str(checkpoints["new"]))
                assert r.status_code == 200, r.text
                from gguf import GGUFReader
                new = {t.name: dequantized(t) for t in GGUFReader(str(checkpoints["new"])).tensors}
                got = requests.post(srv.url + "/get_weights_by_name", json={
                    "name": "model.layers.2.mlp.down_proj.weight", "truncate_size": 5},
                    timeout=60).json()
                assert np.allclose(got, new["blk.2.ffn_down.weight"][:5], atol=1e-6)
                assert not np.allclose(got, want["model.layers.2.mlp.down_proj.weight"][:5])
        finally:
            assert srv.stop() == 0, srv.logs()

"""SGLang's expert-distribution recorder (--expert-distribution-recorder-mode, the
/start_expert_distribution_record, /stop_... and /dump_... routes) on a random-weight Qwen3-MoE
(tests/oracle/model/moe_checkpoint.py). The oracle is transformers' own router
(tests/fixtures/causal_lm_reference.py --router-logits) on the HF form of the same weights: a
one-token generation is a single forward pass over the prompt, so the dumped counts (stat) and
each token's experts (per_token) must be the top-k of transformers' router logits. Then
--enable-expert-distribution-metrics' balancedness lines against the dumped counts under
--tp-size 2 --ep-size 2, and the refusals."""
import glob
import json
import os
import pathlib
import re
import subprocess
import sys

import numpy as np
import pytest
import requests

from e2e_util import run_radixserve
from server_util import BUILD, STORIES, Server, free_port

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[1] / "oracle/model"))
sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[1] / "fixtures"))
from moe_checkpoint import SHAPE, write_gguf, write_hf  # noqa: E402
from test_llama_oracle import STORY, tokenize  # noqa: E402
from torch_env import torch_python  # noqa: E402

FIXTURES = pathlib.Path(__file__).resolve().parents[1] / "fixtures"


@pytest.fixture(scope="module")
def moe(tmp_path_factory):
    """The Qwen3-MoE GGUF, its HF folder and a 60-token prompt."""
    tmp = tmp_path_factory.mktemp("moe")
    model = str(tmp / "qwen3moe.gguf")
    w = write_gguf(model, "F32", seed=11)
    hf = tmp / "hf"
    write_hf(str(hf), w)
    return model, hf, tokenize(model, STORY)[:60]


def router_top_k(hf, tokens, tmp_path):
    """transformers' expert choices [layers, tokens, top_k] (highest first) for `tokens`."""
    ids = tmp_path / "ids.json"
    ids.write_text(json.dumps(tokens))
    out = tmp_path / "router.npy"
    proc = subprocess.run([torch_python(), str(FIXTURES / "causal_lm_reference.py"), "--model",
                           str(hf), "--tokens", str(ids), "--out", str(out), "--router-logits"],
                          capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr[-3000:]
    logits = np.load(out)
    return np.argsort(-logits, axis=-1, kind="stable")[..., :SHAPE["top_k"]]


def call(srv, route, method="post"):
    r = getattr(requests, method)(srv.url + route, timeout=60)
    return r.status_code, r.text


def one_token(srv, tokens):
    r = requests.post(srv.url + "/generate", json={
        "input_ids": tokens, "sampling_params": {"max_new_tokens": 1, "temperature": 0}},
        timeout=120)
    assert r.status_code == 200, r.text


def dump(srv, directory):
    assert call(srv, "/dump_expert_distribution_record") == (
        200, "Dump expert distribution record.\n")
    files = sorted(glob.glob(str(directory / "expert_distribution_recorder_*.json")))
    assert files, os.listdir(directory)
    with open(files[-1]) as f:
        document = json.load(f)
    for path in files:
        os.remove(path)
    return document


def test_stat_and_per_token_counts_are_transformers_routing(moe, tmp_path):
    model, hf, tokens = moe
    expected = router_top_k(hf, tokens, tmp_path)  # [layers, tokens, k]
    counts = np.zeros((SHAPE["layers"], SHAPE["experts"]), dtype=np.int64)
    for layer in range(SHAPE["layers"]):
        np.add.at(counts[layer], expected[layer].ravel(), 1)
    assert (counts > 0).sum() > SHAPE["layers"] * 4, "the prompt must spread over the experts"
    for mode in ("stat", "per_token"):
        out = tmp_path / mode
        out.mkdir()
        srv = Server(model, "--skip-server-warmup", "--disable-radix-cache",
                     "--expert-distribution-recorder-mode", mode,
                     env={"SGLANG_EXPERT_DISTRIBUTION_RECORDER_DIR": str(out)})
        try:
            one_token(srv, tokens)  # before the recording: not counted
            assert call(srv, "/start_expert_distribution_record") == (
                200, "Start recording the expert distribution.\n")
            one_token(srv, tokens)
            assert call(srv, "/stop_expert_distribution_record", "get") == (
                200, "Stop recording the expert distribution.\n")
            one_token(srv, tokens)  # after it: not counted
            document = dump(srv, out)
            assert "Write expert distribution to" in srv.log_path.read_text()
            srv.assert_no_leak()
        finally:
            assert srv.stop() == 0, srv.logs()
        if mode == "stat":
            assert document["rank"] == 0
            assert np.array_equal(np.array(document["logical_count"]), counts[None])
        else:
            (record,) = document["records"]
            assert record["input_ids"] == tokens
            assert record["positions"] == list(range(len(tokens)))
            assert record["extend_seq_lens"] == [len(tokens)]
            assert record["forward_mode"] == 1  # EXTEND
            assert np.array_equal(np.array(record["global_physical_count"]), counts)
            assert np.array_equal(np.array(record["topk_ids_of_layer"]), expected)
            assert np.array_equal(np.array(document["last_physical_to_logical_map"]),
                                  np.tile(np.arange(SHAPE["experts"]), (SHAPE["layers"], 1)))


def test_balancedness_lines_follow_the_expert_blocks(moe, tmp_path):
    """tp 2 / ep 2: each pass's line is the two expert blocks' mean load over the larger one,
    averaged over layers, and its count sum is the pass's choices, both from the dumped counts."""
    model, _, tokens = moe
    srv = Server(model, "--skip-server-warmup", "--disable-radix-cache", "--tp-size", 2,
                 "--ep-size", 2, "--enable-expert-distribution-metrics",
                 "--expert-distribution-recorder-buffer-size", -1,
                 env={"SGLANG_EXPERT_DISTRIBUTION_RECORDER_DIR": str(tmp_path)})
    try:
        for n in (20, 45):
            one_token(srv, tokens[:n])
        document = dump(srv, tmp_path)
        logs = srv.log_path.read_text()
    finally:
        assert srv.stop() == 0, srv.logs()
    passes = np.array(document["logical_count"])  # recording since launch
    assert len(passes) == 2
    lines = re.findall(r"\[Expert Balancedness\] forward_pass_id=(\d+) "
                       r"current_pass_balancedness=([\d.]+) last_10_average_balancedness=([\d.]+) "
                       r"last_100_average_balancedness=[\d.]+ last_1000_average_balancedness="
                       r"[\d.]+  gpu_physical_count_sum=(\d+)", logs)
    assert [int(p) for p, *_ in lines] == [1, 2]
    for (_, current, _, total), counts, n in zip(lines, passes, (20, 45)):
        assert int(total) == counts.sum() == n * SHAPE["top_k"] * SHAPE["layers"]
        blocks = counts.reshape(SHAPE["layers"], 2, -1).sum(-1)
        want = ((blocks.mean(1) + 1e-5) / (blocks.max(1) + 1e-5)).mean()
        assert abs(float(current) - want) < 1e-3
    assert any(float(c) < 0.999 for _, c, _, _ in lines), "the blocks' loads should differ"


@pytest.mark.parametrize("route", ["/start_expert_distribution_record",
                                   "/stop_expert_distribution_record",
                                   "/dump_expert_distribution_record"])
def test_routes_answer_400_without_a_recorder(moe, route):
    model, _, _ = moe
    for server_model in (model, STORIES):  # no mode; a dense model
        srv = Server(server_model, "--skip-server-warmup")
        try:
            status, text = call(srv, route)
            assert status == 400, text
            assert ("--expert-distribution-recorder-mode" in text if server_model == model
                    else "has no experts" in text), text
        finally:
            assert srv.stop() == 0, srv.logs()


@pytest.mark.parametrize("args", [
    ["--expert-distribution-recorder-mode", "stat_approx"],      # DeepEP's
    ["--expert-distribution-recorder-mode", "per_expert"],       # not a mode
    ["--expert-distribution-recorder-mode", "stat", "--pp-size", 2],
    ["--enable-expert-distribution-metrics", "--pp-size", 2],
])
def test_recorder_layouts_it_cannot_run_exit_with_status_2(args):
    r = run_radixserve(BUILD / "radixserve", "--model-path", STORIES, "--port", free_port(), *args,
                       timeout=60)
    assert r.returncode == 2, r.stdout + r.stderr
    assert "argument --expert-distribution-recorder-mode" in r.stderr, r.stderr

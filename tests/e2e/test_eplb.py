"""Expert-parallel load balancing (--ep-num-redundant-experts, --init-expert-location,
--enable-eplb, --ep-dispatch-algorithm): the placement against SGLang's own DeepSeek EPLB
implementation (sglang.srt.eplb.eplb_algorithms.deepseek, from the installed sglang package, run
in the PyTorch venv) on the counts the server recorded, and the served tokens against llama.cpp's
greedy continuations on the same random-weight MoE files while experts move between the
tensor-parallel ranks' blocks."""
import json
import pathlib
import re
import subprocess
import sys

import numpy as np
import pytest
import requests

from e2e_util import run_radixserve
from server_util import BUILD, Server, free_port

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[1] / "oracle/model"))
sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[1] / "fixtures"))
from moe_checkpoint import SHAPE, write_gguf  # noqa: E402
from test_llama_oracle import STORY, tokenize  # noqa: E402
from test_moe_oracle import llama_cpp_greedy  # noqa: E402
from test_moe_serving import MAX_NEW, greedy_all_at_once, write_arch  # noqa: E402
from torch_env import torch_python  # noqa: E402

# Runs SGLang's deepseek.rebalance_experts on stdin's {"weight", "replicas", "blocks"} and prints
# its physical_to_logical map. The module is loaded from the installed sglang package's file, with
# its one sglang import (an environment-flag helper) stubbed: importing sglang.srt itself needs
# the GPU stack.
SGLANG_EPLB = r"""
import importlib.util, json, os, sys, types
import torch
spec = importlib.util.find_spec("sglang")
assert spec is not None, "the sglang package is not installed in this venv"
path = os.path.join(os.path.dirname(spec.origin), "srt", "eplb", "eplb_algorithms", "deepseek.py")
utils = types.ModuleType("sglang.srt.utils")
utils.get_bool_env_var = lambda name, default="false": os.environ.get(name, default).lower() in ("1", "true")
for name in ("sglang", "sglang.srt"):
    sys.modules.setdefault(name, types.ModuleType(name))
sys.modules["sglang.srt.utils"] = utils
module_spec = importlib.util.spec_from_file_location("sglang_eplb_deepseek", path)
deepseek = importlib.util.module_from_spec(module_spec)
module_spec.loader.exec_module(deepseek)
job = json.load(sys.stdin)
phy2log, _, _ = deepseek.rebalance_experts(
    weight=torch.tensor([job["weight"]], dtype=torch.float32), num_replicas=job["replicas"],
    num_groups=1, num_nodes=1, num_gpus=job["blocks"], enable_hierarchical=False)
print(json.dumps(phy2log[0].tolist()))
"""


def sglang_placement(weight, replicas, blocks):
    proc = subprocess.run([torch_python(), "-c", SGLANG_EPLB], capture_output=True, text=True,
                          input=json.dumps({"weight": weight, "replicas": replicas,
                                            "blocks": blocks}))
    assert proc.returncode == 0, proc.stderr[-3000:]
    return json.loads(proc.stdout)


def block_shares(mapping, weight, blocks):
    """Each block's load (an expert's load split evenly over its replicas), sorted."""
    counts = np.bincount(mapping, minlength=len(weight))
    share = np.array(weight, dtype=np.float64)[mapping] / counts[mapping]
    return sorted(np.round(share.reshape(blocks, -1).sum(1), 3).tolist())


def assert_same_placement(got, want, weight, blocks):
    """The same experts in every block (radixserve keeps experts in their slots within a block,
    where the order does not matter); where loads tie, which of the tied experts SGLang's sort
    picks first may differ: then equal replica counts per load and equal block loads."""
    per = len(got) // blocks
    by_block = lambda m: [sorted(m[b * per:(b + 1) * per]) for b in range(blocks)]  # noqa: E731
    if by_block(got) == by_block(want):
        return
    n = len(weight)
    by_load = lambda m: sorted(zip(np.round(weight, 6), np.bincount(m, minlength=n)))  # noqa: E731
    assert by_load(got) == by_load(want), (got, want, weight)
    assert block_shares(got, weight, blocks) == block_shares(want, weight, blocks), (got, want)


REBALANCED = re.compile(r"\[EPLB\] layer (\d+) pass (\d+): rebalanced from (\d+) expert choices.*"
                        r"; (\d+) of this rank's (\d+) slots reloaded")


def test_rebalanced_placement_is_sglangs_on_the_recorded_counts(tmp_path):
    """tp 2 / ep 2 with 2 redundant slots: every layer rebalances after its first N passes; the
    dumped placement is what SGLang's DeepSeek algorithm computes from those passes' counts."""
    model = str(tmp_path / "qwen3moe.gguf")
    write_gguf(model, "F32", seed=11)
    tokens = tokenize(model, STORY)
    n = 6
    srv = Server(model, "--skip-server-warmup", "--disable-radix-cache", "--tp-size", 2,
                 "--ep-size", 2, "--ep-num-redundant-experts", 2, "--enable-eplb",
                 "--eplb-rebalance-num-iterations", n, "--enable-expert-distribution-metrics",
                 "--expert-distribution-recorder-mode", "per_pass",
                 env={"SGLANG_EXPERT_DISTRIBUTION_RECORDER_DIR": str(tmp_path)})
    try:
        for i in range(n + 2):  # one pass each: n passes fill the window, the next rebalances
            r = requests.post(srv.url + "/generate", json={
                "input_ids": tokens[: 20 + 7 * i],
                "sampling_params": {"max_new_tokens": 1, "temperature": 0}}, timeout=120)
            assert r.status_code == 200, r.text
        r = requests.post(srv.url + "/dump_expert_distribution_record", timeout=60)
        assert r.status_code == 200, r.text
        files = sorted(tmp_path.glob("expert_distribution_recorder_*.json"))
        document = json.loads(files[-1].read_text())
        logs = srv.log_path.read_text()
    finally:
        assert srv.stop() == 0, srv.logs()
    records = document["records"]
    assert len(records) == n + 2
    E, L = SHAPE["experts"], SHAPE["layers"]
    trivial = [s % E for s in range(E + 2)]
    rebalanced = {int(layer): (int(p), int(c)) for layer, p, c, *_ in REBALANCED.findall(logs)}
    assert sorted(rebalanced) == list(range(L)), logs[-3000:]
    for layer in range(L):
        assert rebalanced[layer][0] == n, rebalanced
        # The window's counts by expert: the first n passes ran on the trivial placement.
        physical = np.array([rec["global_physical_count"][layer] for rec in records[:n]]).sum(0)
        weight = np.bincount(trivial, weights=physical, minlength=E)
        assert weight.sum() == rebalanced[layer][1]
        want = sglang_placement(weight.tolist(), E + 2, 2)
        got = document["last_physical_to_logical_map"][layer]
        assert_same_placement(got, want, weight, 2)
        # The passes after the rebalance dispatched onto the new placement's slots only.
        after = np.array(records[n]["global_physical_count"][layer])
        assert np.bincount(got, weights=after, minlength=E).sum() == after.sum()


CASES = [("qwen3moe", "static", []), ("deepseek-v3", "dynamic", ["--eplb-rebalance-layers-per-chunk", 1]),
         ("gptoss", "static", [])]


@pytest.mark.parametrize("arch,dispatch,extra", CASES, ids=[c[0] for c in CASES])
def test_greedy_matches_llama_cpp_while_experts_move(tmp_path, arch, dispatch, extra):
    """12 concurrent greedy requests under tp 2 / ep 2 with redundant replicas and a rebalance
    every 3 passes: llama.cpp's greedy continuations on the same F32 file, and slots reloaded."""
    model = str(tmp_path / f"{arch}.gguf")
    write_arch(model, arch)
    story = tokenize(model, STORY)
    prompts = [story[: 30 + 5 * i] for i in range(12)]
    expected = [llama_cpp_greedy(model, p, MAX_NEW) for p in prompts]
    srv = Server(model, "--skip-server-warmup", "--tp-size", 2, "--ep-size", 2,
                 "--ep-num-redundant-experts", 4, "--enable-eplb",
                 "--eplb-rebalance-num-iterations", 3, "--ep-dispatch-algorithm", dispatch, *extra)
    try:
        got = greedy_all_at_once(srv, prompts)
        srv.assert_no_leak()
        logs = srv.log_path.read_text()
    finally:
        assert srv.stop() == 0, srv.logs()
    assert got == expected
    moves = REBALANCED.findall(logs)
    assert len(moves) >= 4, logs[-3000:]
    assert sum(int(m[3]) for m in moves) > 0, "some slot should have changed experts"


def test_initial_placement_from_a_map_file(tmp_path):
    """A physical_to_logical_map that reverses the experts and replicates two of them serves
    llama.cpp's greedy tokens, and the dump reports the map."""
    model = str(tmp_path / "qwen3moe.gguf")
    write_gguf(model, "F32", seed=11)
    E, L = SHAPE["experts"], SHAPE["layers"]
    mapping = [list(reversed(range(E))) + [l % E, (l + 3) % E] for l in range(L)]
    location = tmp_path / "location.json"
    location.write_text(json.dumps({"physical_to_logical_map": mapping}))
    story = tokenize(model, STORY)
    prompts = [story[: 25 + 9 * i] for i in range(4)]
    expected = [llama_cpp_greedy(model, p, MAX_NEW) for p in prompts]
    srv = Server(model, "--skip-server-warmup", "--tp-size", 2, "--ep-size", 2,
                 "--ep-num-redundant-experts", 2, "--init-expert-location", location,
                 "--ep-dispatch-algorithm", "dynamic", "--expert-distribution-recorder-mode",
                 "per_pass", env={"SGLANG_EXPERT_DISTRIBUTION_RECORDER_DIR": str(tmp_path)})
    try:
        assert requests.post(srv.url + "/start_expert_distribution_record").status_code == 200
        got = greedy_all_at_once(srv, prompts)
        assert requests.post(srv.url + "/dump_expert_distribution_record").status_code == 200
        document = json.loads(sorted(tmp_path.glob("expert_distribution_recorder_*.json"))[-1]
                              .read_text())
    finally:
        assert srv.stop() == 0, srv.logs()
    assert got == expected
    assert document["last_physical_to_logical_map"] == mapping
    # Both replicas of a replicated expert computed some of its choices (dynamic dispatch).
    counts = np.array([rec["global_physical_count"] for rec in document["records"]]).sum(0)
    layer0 = counts[0]
    assert layer0[E] > 0 and layer0[E - 1] > 0  # expert 0 sits in slots E - 1 and E


@pytest.mark.parametrize("args,arg", [
    (["--enable-eplb"], "--enable-eplb"),                                   # one expert block
    (["--tp-size", 2, "--ep-size", 2, "--ep-num-redundant-experts", -1],
     "--ep-num-redundant-experts"),
    (["--tp-size", 2, "--ep-size", 2, "--eplb-min-rebalancing-utilization-threshold", 1.5],
     "--eplb-min-rebalancing-utilization-threshold"),
    (["--tp-size", 2, "--ep-size", 2, "--eplb-algorithm", "elasticity_aware"], "--eplb-algorithm"),
    (["--ep-dispatch-algorithm", "lp"], "--ep-dispatch-algorithm"),
    (["--dp-size", 2, "--ep-dispatch-algorithm", "dynamic"], "--ep-dispatch-algorithm"),
])
def test_settings_it_cannot_run_exit_with_status_2(tmp_path, args, arg):
    model = str(tmp_path / "qwen3moe.gguf")
    write_gguf(model, "F32", seed=11)
    r = run_radixserve(BUILD / "radixserve", "--model-path", model, "--port", free_port(), *args,
                       timeout=120)
    assert r.returncode == 2, r.stdout + r.stderr
    assert f"argument {arg}" in r.stderr, r.stderr


@pytest.mark.parametrize("location,message", [
    ('{"physical_to_logical_map": [[0, 1, 2]]}', "layers, but"),
    ('{"logical_count": "many"}', "logical_count must be"),
    ('{"counts": []}', "neither physical_to_logical_map nor logical_count"),
    ("missing.json", "cannot read"),
    ("experts.pt", "PyTorch file"),
])
def test_bad_initial_locations_exit_with_status_2(tmp_path, location, message):
    model = str(tmp_path / "qwen3moe.gguf")
    write_gguf(model, "F32", seed=11)
    r = run_radixserve(BUILD / "radixserve", "--model-path", model, "--port", free_port(),
                       "--init-expert-location", location, timeout=120)
    assert r.returncode == 2, r.stdout + r.stderr
    assert "argument --init-expert-location" in r.stderr and message in r.stderr, r.stderr


def test_redundant_slots_must_divide_into_the_blocks(tmp_path):
    model = str(tmp_path / "qwen3moe.gguf")
    write_gguf(model, "F32", seed=11)
    r = run_radixserve(BUILD / "radixserve", "--model-path", model, "--port", free_port(),
                       "--tp-size", 2, "--ep-size", 2, "--ep-num-redundant-experts", 1,
                       timeout=120)
    assert r.returncode == 2, r.stdout + r.stderr
    assert "argument --ep-num-redundant-experts" in r.stderr, r.stderr

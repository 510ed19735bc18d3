"""MoE models served end to end: the random-weight GGUFs of the MoE oracle tests
(tests/oracle/model/moe_checkpoint.py, gptoss_checkpoint.py, deepseek_checkpoint.py), 12 greedy requests sent at once so
the scheduler batches them, each continuation equal to llama.cpp's own greedy decoding of that
prompt on the same file (llama-cpp-python, one token per step). Then the same models split over
processes (--tp-size with --ep-size: experts split between blocks of ranks, each expert's rows
within a block)."""
import concurrent.futures
import pathlib
import sys

import pytest
import requests

from server_util import Server

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[1] / "oracle/model"))
from deepseek_checkpoint import write_gguf as write_deepseek_gguf  # noqa: E402
from gptoss_checkpoint import write_gguf as write_gptoss_gguf  # noqa: E402
from moe_checkpoint import write_gguf  # noqa: E402
from test_llama_oracle import STORY, tokenize  # noqa: E402
from test_moe_oracle import llama_cpp_greedy  # noqa: E402

MAX_NEW = 12


def greedy(srv, prompt):
    r = requests.post(srv.url + "/generate", json={
        "input_ids": prompt, "sampling_params": {
            "max_new_tokens": MAX_NEW, "temperature": 0, "ignore_eos": True}},
        timeout=300)
    assert r.status_code == 200, r.text
    return r.json()["output_ids"]


def greedy_all_at_once(srv, prompts):
    """Every prompt's greedy continuation, all requests in flight together (so they batch)."""
    with concurrent.futures.ThreadPoolExecutor(len(prompts)) as pool:
        return list(pool.map(lambda p: greedy(srv, p), prompts))


def test_qwen3moe_batched_greedy_matches_llama_cpp(tmp_path):
    model = str(tmp_path / "qwen3moe-f32.gguf")
    write_gguf(model, "F32", seed=11)
    story = tokenize(model, STORY)
    prompts = [story[: 6 + 5 * i] for i in range(12)]
    expected = [llama_cpp_greedy(model, p, MAX_NEW) for p in prompts]
    srv = Server(model, "--skip-server-warmup", "--disable-radix-cache")
    try:
        got = greedy_all_at_once(srv, prompts)
        srv.assert_no_leak()
        assert "Qwen3MoeForCausalLM" in srv.log_path.read_text(errors="replace")
    finally:
        assert srv.stop() == 0, srv.logs()
    assert got == expected


def test_gptoss_batched_greedy_with_radix_cache_matches_llama_cpp(tmp_path):
    """gpt-oss (attention sinks, sliding-window layers shorter than the prompts, the top-k
    softmax router): 12 concurrent greedy requests sharing prefixes, served with the radix cache
    on, each continuation equal to llama.cpp's greedy decoding on the same file."""
    model = str(tmp_path / "gptoss-f32.gguf")
    write_gptoss_gguf(model, "F32", seed=12)
    story = tokenize(model, STORY)
    prompts = [story[: 30 + 5 * i] for i in range(12)]
    expected = [llama_cpp_greedy(model, p, MAX_NEW) for p in prompts]
    srv = Server(model, "--skip-server-warmup")
    try:
        got = greedy_all_at_once(srv, prompts)
        # Again, now that the radix cache holds the prompts: cached prefixes give the same text.
        again = [greedy(srv, p) for p in prompts[:3]]
        srv.assert_no_leak()
        assert "GptOssForCausalLM" in srv.log_path.read_text(errors="replace")
    finally:
        assert srv.stop() == 0, srv.logs()
    assert got == expected
    assert again == expected[:3]


def test_deepseek_v3_mla_batched_greedy_with_radix_cache_matches_llama_cpp(tmp_path):
    """DeepSeek-V3 shape (multi-head latent attention over a compressed cache, grouped sigmoid
    routing, shared experts, a leading dense layer): 12 concurrent greedy requests sharing
    prefixes with the radix cache on, then cached prefixes again, each continuation equal to
    llama.cpp's greedy decoding. The KV pool keeps one buffer per layer (values inside keys)."""
    model = str(tmp_path / "deepseek-v3-f32.gguf")
    write_deepseek_gguf(model, "F32", seed=7, variant="v3")
    story = tokenize(model, STORY)
    prompts = [story[: 30 + 5 * i] for i in range(12)]
    expected = [llama_cpp_greedy(model, p, MAX_NEW) for p in prompts]
    srv = Server(model, "--skip-server-warmup", "--kv-cache-dtype", "float32")
    try:
        got = greedy_all_at_once(srv, prompts)
        again = [greedy(srv, p) for p in prompts[:3]]
        srv.assert_no_leak()
        logs = srv.log_path.read_text(errors="replace")
        assert "DeepseekV3ForCausalLM" in logs
        # One f32 row of kv_lora_rank + rope dims per token and layer, no separate values.
        assert "V size: 0.00 GB" in logs
        assert "bytes/token=640," in logs  # 4 layers x (32 + 8) x 4 bytes
    finally:
        assert srv.stop() == 0, srv.logs()
    assert got == expected
    assert again == expected[:3]


def write_arch(path, arch):
    """A random-weight F32 GGUF of `arch` (qwen3moe, gptoss or deepseek-v3) at `path`."""
    {"qwen3moe": lambda: write_gguf(path, "F32", seed=11),
     "gptoss": lambda: write_gptoss_gguf(path, "F32", seed=12),
     "deepseek-v3": lambda: write_deepseek_gguf(path, "F32", seed=7, variant="v3")}[arch]()


# (writer, --tp-size, --ep-size): whole experts per rank (ep = tp), every expert's rows split
# (ep 1), and both at once (tp 4 = 2 expert blocks of 2 ranks).
SPLITS = [("qwen3moe", 2, 2), ("qwen3moe", 2, 1), ("gptoss", 2, 2),
          ("deepseek-v3", 2, 2), ("deepseek-v3", 2, 1), ("deepseek-v3", 4, 2)]


@pytest.mark.parametrize("arch,tp,ep", SPLITS, ids=[f"{a}-tp{t}-ep{e}" for a, t, e in SPLITS])
def test_expert_parallel_greedy_matches_llama_cpp(tmp_path, arch, tp, ep):
    """The router runs on every rank, each rank computes its own experts' (and its share of the
    shared experts' and attention heads') contributions, the all-reduce sums them: 12 concurrent
    greedy requests give llama.cpp's greedy continuations on the same F32 file."""
    model = str(tmp_path / f"{arch}.gguf")
    write_arch(model, arch)
    story = tokenize(model, STORY)
    prompts = [story[: 30 + 5 * i] for i in range(12)]
    expected = [llama_cpp_greedy(model, p, MAX_NEW) for p in prompts]
    srv = Server(model, "--skip-server-warmup", "--tp-size", tp, "--ep-size", ep)
    try:
        got = greedy_all_at_once(srv, prompts)
        srv.assert_no_leak()
    finally:
        assert srv.stop() == 0, srv.logs()
    assert got == expected

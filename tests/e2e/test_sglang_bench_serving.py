"""SGLang's own benchmark client against radixserve: `python -m sglang.bench_serving` from the
sglang 0.5.23 wheel (in the torch venv, with the imports its module needs), over the native
streaming /generate route (--backend sglang, which warms up with SGLang's full request shape) and
the OpenAI routes (sglang-oai, sglang-oai-chat). Every request must complete with exactly the
token counts asked for (random-ids prompts of a fixed length, ignore_eos), as counted by the
server's usage and re-counted by the client's tokenizer."""
import json
import pathlib
import subprocess
import sys

import pytest

from server_util import SMOLLM2, Server

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[1] / "fixtures"))
from torch_env import smollm2_tokenizer_dir, torch_python  # noqa: E402

PROMPTS, INPUT_LEN, OUTPUT_LEN = 12, 64, 16


@pytest.fixture(scope="module")
def server():
    srv = Server(SMOLLM2)
    yield srv
    assert srv.stop() == 0, srv.logs()


@pytest.mark.parametrize("backend", ["sglang", "sglang-oai", "sglang-oai-chat"])
def test_bench_serving_completes_every_request(server, backend, tmp_path):
    out = tmp_path / "result.jsonl"
    proc = subprocess.run(
        [torch_python(), "-m", "sglang.bench_serving", "--backend", backend,
         "--base-url", server.url, "--tokenizer", smollm2_tokenizer_dir(),
         "--dataset-name", "random-ids", "--random-input-len", str(INPUT_LEN),
         "--random-output-len", str(OUTPUT_LEN), "--random-range-ratio", "1.0",
         "--num-prompts", str(PROMPTS), "--max-concurrency", "4", "--seed", "7",
         "--disable-tqdm", "--output-file", str(out)],
        capture_output=True, text=True, timeout=600, check=False, cwd=tmp_path)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    result = json.loads(out.read_text().splitlines()[-1])
    assert result["completed"] == PROMPTS, proc.stdout[-3000:]
    assert result["total_input_tokens"] == PROMPTS * INPUT_LEN
    assert result["total_output_tokens"] == PROMPTS * OUTPUT_LEN
    # The client detokenizes each output and counts it again; a token that merges with its
    # neighbour when re-encoded may count one less.
    assert abs(result["total_output_tokens_retokenized"] - PROMPTS * OUTPUT_LEN) <= PROMPTS
    assert result["mean_ttft_ms"] > 0 and result["output_throughput"] > 0
    server.assert_no_leak()

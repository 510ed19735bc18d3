"""bench/bench_serving.py --quick against a live radixserve serving SmolLM2 (issue 9).

Checks the JSON report's shape and that token counts are what was asked for: prompt lengths made
by the benchmark with llama.cpp's tokenizer (llama-cpp-python, vocabulary only) must equal the
prompt_tokens radixserve reports, and every request must stream exactly its requested output
tokens (ignore_eos). No timing is asserted.
"""
import json
import subprocess
import sys

import pytest

from server_util import REPO, SMOLLM2, Server

BENCH = REPO / "bench" / "bench_serving.py"
STAT_KEYS = {"mean", "median", "p99", "std"}
METRIC_KEYS = {"completed", "failed", "duration_s", "total_input_tokens", "total_output_tokens",
               "request_throughput", "input_throughput", "output_throughput",
               "total_token_throughput", "concurrency", "ttft_ms", "itl_ms", "tpot_ms", "e2e_ms"}


@pytest.fixture(scope="module")
def server():
    if not SMOLLM2.exists():
        pytest.fail(f"{SMOLLM2} missing: run scripts/setup")
    srv = Server(SMOLLM2, "--threads", "2")
    yield srv
    assert srv.stop() == 0, srv.logs()


def run_bench(server, tmp_path, *args):
    out = tmp_path / "report.json"
    proc = subprocess.run(
        [sys.executable, str(BENCH), "--quick", "--backend", "radixserve", "--base-url",
         server.url, "--tokenizer", str(SMOLLM2), "--output-file", str(out), "--output-details",
         *map(str, args)], capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "Output token throughput" in proc.stdout
    return json.loads(out.read_text())


def check_report(report, num_requests):
    metrics = report["metrics"]
    assert METRIC_KEYS <= metrics.keys()
    for key in ("ttft_ms", "itl_ms", "tpot_ms", "e2e_ms"):
        assert STAT_KEYS <= metrics[key].keys()
    assert metrics["completed"] == num_requests and metrics["failed"] == 0
    rows = report["requests"]
    assert len(rows) == num_requests
    for row in rows:
        assert row["success"], row["error"]
        assert row["prompt_tokens"] == row["prompt_len"], row
        assert row["completion_tokens"] == row["output_len"], row
        assert 0 < row["chunks"] <= row["output_len"], row
    assert metrics["total_input_tokens"] == sum(r["prompt_len"] for r in rows)
    assert metrics["total_output_tokens"] == sum(r["output_len"] for r in rows)


def test_random_fixed_lengths(server, tmp_path):
    report = run_bench(server, tmp_path, "--dataset-name", "random", "--num-prompts", 3,
                       "--random-input-len", 24, "--random-output-len", 6,
                       "--random-range-ratio", 1)
    check_report(report, 3)
    assert {r["prompt_len"] for r in report["requests"]} == {24}
    assert {r["output_len"] for r in report["requests"]} == {6}
    assert report["backend"] == "radixserve" and report["dataset"] == "random"


def test_random_token_ids_with_rate_and_concurrency(server, tmp_path):
    report = run_bench(server, tmp_path, "--dataset-name", "random", "--num-prompts", 4,
                       "--random-input-len", 20, "--random-output-len", 5,
                       "--random-range-ratio", 0.5, "--prompt-format", "ids",
                       "--request-rate", 20, "--max-concurrency", 2)
    check_report(report, 4)
    for row in report["requests"]:
        assert 10 <= row["prompt_len"] <= 20 and 2 <= row["output_len"] <= 5


def test_shared_prefix(server, tmp_path):
    report = run_bench(server, tmp_path, "--dataset-name", "generated-shared-prefix",
                       "--gsp-num-groups", 2, "--gsp-prompts-per-group", 2,
                       "--gsp-system-prompt-len", 16, "--gsp-question-len", 4,
                       "--gsp-output-len", 4)
    check_report(report, 4)
    # "{system}\n\n{question}": the blank line is one more token in this vocabulary.
    assert {r["prompt_len"] for r in report["requests"]} == {21}


def test_sharegpt_like(server, tmp_path):
    report = run_bench(server, tmp_path, "--dataset-name", "sharegpt", "--num-prompts", 3)
    check_report(report, 3)


def test_max_duration_cuts_off_and_bounds_ttft(server, tmp_path):
    # 1 client, 6 requests of 200 tokens: the run cannot finish in 1.5 s on this model. Requests
    # cut off are not failures; the report bounds the mean TTFT over all requests from below.
    report = run_bench(server, tmp_path, "--dataset-name", "random", "--num-prompts", 6,
                       "--random-input-len", 16, "--random-output-len", 200,
                       "--random-range-ratio", 1, "--max-concurrency", 1, "--max-duration", 1.5)
    metrics, rows = report["metrics"], report["requests"]
    assert metrics["cut_off"] >= 1 and metrics["completed"] + metrics["cut_off"] == 6
    assert metrics["duration_s"] < 10
    assert sum(1 for r in rows if r["error"] == "not sent") >= 1
    known = [r["ttft_s"] for r in rows if r["chunks"] > 0]
    assert metrics["ttft_mean_lower_bound_ms"] >= sum(known) / 6 * 1000.0 - 1e-6
    # The server saw the cancelled streams as aborts and is idle again.
    server.assert_no_leak()

"""The engine's "Done when" on SmolLM2 (issue 6), through a real server: 64 concurrent greedy
requests with overlapping prefixes produce exactly the tokens each produces alone
(--enable-deterministic-inference), across page sizes 1 and 16, chunk sizes 64 and 4096 and the
radix cache on and off; a KV pool too small for the load forces retractions and every request
still completes with the same tokens; the leak check holds after each run.

"Alone" is the same binary serving one request at a time with nothing cached
(--max-running-requests 1 --disable-radix-cache), so every difference would come from batching,
chunking, paging or prefix reuse.
"""
import concurrent.futures
import re

import pytest
import requests

from server_util import SMOLLM2, Server

MAX_NEW = 8
OPENINGS = ["The history of the city begins with", "In a small village near the river,",
            "To bake good bread you need", "The spacecraft left orbit and"]
ENDINGS = ["", " a", " the old", " many people who", " three", " nothing but", " some",
           " every single day"]
TAILS = ["", " and"]
PROMPTS = [o + e + t for t in TAILS for e in ENDINGS for o in OPENINGS]
assert len(PROMPTS) == 64 and len(set(PROMPTS)) == 64


def run_all(srv):
    def one(prompt):
        r = requests.post(srv.url + "/generate", json={
            "text": prompt, "sampling_params": {"max_new_tokens": MAX_NEW, "temperature": 0,
                                                "ignore_eos": True}}, timeout=600)
        assert r.status_code == 200, r.text
        body = r.json()
        assert body["meta_info"]["finish_reason"]["type"] == "length", body
        return body["output_ids"], body["meta_info"].get("cached_tokens", 0)

    with concurrent.futures.ThreadPoolExecutor(len(PROMPTS)) as pool:
        results = list(pool.map(one, PROMPTS))
    return [r[0] for r in results], sum(r[1] for r in results)


def serve(*args):
    if not SMOLLM2.exists():
        pytest.fail(f"{SMOLLM2} missing: run scripts/setup")
    return Server(SMOLLM2, "--skip-server-warmup", "--enable-deterministic-inference",
                  "--enable-cache-report", *args)


@pytest.fixture(scope="module")
def alone():
    srv = serve("--max-running-requests", "1", "--disable-radix-cache")
    try:
        outputs, _ = run_all(srv)
        srv.assert_no_leak()
    finally:
        assert srv.stop() == 0, srv.logs()
    return outputs


# Every value of each axis and every pair of axes' values at least once (all 8 combinations
# pass too, at 4 min on 2 cores; these 4 keep the suite near 2 min).
@pytest.mark.parametrize("page,chunk,radix", [(1, 64, True), (16, 4096, True), (1, 4096, False),
                                              (16, 64, False)])
def test_64_concurrent_equal_alone(alone, page, chunk, radix):
    args = ["--page-size", page, "--chunked-prefill-size", chunk]
    args += ["--schedule-policy", "lpm"] if radix else ["--disable-radix-cache"]
    srv = serve(*args)
    try:
        outputs, cached = run_all(srv)
        mismatched = [i for i in range(len(PROMPTS)) if outputs[i] != alone[i]]
        assert not mismatched, f"requests {mismatched} differ from their run alone"
        if not radix:
            assert cached == 0
        srv.assert_no_leak()
    finally:
        assert srv.stop() == 0, srv.logs()


def test_small_pool_retracts_and_all_complete(alone):
    # 64 requests of ~10-17 prompt tokens + 8 new ones need ~1500 slots; 512 forces retraction.
    srv = Server(SMOLLM2, "--skip-server-warmup", "--enable-deterministic-inference",
                 "--max-total-tokens", "512", "--chunked-prefill-size", "64",
                 "--schedule-conservativeness", "0.05")
    try:
        outputs, _ = run_all(srv)
        assert outputs == alone
        logs = srv.log_path.read_text(errors="replace")
        assert re.search(r"KV cache pool is full. Retract requests. #retracted_reqs: [1-9]", logs), \
            srv.logs()
        srv.assert_no_leak()
    finally:
        assert srv.stop() == 0, srv.logs()

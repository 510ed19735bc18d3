"""--dp-size 2 against a real server on SmolLM2: concurrent greedy requests are spread over both
replicas (each logs its own "[DP<rank>] Prefill batch" lines), produce the same tokens as the
same requests on a --dp-size 1 server, and every replica passes the leak check.
"""
import concurrent.futures

import pytest
import requests

from server_util import SMOLLM2, STORIES, Server

PROMPTS = [f"{opening} {topic}" for opening in ("Tell me about", "Write a line about",
                                                 "What is known of")
           for topic in ("the sea", "mountains", "a cat", "bread", "the moon", "rain")]


def greedy_outputs(srv):
    def one(prompt):
        r = requests.post(srv.url + "/generate", json={
            "text": prompt, "sampling_params": {"max_new_tokens": 12, "temperature": 0,
                                                "ignore_eos": True}}, timeout=300)
        assert r.status_code == 200, r.text
        return r.json()["output_ids"]

    with concurrent.futures.ThreadPoolExecutor(len(PROMPTS)) as pool:
        return list(pool.map(one, PROMPTS))


@pytest.fixture(scope="module")
def single_outputs():
    if not SMOLLM2.exists():
        pytest.fail(f"{SMOLLM2} missing: run scripts/setup")
    srv = Server(SMOLLM2, "--skip-server-warmup", "--enable-deterministic-inference")
    try:
        outputs = greedy_outputs(srv)
        srv.assert_no_leak()
    finally:
        assert srv.stop() == 0, srv.logs()
    return outputs


@pytest.mark.parametrize("method", ["round_robin", "shortest_queue", "minimum_tokens"])
def test_dp2_uses_both_replicas_and_matches_dp1(single_outputs, method):
    srv = Server(SMOLLM2, "--skip-server-warmup", "--enable-deterministic-inference",
                 "--dp-size", "2", "--load-balance-method", method)
    try:
        assert greedy_outputs(srv) == single_outputs
        logs = srv.log_path.read_text(errors="replace")
        assert "[DP0] Prefill batch" in logs and "[DP1] Prefill batch" in logs, srv.logs()
        # The KV budget (--max-total-tokens 16384 from server_util) is split between replicas.
        assert "[DP1] max_total_num_tokens=8192" in logs, srv.logs()
        info = srv.server_info()
        assert info["max_total_num_tokens"] == 16384
        srv.assert_no_leak()  # the leak check covers every replica
        load = requests.get(srv.url + "/get_load", timeout=30).json()
        assert [entry["dp_rank"] for entry in load] == [0, 1], load
        assert all(entry["num_reqs"] == 0 for entry in load), load
        r = requests.post(srv.url + "/flush_cache", timeout=30)
        assert r.status_code == 200, r.text
    finally:
        assert srv.stop() == 0, srv.logs()


def test_routed_dp_rank_sends_requests_to_the_replica_the_router_chose():
    srv = Server(STORIES, "--skip-server-warmup", "--dp-size", "2",
                 "--load-balance-method", "round_robin")
    try:
        for field in ("routed_dp_rank", "data_parallel_rank"):
            for i in range(4):
                r = requests.post(srv.url + "/generate", json={
                    "text": f"Once upon a time {i}", field: 1,
                    "sampling_params": {"max_new_tokens": 2}}, timeout=60)
                assert r.status_code == 200, r.text
        logs = srv.log_path.read_text(errors="replace")
        # Round robin alone would have put half of them on replica 0.
        assert "[DP1] Prefill batch" in logs and "[DP0] Prefill batch" not in logs, srv.logs()
        r = requests.post(srv.url + "/generate", json={"text": "x", "routed_dp_rank": 2},
                          timeout=60)
        assert r.status_code == 400 and "routed_dp_rank" in r.text, r.text
        srv.assert_no_leak()
    finally:
        assert srv.stop() == 0, srv.logs()

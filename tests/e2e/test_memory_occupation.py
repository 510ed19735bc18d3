"""/release_memory_occupation and /resume_memory_occupation (SGLang's tags and answers).

With --enable-memory-saver, releasing everything drops the model and the KV pool's pages: the
process's resident memory (the kernel's VmRSS, read from /proc) falls by most of the weights'
size; while released no step runs (a request sent meanwhile waits in the queue); resuming reads
the checkpoint again and that waiting request, like any other, then generates what llama.cpp
(llama-cpp-python) generates greedily from the same file. Without the flag the weights stay
loaded, as SGLang keeps them without its memory saver. Refusals (busy server, unknown tag, resume
of what is not released) are 400s and the server keeps serving."""
import concurrent.futures
import pathlib
import sys

import requests

from server_util import MODELS, STORIES, Server

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[1] / "oracle/model"))
from test_moe_oracle import llama_cpp_greedy  # noqa: E402
from test_update_weights import generate  # noqa: E402  (greedy /generate of token ids)

SMOLLM2_F32 = MODELS / "smollm2-135m-instruct-f32.gguf"  # F32: greedy output equals llama.cpp's
PROMPT = [1, 504, 3458, 282, 253, 1345, 30, 378, 357, 253]  # token ids of SmolLM2's vocabulary
MAX_NEW = 16


def call(srv, route, body=None, headers=None):
    return requests.post(srv.url + route, json=body, headers=headers, timeout=300)


def rss_bytes(srv):
    for line in pathlib.Path(f"/proc/{srv.proc.pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) * 1024
    raise AssertionError("no VmRSS line")


def state(srv):
    return srv.server_info()["internal_states"][0]


def queued(srv):
    return requests.get(srv.url + "/get_load", timeout=10).json()[0]["num_waiting_reqs"]


def test_release_frees_the_weights_and_resume_serves_them_again():
    want = llama_cpp_greedy(str(SMOLLM2_F32), PROMPT, MAX_NEW)
    srv = Server(SMOLLM2_F32, "--skip-server-warmup", "--enable-memory-saver")
    try:
        assert generate(srv, PROMPT, MAX_NEW)["output_ids"] == want
        before = rss_bytes(srv)
        r = call(srv, "/release_memory_occupation", {})
        assert r.status_code == 200 and r.json() is None, r.text
        assert state(srv)["memory_released"] == ["kv_cache", "weights"]
        after = rss_bytes(srv)
        # The F32 file is 540 MB, mapped and read.
        assert before - after > 400 * 2**20, (before, after)
        r = requests.post(srv.url + "/get_weights_by_name", json={"name": "lm_head.weight"},
                          timeout=30)
        assert r.status_code == 400 and "released" in r.text, r.text
        with concurrent.futures.ThreadPoolExecutor(1) as pool:
            waiting = pool.submit(generate, srv, PROMPT, MAX_NEW)
            for _ in range(2000):
                if queued(srv) == 1:
                    break
            assert queued(srv) == 1 and not waiting.done()
            r = call(srv, "/resume_memory_occupation", {"tags": ["weights", "kv_cache"]})
            assert r.status_code == 200 and r.json() is None, r.text
            out = waiting.result()
        assert out["output_ids"] == want
        assert out["meta_info"]["cached_tokens"] == 0  # the release flushed the prefix cache
        assert state(srv)["memory_released"] == []
        assert generate(srv, PROMPT, MAX_NEW)["output_ids"] == want
        srv.assert_no_leak()
    finally:
        assert srv.stop() == 0, srv.logs()


def test_tags_release_and_resume_one_region_at_a_time():
    srv = Server(STORIES, "--skip-server-warmup", "--enable-memory-saver", "--dp-size", "2")
    try:
        want = generate(srv, [1, 2, 3], MAX_NEW)["output_ids"]
        r = call(srv, "/release_memory_occupation", {"tags": ["kv_cache"]})
        assert r.status_code == 200, r.text
        assert state(srv)["memory_released"] == ["kv_cache"]
        r = call(srv, "/release_memory_occupation", {"tags": ["weights"]})
        assert r.status_code == 200, r.text
        assert state(srv)["memory_released"] == ["kv_cache", "weights"]
        r = call(srv, "/resume_memory_occupation", {"tags": ["weights"]})
        assert r.status_code == 200, r.text
        # The KV pool is still released: still no step.
        assert state(srv)["memory_released"] == ["kv_cache"]
        r = call(srv, "/resume_memory_occupation", {"tags": ["weights"]})
        assert r.status_code == 400 and "not released" in r.text, r.text
        r = call(srv, "/resume_memory_occupation", {"tags": ["kv_cache", "cuda_graph"]})
        assert r.status_code == 200, r.text
        for _ in range(2):  # both replicas
            assert generate(srv, [1, 2, 3], MAX_NEW)["output_ids"] == want
        srv.assert_no_leak()
    finally:
        assert srv.stop() == 0, srv.logs()


def test_without_the_memory_saver_the_weights_stay_loaded():
    srv = Server(STORIES, "--skip-server-warmup")
    try:
        want = generate(srv, [1, 2, 3], MAX_NEW)["output_ids"]
        r = call(srv, "/release_memory_occupation")
        assert r.status_code == 200, r.text
        assert state(srv)["memory_released"] == ["kv_cache"]
        r = requests.post(srv.url + "/get_weights_by_name",
                          json={"name": "model.norm.weight"}, timeout=30)
        assert r.status_code == 200, r.text
        r = call(srv, "/resume_memory_occupation")
        assert r.status_code == 200, r.text
        assert generate(srv, [1, 2, 3], MAX_NEW)["output_ids"] == want
        assert "--enable-memory-saver" in srv.logs()
    finally:
        assert srv.stop() == 0, srv.logs()


def test_refusals_leave_the_server_serving():
    srv = Server(STORIES, "--skip-server-warmup", "--enable-memory-saver",
                 "--admin-api-key", "secret")
    admin = {"Authorization": "Bearer secret"}
    try:
        r = call(srv, "/release_memory_occupation", {})
        assert r.status_code == 401, r.text
        for body, fragment in (({"tags": ["gpu"]}, "gpu"), ({"tags": "weights"}, "tags"),
                               ({"tags": [1]}, "tags"), ({"bogus": 1}, "bogus")):
            r = call(srv, "/release_memory_occupation", body, admin)
            assert r.status_code == 400 and fragment in r.text, r.text
        r = call(srv, "/resume_memory_occupation", {}, admin)
        assert r.status_code == 400 and "not released" in r.text, r.text
        # Busy: a request is running (held in place by an in_place pause, so it cannot finish
        # before the release arrives).
        with concurrent.futures.ThreadPoolExecutor(1) as pool:
            running = pool.submit(generate, srv, [1, 2, 3], 300)
            while requests.get(srv.url + "/get_load", timeout=10).json()[0]["num_reqs"] == 0:
                assert not running.done()
            r = call(srv, "/pause_generation", {"mode": "in_place"}, admin)
            assert r.status_code == 200, r.text
            if requests.get(srv.url + "/get_load", timeout=10).json()[0]["num_reqs"] > 0:
                r = call(srv, "/release_memory_occupation", {}, admin)
                assert r.status_code == 400 and "idle" in r.text, r.text
            else:  # it finished first: nothing to check this time
                assert running.done()
            assert call(srv, "/continue_generation", {}, admin).status_code == 200
            assert len(running.result()["output_ids"]) == 300
        assert state(srv)["memory_released"] == []
        srv.assert_no_leak(admin)
    finally:
        assert srv.stop() == 0, srv.logs()


def test_get_is_accepted_as_in_sglang():
    srv = Server(STORIES, "--skip-server-warmup")
    try:
        r = requests.get(srv.url + "/release_memory_occupation", timeout=60)
        assert r.status_code == 200 and r.json() is None, r.text
        r = requests.get(srv.url + "/resume_memory_occupation", timeout=60)
        assert r.status_code == 200 and r.json() is None, r.text
        assert generate(srv, [1, 2, 3], MAX_NEW)["output_ids"]
    finally:
        assert srv.stop() == 0, srv.logs()

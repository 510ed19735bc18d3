"""SGLang's control routes against a real server: /pause_generation (abort, retract, in_place)
and /continue_generation, /update_weight_version, /configure_logging, and their admin key.

The reference for a paused-and-continued greedy request is the same request run without a pause
(greedy decoding is deterministic); for logging, the request-log lines SGLang writes
("Receive: obj=GenerateReqInput(" ...)."""
import json
import threading
import time

import pytest
import requests

from server_util import SMOLLM2, STORIES, Server

PROMPT = "Write a long story about a lighthouse keeper and the sea."
LONG = {"text": PROMPT, "sampling_params": {"max_new_tokens": 160, "temperature": 0,
                                            "ignore_eos": True}}


def generate(server, body, headers=None):
    r = requests.post(server.url + "/generate", json=body, headers=headers, timeout=300)
    assert r.status_code == 200, r.text
    return r.json()


def state(server):
    return server.server_info()["internal_states"][0]


def wait_for(predicate, timeout=60):
    deadline = time.time() + timeout
    while time.time() < deadline:
        value = predicate()
        if value:
            return value
        time.sleep(0.02)
    raise AssertionError("condition not reached")


def quiet_count(chunks, quiet=0.3, timeout=30):
    """The number of chunks once none has arrived for `quiet` seconds: events the engine sent
    before a pause may still be on their way to the client when the pause answers. A stream whose
    steps go on (one event per step) never goes quiet."""
    deadline = time.time() + timeout
    count, since = len(chunks), time.time()
    while time.time() < deadline:
        time.sleep(0.02)
        if len(chunks) != count:
            count, since = len(chunks), time.time()
        elif time.time() - since >= quiet:
            return count
    raise AssertionError("the stream kept growing")


def stream_in_thread(server, body):
    """Starts a streamed /generate; returns (thread, chunks list, done event)."""
    chunks = []

    def run():
        with requests.post(server.url + "/generate", json={**body, "stream": True}, stream=True,
                           timeout=300) as r:
            assert r.status_code == 200
            for line in r.iter_lines():
                if line.startswith(b"data: ") and line != b"data: [DONE]":
                    chunks.append(json.loads(line[6:]))

    thread = threading.Thread(target=run)
    thread.start()
    return thread, chunks


@pytest.fixture(scope="module")
def server():
    s = Server(SMOLLM2, "--skip-server-warmup")
    yield s
    s.stop()


@pytest.fixture(scope="module")
def reference(server):
    """The long request's greedy output without any pause."""
    return generate(server, LONG)["text"]


def pause(server, mode=None, headers=None):
    body = {} if mode is None else {"mode": mode}
    return requests.post(server.url + "/pause_generation", json=body, headers=headers, timeout=60)


def resume(server, headers=None):
    return requests.post(server.url + "/continue_generation", json={}, headers=headers, timeout=60)


def paused_checks(server, chunks, thread, mode, retracted_before):
    st = state(server)
    assert st["paused"] is True
    # No step runs while paused: the request stays unfinished and its output stops growing.
    held = quiet_count(chunks)
    time.sleep(0.5)
    assert len(chunks) == held and thread.is_alive()
    if mode == "retract":
        assert st["num_retracted_reqs"] == retracted_before + 1
        assert st["num_queued_reqs"] == 1 and st["num_running_reqs"] == 0
    else:
        assert st["num_running_reqs"] == 1


@pytest.mark.parametrize("mode", ["in_place", "retract"])
def test_pause_and_continue_keeps_the_greedy_output(server, reference, mode):
    retracted_before = state(server)["num_retracted_reqs"]
    thread, chunks = stream_in_thread(server, LONG)
    wait_for(lambda: len(chunks) >= 5)
    r = pause(server, mode)
    try:
        assert r.status_code == 200, r.text
        assert r.json() == {"message": "Generation paused successfully.", "status": "ok"}
        paused_checks(server, chunks, thread, mode, retracted_before)
    except BaseException:
        resume(server)  # the module's other tests share this server
        raise
    # A request sent while paused waits in the queue and runs after continue.
    short = {"text": "The capital of France is", "sampling_params": {"max_new_tokens": 8,
                                                                     "temperature": 0}}
    later = {}
    waiter = threading.Thread(target=lambda: later.update(generate(server, short)))
    waiter.start()
    wait_for(lambda: state(server)["num_queued_reqs"] >= (2 if mode == "retract" else 1))
    assert waiter.is_alive()
    r = resume(server)
    assert r.status_code == 200, r.text
    assert r.json() == {"message": "Generation continued successfully.", "status": "ok"}
    thread.join(timeout=300)
    waiter.join(timeout=300)
    assert chunks[-1]["text"] == reference
    assert chunks[-1]["meta_info"]["finish_reason"]["type"] == "length"
    assert later["text"] == generate(server, short)["text"]
    assert state(server)["paused"] is False
    server.assert_no_leak()


def test_pause_abort_ends_requests_in_flight(server):
    thread, chunks = stream_in_thread(server, LONG)
    wait_for(lambda: len(chunks) >= 3)
    r = pause(server)  # mode defaults to abort
    assert r.status_code == 200, r.text
    thread.join(timeout=60)
    assert not thread.is_alive()
    assert chunks[-1]["meta_info"]["finish_reason"]["type"] == "abort"
    assert chunks[-1]["meta_info"]["completion_tokens"] < 160
    assert state(server)["paused"] is True
    assert resume(server).status_code == 200
    assert generate(server, {"text": "Hi", "sampling_params": {"max_new_tokens": 4}})["text"]
    server.assert_no_leak()


def test_pause_rejects_an_unknown_mode(server):
    r = pause(server, "sideways")
    assert r.status_code == 400
    assert "sideways" in r.json()["message"]
    assert state(server)["paused"] is False


def test_update_weight_version(server):
    r = requests.post(server.url + "/update_weight_version", json={"new_version": "v2"},
                      timeout=30)
    assert r.status_code == 200, r.text
    assert r.json() == {"success": True, "message": "Weight version updated to v2",
                        "new_version": "v2"}
    assert requests.get(server.url + "/model_info", timeout=30).json()["weight_version"] == "v2"
    out = generate(server, {"text": "Hi", "sampling_params": {"max_new_tokens": 2}})
    assert out["meta_info"]["weight_version"] == "v2"
    r = requests.post(server.url + "/update_weight_version", json={}, timeout=30)
    assert r.status_code == 400 and "new_version" in r.text


def test_configure_logging_turns_the_request_log_on_and_off(server):
    def receive_lines(marker):
        server.log.flush()
        return [line for line in server.log_path.read_text(errors="replace").splitlines()
                if "Receive: obj=GenerateReqInput(" in line and marker in line]

    generate(server, {"text": "marker-one", "sampling_params": {"max_new_tokens": 1}})
    time.sleep(0.2)
    assert receive_lines("marker-one") == []  # started without --log-requests
    r = requests.post(server.url + "/configure_logging",
                      json={"log_requests": True, "log_requests_level": 2}, timeout=30)
    assert r.status_code == 200, r.text
    generate(server, {"text": "marker-two", "sampling_params": {"max_new_tokens": 1}})
    lines = wait_for(lambda: receive_lines("marker-two"), timeout=10)
    # Level 2 shows the text and the sampling parameters.
    assert "text='marker-two'" in lines[0] and "sampling_params=" in lines[0], lines[0]
    r = requests.post(server.url + "/configure_logging", json={"log_requests": False}, timeout=30)
    assert r.status_code == 200
    generate(server, {"text": "marker-three", "sampling_params": {"max_new_tokens": 1}})
    time.sleep(0.2)
    assert receive_lines("marker-three") == []
    bad = requests.post(server.url + "/configure_logging", json={"log_level": "loud"}, timeout=30)
    assert bad.status_code == 400
    unsupported = requests.post(server.url + "/configure_logging",
                                json={"dump_requests_folder": "/tmp/x"}, timeout=30)
    assert unsupported.status_code == 400 and "dump_requests_folder" in unsupported.text


def test_control_routes_need_the_admin_key():
    s = Server(SMOLLM2, "--skip-server-warmup", "--api-key", "user-key", "--admin-api-key",
               "admin-key")
    try:
        for path in ["/pause_generation", "/continue_generation", "/update_weight_version",
                     "/configure_logging"]:
            r = requests.post(s.url + path, json={}, headers={"Authorization": "Bearer user-key"},
                              timeout=30)
            assert r.status_code == 401, (path, r.status_code, r.text)
        admin = {"Authorization": "Bearer admin-key"}
        assert pause(s, "in_place", headers=admin).status_code == 200
        assert resume(s, headers=admin).status_code == 200
    finally:
        s.stop()


def test_pause_with_data_parallel_replicas():
    s = Server(SMOLLM2, "--skip-server-warmup", "--dp-size", "2")
    try:
        ref = generate(s, LONG)["text"]
        thread, chunks = stream_in_thread(s, LONG)
        wait_for(lambda: len(chunks) >= 5)
        assert pause(s, "retract").status_code == 200
        assert s.server_info()["internal_states"][0]["paused"] is True
        assert resume(s).status_code == 200
        thread.join(timeout=300)
        assert chunks[-1]["text"] == ref
        s.assert_no_leak()
    finally:
        s.stop()


def read_trace(path):
    """A Chrome Trace Event Format file: its complete (ph X) step events, checked against the
    format's required fields."""
    with open(path) as f:
        trace = json.load(f)
    events = trace["traceEvents"]
    steps = [e for e in events if e["ph"] == "X"]
    for e in steps:
        assert {"name", "ts", "dur", "pid", "tid"} <= e.keys(), e
        assert isinstance(e["ts"], int) and isinstance(e["dur"], int) and e["dur"] >= 0
    assert [e["ts"] for e in steps] == sorted(e["ts"] for e in steps)
    assert any(e["ph"] == "M" and e["name"] == "process_name" for e in events)
    return steps


def test_profile_records_each_step(server, tmp_path):
    r = requests.post(server.url + "/start_profile",
                      json={"output_dir": str(tmp_path), "profile_id": "p1"}, timeout=30)
    assert r.status_code == 200 and r.text == "Start profiling.\n"
    again = requests.post(server.url + "/start_profile", json={}, timeout=30)
    assert again.status_code == 400
    assert "already in progress" in again.text
    generate(server, {"text": "Count to ten:", "sampling_params": {"max_new_tokens": 8,
                                                                    "temperature": 0,
                                                                    "ignore_eos": True}})
    r = requests.post(server.url + "/stop_profile", timeout=30)
    assert r.status_code == 200, r.text
    path = tmp_path / "p1-DP-0.trace.json"
    wait_for(path.exists, timeout=30)
    steps = read_trace(path)
    # One request of 8 new tokens: one prefill step, then seven decode steps of one sequence.
    assert [e["name"] for e in steps] == ["prefill"] + ["decode"] * 7
    assert all(e["args"]["num_seqs"] == 1 for e in steps)
    assert [e["args"]["num_tokens"] for e in steps[1:]] == [1] * 7
    assert requests.post(server.url + "/stop_profile", timeout=30).status_code == 400


def test_rtp_profiler_dir_is_where_traces_go_without_output_dir(tmp_path):
    """RTP-LLM's --torch-cuda-profiler-dir: the default directory of /start_profile's trace."""
    srv = Server(STORIES, "--skip-server-warmup", "--torch-cuda-profiler-dir", tmp_path)
    try:
        assert requests.post(srv.url + "/start_profile", json={"profile_id": "rtp"},
                             timeout=30).status_code == 200
        generate(srv, {"text": "Once", "sampling_params": {"max_new_tokens": 2}})
        assert requests.post(srv.url + "/stop_profile", timeout=30).status_code == 200
        wait_for((tmp_path / "rtp-DP-0.trace.json").exists, timeout=30)
    finally:
        srv.stop()
    assert "--torch-cuda-profiler-dir has no effect" not in srv.log_path.read_text()


def test_profile_num_steps_and_stages(server, tmp_path):
    body = {"text": "Tell me about the moon.", "sampling_params": {"max_new_tokens": 40,
                                                                   "temperature": 0,
                                                                   "ignore_eos": True}}
    worker = threading.Thread(target=lambda: generate(server, body))
    holder = {}
    # With num_steps the call answers when the recording is complete.
    starter = threading.Thread(target=lambda: holder.update(r=requests.post(
        server.url + "/start_profile",
        json={"output_dir": str(tmp_path), "profile_id": "p2", "num_steps": 5,
              "profile_stages": ["decode"], "detailed_annotations": True,
              "activities": ["CPU", "GPU"]}, timeout=120)))
    starter.start()
    time.sleep(0.2)
    worker.start()
    starter.join(timeout=120)
    worker.join(timeout=120)
    assert holder["r"].status_code == 200, holder["r"].text
    steps = read_trace(tmp_path / "p2-DP-0.trace.json")
    assert [e["name"] for e in steps] == ["decode"] * 5
    assert all("token_usage" in e["args"] and "num_running_reqs" in e["args"] for e in steps)
    bad = requests.post(server.url + "/start_profile", json={"profile_stages": ["warmup"]},
                        timeout=30)
    assert bad.status_code == 400


def test_set_internal_state_refuses_knobs_this_server_does_not_have(server):
    # SGLang answers one bool per replica; a knob without an update handler is refused.
    r = requests.post(server.url + "/set_internal_state",
                      json={"server_args": {"pp_max_micro_batch_size": 8}}, timeout=30)
    assert r.status_code == 200 and r.json() == [False]
    assert requests.post(server.url + "/set_internal_state", json={"server_args": {}},
                         timeout=30).json() == [True]
    assert requests.post(server.url + "/set_internal_state", json={}, timeout=30).status_code == 400
    assert requests.post(server.url + "/set_internal_state",
                         json={"server_args": {"x": "big"}}, timeout=30).status_code == 400

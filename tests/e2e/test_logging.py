"""Logging flags against a real server: uvicorn-style access lines (--log-level,
--log-level-http), SGLang's request log (--log-requests, --log-requests-level 0..3) and the crash
dump (--crash-dump-folder) on a fatal signal and on SIGTERM.

References are independent of radixserve: Python's own repr() for the logged values, uvicorn's
access-line format, and `pickle.load` for the dump file."""
import http.client
import json
import os
import pathlib
import pickle
import re
import signal
import socket
import threading
import time

import pytest
import requests

from server_util import SMOLLM2, Server

ACCESS_RE = re.compile(r'^\[\d{4}-\d\d-\d\d \d\d:\d\d:\d\d\] INFO:     (\S+) - "([A-Z]+) (\S+) '
                       r'HTTP/(1\.[01])" (\d{3}) (.+)$')


def raw_request(server, method, path, body=None):
    """One request on a fresh connection; returns (status, body, client port)."""
    conn = http.client.HTTPConnection("127.0.0.1", server.port, timeout=60)
    conn.connect()
    port = conn.sock.getsockname()[1]
    headers = {"Content-Type": "application/json"} if body is not None else {}
    conn.request(method, path, body=json.dumps(body) if body is not None else None,
                 headers=headers)
    resp = conn.getresponse()
    data = resp.read()
    conn.close()
    return resp.status, data, port


def full_log(server):
    server.log.flush()
    return server.log_path.read_text(errors="replace")


def wait_for_line(server, predicate, timeout=10):
    deadline = time.time() + timeout
    while time.time() < deadline:
        lines = [line for line in full_log(server).splitlines() if predicate(line)]
        if lines:
            return lines
        time.sleep(0.05)
    return []


GEN = {"text": "The capital of France is",
       "sampling_params": {"max_new_tokens": 4, "temperature": 0}}


# --- access log -------------------------------------------------------------------------------

def test_access_lines_follow_uvicorn_format():
    server = Server(SMOLLM2, "--skip-server-warmup")
    try:
        status, _, port = raw_request(server, "POST", "/generate", GEN)
        assert status == 200
        status404, _, port404 = raw_request(server, "GET", "/no/such/route?x=1")
        assert status404 == 404
        want = f'INFO:     127.0.0.1:{port} - "POST /generate HTTP/1.1" 200 OK'
        lines = wait_for_line(server, lambda line: line.endswith(want))
        assert lines, full_log(server)[-3000:]
        assert ACCESS_RE.match(lines[0]), lines[0]
        want404 = f'INFO:     127.0.0.1:{port404} - "GET /no/such/route?x=1 HTTP/1.1" 404 Not Found'
        assert wait_for_line(server, lambda line: line.endswith(want404))
        # A stream is logged when it opens, with 200.
        with requests.post(server.url + "/generate", json={**GEN, "stream": True},
                           stream=True, timeout=60) as r:
            assert r.status_code == 200
            r.content  # noqa: B018 - drain
        assert wait_for_line(server, lambda line: '"POST /generate HTTP/1.1" 200 OK' in line
                             and f":{port} " not in line)
    finally:
        server.stop()


@pytest.mark.parametrize("flags,access_expected,info_expected", [
    (["--log-level-http", "warning"], False, True),
    (["--log-level", "warning"], False, False),  # --log-level-http follows --log-level
    (["--log-level", "warning", "--log-level-http", "info"], True, False),
])
def test_log_level_http_governs_access_lines(flags, access_expected, info_expected):
    server = Server(SMOLLM2, "--skip-server-warmup", *flags)
    try:
        for _ in range(2):
            assert raw_request(server, "GET", "/health")[0] == 200
        time.sleep(0.3)
        log = full_log(server)
        assert ('"GET /health HTTP/1.1" 200 OK' in log) == access_expected, log[-2000:]
        assert ("ready to roll" in log) == info_expected, log[-2000:]
    finally:
        server.stop()


# --- request log ------------------------------------------------------------------------------

@pytest.fixture(scope="module", params=[0, 1, 2, 3])
def logged_server(request):
    server = Server(SMOLLM2, "--skip-server-warmup", "--log-requests",
                    "--log-requests-level", request.param)
    yield request.param, server
    server.stop()


def receive_and_finish(server, rid):
    recv = wait_for_line(server, lambda line: "Receive: obj=GenerateReqInput(" in line
                         and f"rid='{rid}'" in line)
    fin = wait_for_line(server, lambda line: "Finish: obj=GenerateReqInput(" in line
                        and f"rid='{rid}'" in line)
    assert len(recv) == 1 and len(fin) == 1, full_log(server)[-3000:]
    return recv[0], fin[0]


def test_no_logs_keeps_a_request_out_of_the_request_log(logged_server):
    """SGLang's no_logs (zero data retention): the request is served but never logged; the
    next one is."""
    level, server = logged_server
    body = {"text": "A secret prompt", "sampling_params": {"max_new_tokens": 2}}
    r = requests.post(server.url + "/generate", timeout=120,
                      json={**body, "rid": f"zdr-{level}", "no_logs": True})
    assert r.status_code == 200, r.text
    requests.post(server.url + "/generate", json={**body, "rid": f"after-{level}"}, timeout=120)
    receive_and_finish(server, f"after-{level}")
    assert f"zdr-{level}" not in full_log(server)


def test_request_log_levels(logged_server):
    level, server = logged_server
    prompt = "Paris is a city. " * 150  # 2,550 characters: longer than level 2's 2,048
    body = {"text": prompt, "rid": f"log-{level}",
            "sampling_params": {"max_new_tokens": 5, "temperature": 0, "ignore_eos": True}}
    out = requests.post(server.url + "/generate", json=body, timeout=120).json()
    recv, fin = receive_and_finish(server, f"log-{level}")
    obj = recv.split("Receive: obj=", 1)[1]
    assert fin.split("Finish: obj=", 1)[1].startswith(obj + ", out={")
    out_part = fin.split(", out=", 1)[1]
    meta = out["meta_info"]
    # Metadata at every level, rendered as Python does.
    assert "stream=False" in obj and "return_logprob=False" in obj
    assert "'finish_reason': {'type': 'length', 'length': 5}" in out_part
    assert f"'prompt_tokens': {meta['prompt_tokens']}" in out_part
    assert f"'completion_tokens': 5" in out_part
    if level <= 1:
        assert "text=" not in obj and "input_ids=" not in obj
        assert "'text':" not in out_part and "'output_ids':" not in out_part
        assert ("sampling_params={'max_new_tokens': 5," in obj) == (level == 1), obj[:300]
        if level == 1:
            assert "'ignore_eos': True" in obj
    elif level == 2:
        cut = repr(prompt[:1024]) + " ... " + repr(prompt[-1024:])
        assert "text=" + cut + ", input_ids=" in obj
        assert "'text': " + repr(out["text"]) in out_part
        assert f"'output_ids': {out['output_ids']!r}" in out_part
    else:
        assert "text=" + repr(prompt) + ", input_ids=" in obj
        assert " ... " not in obj
        assert "'text': " + repr(out["text"]) in out_part


def test_request_log_covers_openai_routes(logged_server):
    level, server = logged_server
    if level != 3:
        pytest.skip("one level is enough")
    body = {"model": "x", "messages": [{"role": "user", "content": "Say 'hi' \"twice\"\n"}],
            "max_tokens": 3, "temperature": 0, "rid": "chat-log"}
    reply = requests.post(server.url + "/v1/chat/completions", json=body, timeout=60).json()
    recv, fin = receive_and_finish(server, "chat-log")
    # The templated prompt holds both quote kinds and a newline: Python's repr rules.
    assert "Say \\'hi\\' \"twice\"\\n" in recv
    assert "'text': " + repr(reply["choices"][0]["message"]["content"]) in fin


def test_rtp_py_inference_log_response_logs_each_response():
    """RTP-LLM's --py-inference-log-response: the request log comes on, at a level that shows
    the response's text (here for RTP-LLM's own POST / request)."""
    server = Server(SMOLLM2, "--skip-server-warmup", "--py-inference-log-response", "true")
    try:
        r = requests.post(server.url + "/", timeout=120, json={
            "prompt": "The capital of France is",
            "generate_config": {"max_new_tokens": 4, "top_k": 1}})
        assert r.status_code == 200, r.text
        fin = wait_for_line(server, lambda line: "Finish: obj=GenerateReqInput(" in line)
        assert len(fin) == 1, full_log(server)[-3000:]
        assert "'text': " + repr(r.json()["response"]) in fin[0]
    finally:
        assert server.stop() == 0


def test_without_py_inference_log_response_nothing_is_logged():
    server = Server(SMOLLM2, "--skip-server-warmup", "--py-inference-log-response", "false")
    try:
        requests.post(server.url + "/generate", json=GEN, timeout=120)
        assert "Finish: obj=" not in full_log(server)
    finally:
        assert server.stop() == 0


# --- crash dump -------------------------------------------------------------------------------

def dump_dir(folder):
    return pathlib.Path(folder) / (os.environ.get("HOSTNAME") or socket.gethostname())


def start_long_stream(server, rid):
    """Opens a streaming request that stays unfinished; returns once its first token arrived."""
    got_token = threading.Event()

    def run():
        body = {"text": "Once upon a time", "rid": rid, "stream": True,
                "sampling_params": {"max_new_tokens": 4000, "ignore_eos": True}}
        try:
            with requests.post(server.url + "/generate", json=body, stream=True,
                               timeout=120) as r:
                for line in r.iter_lines():
                    if line.startswith(b"data:"):
                        got_token.set()
        except requests.RequestException:
            pass

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    assert got_token.wait(60)
    return thread


def load_dump(folder):
    files = sorted(dump_dir(folder).glob("crash_dump_*.pkl"))
    assert len(files) == 1, list(pathlib.Path(folder).rglob("*"))
    assert re.fullmatch(r"crash_dump_\d{4}-\d\d-\d\d_\d\d-\d\d-\d\d\.pkl", files[0].name)
    with open(files[0], "rb") as f:
        return pickle.load(f)


@pytest.mark.parametrize("sig", [signal.SIGSEGV, signal.SIGABRT])
def test_crash_dump_on_fatal_signal(tmp_path, sig):
    folder = tmp_path / "dumps"
    server = Server(SMOLLM2, "--skip-server-warmup", "--crash-dump-folder", folder,
                    "--max-running-requests", 4)
    try:
        texts = {}
        for i in range(2):
            body = {**GEN, "rid": f"done-{i}"}
            texts[f"done-{i}"] = requests.post(server.url + "/generate", json=body,
                                               timeout=60).json()["text"]
        start = time.time()
        start_long_stream(server, "running-0")
        os.kill(server.proc.pid, sig)
        assert server.proc.wait(timeout=30) == -sig  # re-raised: killed by the same signal
    finally:
        server.stop()
    dump = load_dump(folder)
    assert dump["server_args"]["crash_dump_folder"] == str(folder)
    by_rid = {obj["rid"]: (obj, out, created, finished)
              for obj, out, created, finished in dump["requests"]}
    assert set(by_rid) == {"done-0", "done-1", "running-0"}
    for rid, text in texts.items():
        obj, out, created, finished = by_rid[rid]
        assert out["text"] == text and out["meta_info"]["id"] == rid
        assert obj["sampling_params"]["max_new_tokens"] == 4
        assert start - 120 < created <= finished <= time.time()
    obj, out, created, finished = by_rid["running-0"]
    assert out == {} and obj["stream"] is True and created <= finished
    assert ("Dumped 2 finished and 1 unfinished requests before crash to"
            in server.log_path.read_text(errors="replace"))


def test_crash_dump_on_sigterm_and_not_without_requests(tmp_path):
    folder = tmp_path / "dumps"
    server = Server(SMOLLM2, "--skip-server-warmup", "--crash-dump-folder", folder)
    try:
        requests.post(server.url + "/generate", json={**GEN, "rid": "term-0"}, timeout=60)
    finally:
        assert server.stop() == 0
    dump = load_dump(folder)
    assert [obj["rid"] for obj, *_ in dump["requests"]] == ["term-0"]

    empty = tmp_path / "empty"
    server = Server(SMOLLM2, "--skip-server-warmup", "--crash-dump-folder", empty)
    os.kill(server.proc.pid, signal.SIGSEGV)
    assert server.proc.wait(timeout=30) == -signal.SIGSEGV
    server.stop()
    assert not empty.exists() or not list(empty.rglob("*.pkl"))

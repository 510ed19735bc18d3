"""Helpers of the fault-and-abuse suite (imported by module name; keep the name unique)."""
import json
import pathlib
import resource
import signal
import socket
import sys
import threading
import time

import requests

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[1] / "e2e"))

from server_util import BUILD, STORIES, Server, free_port  # noqa: E402,F401 (re-exported)

JSON = {"Content-Type": "application/json"}
TIMEOUT = 30  # seconds; the default bound on every request in this suite
CHAT = "/v1/chat/completions"
COMPLETIONS = "/v1/completions"

# ------------------------------------------------------------------------------------------------
# /proc helpers


def proc_status(pid, key):
    """An integer field of /proc/<pid>/status (kB for memory fields)."""
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith(key + ":"):
                return int(line.split()[1])
    raise KeyError(key)


def rss_bytes(pid):
    return proc_status(pid, "VmRSS") * 1024


def thread_count(pid):
    return proc_status(pid, "Threads")


# ------------------------------------------------------------------------------------------------
# Servers


class FaultServer(Server):
    """Server with a cap on its private writable memory, so that an amplification bug in the
    binary under test fails the test (allocation failure) instead of exhausting the machine."""

    def __init__(self, model, *args, data_limit_gb=3, **kwargs):
        super().__init__(model, *args, **kwargs)
        self.pid = self.proc.pid
        if data_limit_gb:
            limit = proc_status(self.pid, "VmData") * 1024 + int(data_limit_gb * 2**30)
            try:
                resource.prlimit(self.pid, resource.RLIMIT_DATA, (limit, limit))
            except (OSError, ValueError):
                pass

    def alive(self):
        return self.proc.poll() is None

    def rss(self):
        return rss_bytes(self.pid)

    def threads(self):
        return thread_count(self.pid)

    def kill(self):
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGKILL)
            self.proc.wait(timeout=30)
        self.log.close()


def log_tail(server, chars=4000):
    """The end of the server's log (also after stop() closed it)."""
    return server.log_path.read_text(errors="replace")[-chars:]


def start_server(model, *args, **kwargs):
    return FaultServer(model, *args, **kwargs)


def finish_module(server, headers=None):
    """Module teardown: the server is alive, has no KV leak and serves a normal /generate;
    then it stops cleanly."""
    try:
        assert_alive(server, headers)
        server.assert_no_leak(headers=headers)
        assert_generates(server, headers=headers)
        server.assert_no_leak(headers=headers)
    finally:
        code = server.stop()
    assert code == 0, f"radixserve exited with {code}:\n{log_tail(server)}"


def assert_generates(server, headers=None):
    r = requests.post(server.url + "/generate", headers=headers, timeout=TIMEOUT,
                      json={"text": "Once upon a time",
                            "sampling_params": {"max_new_tokens": 4, "temperature": 0}})
    assert r.status_code == 200, r.text
    body = r.json()
    assert isinstance(body.get("text"), str), body
    assert body["meta_info"]["completion_tokens"] >= 1, body


def assert_alive(server, headers=None):
    assert server.alive(), f"radixserve died (status {server.proc.returncode}):\n{server.logs()}"
    r = requests.get(server.url + "/health", headers=headers, timeout=TIMEOUT)
    assert r.status_code == 200, r.text


# ------------------------------------------------------------------------------------------------
# Requests and error bodies


def post(server, path, body=None, data=None, headers=None, timeout=TIMEOUT, **kwargs):
    """POSTs `body` as JSON, or `data` (str/bytes) verbatim as application/json."""
    hdrs = dict(JSON)
    hdrs.update(headers or {})
    if body is not None:
        data = json.dumps(body)
    if isinstance(data, str):
        data = data.encode()
    return requests.post(server.url + path, data=data, headers=hdrs, timeout=timeout, **kwargs)


def error_message(response):
    """The message of a native ({"error": {"message"}}) or OpenAI ({"message"}) error body."""
    try:
        body = response.json()
    except ValueError:
        return ""
    if not isinstance(body, dict):
        return ""
    err = body.get("error")
    if isinstance(err, dict) and isinstance(err.get("message"), str):
        return err["message"]
    if isinstance(body.get("message"), str):
        return body["message"]
    if isinstance(err, str):
        return err
    if isinstance(body.get("detail"), str):
        return body["detail"]
    return ""


def assert_error(response, status=400, *words):
    """`status` with a JSON error body whose message contains every one of `words`
    (case-insensitive; a tuple among `words` means any one of its members)."""
    assert response.status_code == status, (response.status_code, response.text[:500])
    message = error_message(response)
    assert message, response.text[:500]
    low = message.lower()
    for word in words:
        options = word if isinstance(word, tuple) else (word,)
        assert any(o.lower() in low for o in options), (options, message)
    return message


def sse_events(response):
    """The `data:` payloads of an SSE response, as strings, in order (reads to the end)."""
    events = []
    for line in response.iter_lines(decode_unicode=True):
        if line and line.startswith("data:"):
            events.append(line[5:].strip())
    return events


def wait_until(predicate, timeout, interval=0.05):
    deadline = time.time() + timeout
    while time.time() < deadline:
        value = predicate()
        if value:
            return value
        time.sleep(interval)
    return predicate()


def wait_idle(server, timeout=30, headers=None):
    def idle():
        state = server.server_info(headers)["internal_states"][0]
        return state.get("num_running_reqs", 0) == 0 and state.get("num_queued_reqs", 0) == 0
    assert wait_until(idle, timeout, 0.1), "server did not become idle"


def port_is_free(port):
    with socket.socket() as s:
        s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            s.bind(("127.0.0.1", port))
        except OSError:
            return False
        return True


class Stream:
    """A streaming POST read on a thread: its SSE `data:` payloads, any read error (e.g.
    ChunkedEncodingError) and when the stream ended."""

    def __init__(self, server, body, path="/generate", timeout=TIMEOUT):
        self.response = requests.post(server.url + path, json=body, stream=True, timeout=timeout)
        self.events = []
        self.error = None
        self.ended_at = None
        self.first = threading.Event()
        self._lines = self.response.iter_lines(decode_unicode=True)
        self._thread = threading.Thread(target=self._read, daemon=True)
        self._thread.start()

    def _read(self):
        try:
            for line in self._lines:
                if line and line.startswith("data:"):
                    self.events.append(line[5:].strip())
                    self.first.set()
        except Exception as e:  # noqa: BLE001 - reported by the test
            self.error = e
        finally:
            self.ended_at = time.time()
            self.first.set()

    def wait_first(self, timeout=60):
        assert self.first.wait(timeout), "no first event"
        assert self.events, f"stream ended without events: {self.error}"
        return json.loads(self.events[0])

    def join(self, timeout=120):
        self._thread.join(timeout)
        assert not self._thread.is_alive(), "stream did not end"
        assert self.error is None, repr(self.error)

    def final(self):
        assert self.events and self.events[-1] == "[DONE]", self.events[-3:]
        return json.loads(self.events[-2])

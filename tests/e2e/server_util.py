"""Starts a real radixserve process for black-box tests and stops it afterwards."""
import os
import pathlib
import random
import socket
import subprocess
import sys
import time

import requests

REPO = pathlib.Path(__file__).resolve().parents[2]
BUILD = pathlib.Path(os.environ.get("RADIX_BUILD_DIR",
                                    pathlib.Path.home() / ".cache/radixserve/build/release"))
MODELS = pathlib.Path(os.environ.get("RADIX_MODELS",
                                     pathlib.Path.home() / ".cache/radixserve/models"))
SHARED = pathlib.Path(os.environ.get("RADIX_SHARED_DIR", REPO.parent / "shared"))
SMOLLM2 = MODELS / "smollm2-135m-instruct-q4_1.gguf"
STORIES = SHARED / "models/stories260K/gguf/stories260K.gguf"


def _ephemeral_low():
    try:
        return int(pathlib.Path("/proc/sys/net/ipv4/ip_local_port_range").read_text().split()[0])
    except (OSError, ValueError, IndexError):
        return 32768


def cpu_flags():
    """The CPU's feature flags as /proc/cpuinfo lists them."""
    with open("/proc/cpuinfo") as f:
        for line in f:
            if line.startswith("flags"):
                return set(line.split(":", 1)[1].split())
    return set()


_handed_out = set()


def _worker_range(low, high):
    """This pytest-xdist worker's share of [low, high): workers start servers at the same time,
    and two picking the same free port would have one server fail to listen."""
    count = int(os.environ.get("PYTEST_XDIST_WORKER_COUNT", "1") or 1)
    worker = os.environ.get("PYTEST_XDIST_WORKER", "gw0")
    index = int(worker[2:]) if worker[2:].isdigit() else 0
    span = (high - low) // max(1, count)
    return low + index % max(1, count) * span, low + (index % max(1, count) + 1) * span


def free_port():
    """A loopback port that is free now, taken below the kernel's ephemeral range: a port the
    kernel hands out for bind(0) can be given to another socket between this check and the
    server's bind (a tensor-parallel rank's gloo listener took a server's HTTP port that way), one
    below the range is never handed out. Each xdist worker draws from its own part of the range,
    and a process never gets the same port twice."""
    high = min(_ephemeral_low(), 32768)
    low, high = _worker_range(max(1024, high - 12000), high)
    for _ in range(200):
        port = random.randrange(low, high)
        if port in _handed_out:
            continue
        with socket.socket() as s:
            try:
                s.bind(("127.0.0.1", port))
            except OSError:
                continue
        _handed_out.add(port)
        return port
    with socket.socket() as s:  # everything below the range taken: let the kernel choose
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Server:
    """radixserve on a free loopback port; `url` is its base URL. `binary`: another radixserve
    build than the one under test (benchmarks comparing builds)."""

    def __init__(self, model, *args, startup_timeout=180, env=None, preexec_fn=None, binary=None):
        for _ in range(3):
            if self._start(model, args, startup_timeout, env, preexec_fn, binary):
                return
            # Another program took the port between free_port's check and the server's bind.
            self.log.close()
        raise RuntimeError(f"radixserve found no free port in 3 tries:\n{self.logs()}")

    def _start(self, model, args, startup_timeout, env, preexec_fn, binary):
        """True once healthy; False when the port was taken before the server could listen."""
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        cmd = [str(binary or BUILD / "radixserve"), "--model-path", str(model), "--host", "127.0.0.1",
               "--port", str(self.port), "--max-total-tokens", "16384", *map(str, args)]
        self.log_path = pathlib.Path(os.environ.get("TMPDIR", "/tmp")) / f"radixserve-{self.port}.log"
        self.log = open(self.log_path, "w")
        self.proc = subprocess.Popen(cmd, stdout=self.log, stderr=subprocess.STDOUT,
                                     env=None if env is None else {**os.environ, **env},
                                     preexec_fn=preexec_fn)
        deadline = time.time() + startup_timeout
        while time.time() < deadline:
            if self.proc.poll() is not None:
                if f"cannot listen on 127.0.0.1:{self.port}: Address already in use" in self.logs():
                    return False
                raise RuntimeError(f"radixserve exited with {self.proc.returncode}:\n{self.logs()}")
            try:
                if requests.get(self.url + "/health", timeout=2).status_code == 200:
                    return True
            except requests.RequestException:
                pass
            time.sleep(0.2)
        self.stop()
        raise RuntimeError(f"radixserve did not become healthy:\n{self.logs()}")

    def logs(self):
        if not self.log.closed:  # stop() closes it; the file stays readable
            self.log.flush()
        return self.log_path.read_text(errors="replace")[-4000:]

    def server_info(self, headers=None):
        return requests.get(self.url + "/server_info", headers=headers, timeout=10).json()

    def assert_no_leak(self, headers=None):
        """SGLang's idle check: every KV slot is free or held by the radix cache."""
        deadline = time.time() + 30
        while time.time() < deadline:
            state = self.server_info(headers)["internal_states"][0]
            if state.get("num_running_reqs", 0) == 0 and state.get("num_queued_reqs", 0) == 0:
                assert state["kv_leak_check"] == "ok", state["kv_leak_check"]
                return
            time.sleep(0.1)
        raise AssertionError("server did not become idle")

    def stop(self):
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(timeout=30)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        self.log.close()
        return self.proc.returncode


class Router:
    """SGLang's router (PyPI sglang-router, its Rust gateway) on a free loopback port."""

    def __init__(self, workers, *args, expect=None, worker_args=None):
        """expect: how many workers the router lists once up (default: one per worker);
        worker_args: how the workers are named on the command line (default: --worker-urls)."""
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.log_path = f"{os.environ.get('TMPDIR', '/tmp')}/sglang-router-{self.port}.log"
        self.log = open(self.log_path, "w")
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "sglang_router.launch_router", "--host", "127.0.0.1",
             "--port", str(self.port),
             *(worker_args or ["--worker-urls", *[w.url for w in workers]]),
             "--log-level", "warn", "--prometheus-host", "127.0.0.1",
             "--prometheus-port", str(free_port()), *args],
            stdout=self.log, stderr=subprocess.STDOUT)
        deadline = time.time() + 60
        while time.time() < deadline:
            if self.proc.poll() is not None:
                break
            try:
                if requests.get(self.url + "/health", timeout=1).status_code == 200 and \
                        len(self.workers()) == (expect or len(workers)):
                    return
            except requests.RequestException:
                pass
            time.sleep(0.2)
        self.stop()
        raise AssertionError("router did not come up:\n" + open(self.log_path).read()[-3000:])

    def workers(self):
        return requests.get(self.url + "/workers", timeout=5).json()["workers"]

    def stop(self):
        self.proc.terminate()
        try:
            self.proc.wait(timeout=20)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
        self.log.close()


class Namespace:
    """A network namespace joined to this one by a veth pair: this side host_ip, inside peer_ip."""

    def __init__(self):
        n = os.getpid() % 200 + 20
        tag = f"{os.getpid() % 100000}"
        self.name, self.outer, self.inner = f"rstp{tag}", f"rstpa{tag}", f"rstpb{tag}"
        self.host_ip, self.peer_ip = f"10.231.{n}.1", f"10.231.{n}.2"
        self.teardown()
        for cmd in (["ip", "netns", "add", self.name],
                    ["ip", "link", "add", self.outer, "type", "veth", "peer", "name", self.inner],
                    ["ip", "link", "set", self.inner, "netns", self.name],
                    ["ip", "addr", "add", f"{self.host_ip}/24", "dev", self.outer],
                    ["ip", "link", "set", self.outer, "up"],
                    ["ip", "-n", self.name, "addr", "add", f"{self.peer_ip}/24", "dev", self.inner],
                    ["ip", "-n", self.name, "link", "set", self.inner, "up"],
                    ["ip", "-n", self.name, "link", "set", "lo", "up"]):
            r = subprocess.run(cmd, capture_output=True, text=True)
            if r.returncode != 0:
                self.teardown()
                import pytest  # here, so the benches can use this module without pytest
                pytest.fail(f"{' '.join(cmd)} failed (network namespaces need root and iproute2):"
                            f" {r.stderr}")

    def popen(self, args, log):
        return subprocess.Popen(["ip", "netns", "exec", self.name, *map(str, args)], stdout=log,
                                stderr=subprocess.STDOUT)

    def teardown(self):
        subprocess.run(["ip", "link", "del", self.outer], capture_output=True)
        subprocess.run(["ip", "netns", "del", self.name], capture_output=True)

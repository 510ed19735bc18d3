"""--tp-size N (issue 24 part 2): the model split over N processes joined by gloo. The reference is
the same server with --tp-size 1: F32 checkpoints (stories260K, SmolLM2) give the same greedy tokens
token for token, alone and in a concurrent batch with radix-cache hits, through the native and the
OpenAI routes; the leak check holds. Ranks run as processes on this machine (one command starts
them; all-reduce through shared memory) and as nodes in a network namespace joined to this one by a veth pair (SGLang's convention:
one command per node with --nnodes, --node-rank, --dist-init-addr; all-reduce over gloo's TCP). A rank that dies stops the
others with a log line naming the failure and a non-zero exit. Bad layouts exit with status 2.
"""
import concurrent.futures
import os
import pathlib
import re
import signal
import subprocess
import time

import openai
import pytest
import requests

from e2e_util import run_radixserve
from server_util import BUILD, MODELS, STORIES, Server, free_port

SMOLLM2_F32 = MODELS / "smollm2-135m-instruct-f32.gguf"
PROMPTS = ["Once upon a time, there was a little girl named Lily.",
           "Tom had a big red ball.",
           "The sun was shining and the birds were singing.",
           "Once upon a time, there was a little dog named Spot.",
           "def fibonacci(n):",
           "The capital of France is"]
MAX_NEW = 40


def require(path):
    if not pathlib.Path(path).exists():
        pytest.fail(f"{path} missing: run scripts/setup")
    return path


def generate(url, prompt, max_new=MAX_NEW):
    body = {"text": prompt,
            "sampling_params": {"max_new_tokens": max_new, "temperature": 0, "ignore_eos": True}}
    r = requests.post(url + "/generate", json=body, timeout=300)
    assert r.status_code == 200, r.text
    return r.json()


def outputs(srv):
    """Greedy ids of every prompt alone, then all at once twice (the second round hits the radix
    cache), then an OpenAI completion."""
    alone = [generate(srv.url, p)["output_ids"] for p in PROMPTS]
    with concurrent.futures.ThreadPoolExecutor(len(PROMPTS) * 2) as pool:
        batch = [b["output_ids"] for b in pool.map(lambda p: generate(srv.url, p), PROMPTS * 2)]
    client = openai.OpenAI(base_url=srv.url + "/v1", api_key="none")
    completion = client.completions.create(model="default", prompt=PROMPTS[0], max_tokens=24,
                                           temperature=0)
    srv.assert_no_leak()
    return alone, batch, completion.choices[0].text


@pytest.fixture(scope="module")
def references():
    cache = {}

    def get(model):
        if model not in cache:
            srv = Server(require(model), "--skip-server-warmup")
            try:
                cache[model] = outputs(srv)
            finally:
                srv.stop()
        return cache[model]
    return get


@pytest.mark.parametrize("model,tp", [(STORIES, 2), (STORIES, 4), (SMOLLM2_F32, 3)],
                         ids=["stories-tp2", "stories-tp4", "smollm2-f32-tp3"])
def test_greedy_output_equals_tp1(references, model, tp):
    expected = references(model)
    srv = Server(require(model), "--skip-server-warmup", "--tp-size", tp)
    try:
        got = outputs(srv)
        info = srv.server_info()
        assert info["tp_size"] == tp
    finally:
        code = srv.stop()
    assert got == expected
    assert code == 0
    logs = srv.log_path.read_text()
    # Every follower ran the steps and left when the leader stopped.
    for rank in range(1, tp):
        assert f"tensor-parallel rank {rank}: the leader stopped after" in logs
    assert logs.count("(all-reduce over shared memory)") == tp  # one machine


def test_a_dead_rank_stops_the_leader():
    srv = Server(require(STORIES), "--skip-server-warmup", "--tp-size", 2)
    try:
        generate(srv.url, PROMPTS[0], 8)
        children = subprocess.run(["pgrep", "-P", str(srv.proc.pid)], capture_output=True,
                                  text=True).stdout.split()
        assert len(children) == 1, children
        os.kill(int(children[0]), signal.SIGKILL)
        code = srv.proc.wait(timeout=30)  # idle: the next keep-alive notices within seconds
    finally:
        srv.stop()
    assert code == 1
    logs = srv.log_path.read_text()
    # The idle leader's keep-alive finds the connection closed (or reset).
    assert re.search(r"tensor-parallel rank 0 of 2: broadcast failed \(.*Connection (closed|reset)"
                     r" by peer", logs), logs[-2000:]


def test_a_rank_dying_mid_step_stops_the_leader():
    """A rank killed while the others decode: they stop at once, not after --dist-timeout."""
    srv = Server(require(SMOLLM2_F32), "--skip-server-warmup", "--tp-size", 3)
    try:
        with concurrent.futures.ThreadPoolExecutor(1) as pool:
            pending = pool.submit(requests.post, srv.url + "/generate", timeout=120, json={
                "text": PROMPTS[0],
                "sampling_params": {"max_new_tokens": 400, "ignore_eos": True}})
            time.sleep(3)  # decoding
            children = subprocess.run(["pgrep", "-P", str(srv.proc.pid)], capture_output=True,
                                      text=True).stdout.split()
            assert len(children) == 2, children
            os.kill(int(children[1]), signal.SIGKILL)
            code = srv.proc.wait(timeout=30)
            with pytest.raises(requests.RequestException):
                pending.result()
    finally:
        srv.stop()
    assert code == 1
    logs = srv.log_path.read_text()
    # Whichever the leader was in: the shared-memory all-reduce (it checks the ranks' pids) or
    # the next step's broadcast (the socket closed). In the all-reduce it may find rank 1 gone
    # first, rank 1 having stopped on finding rank 2 (the killed one) gone: then rank 1 says so.
    killed = rf"all-reduce failed \(rank 2 \(pid {children[1]}\) exited\)"
    leader = re.search(r"tensor-parallel rank 0 of 3: (all-reduce failed \(rank ([12]) \(pid "
                       r"\d+\) exited\)|broadcast failed)", logs)
    assert leader, logs[-2000:]
    if leader.group(2) == "1":
        assert re.search(f"tensor-parallel rank 1 of 3: {killed}", logs), logs[-2000:]
    elif leader.group(2) == "2":
        assert re.search(f"tensor-parallel rank 0 of 3: {killed}", logs), logs[-2000:]


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
                pytest.fail(f"{' '.join(cmd)} failed (network namespaces need root and iproute2):"
                            f" {r.stderr}")

    def popen(self, args, log):
        return subprocess.Popen(["ip", "netns", "exec", self.name, *map(str, args)], stdout=log,
                                stderr=subprocess.STDOUT)

    def teardown(self):
        subprocess.run(["ip", "link", "del", self.outer], capture_output=True)
        subprocess.run(["ip", "netns", "del", self.name], capture_output=True)


@pytest.fixture
def namespace():
    ns = Namespace()
    yield ns
    ns.teardown()


def two_nodes(ns, model, tp, log):
    """Node 0 here (it serves HTTP), node 1 in the namespace; both as SGLang launches them."""
    init = f"{ns.host_ip}:{free_port()}"
    common = ["--tp-size", tp, "--nnodes", 2, "--dist-init-addr", init, "--dist-timeout", 60]
    node1 = ns.popen([BUILD / "radixserve", "--model-path", model, *common, "--node-rank", 1], log)
    try:
        node0 = Server(model, "--skip-server-warmup", *common, "--node-rank", 0)
    except Exception:
        node1.kill()
        raise
    return node0, node1


def test_two_nodes_in_network_namespaces(references, namespace, tmp_path):
    expected = references(STORIES)
    with open(tmp_path / "node1.log", "w") as log:
        node0, node1 = two_nodes(namespace, require(STORIES), 4, log)
        try:
            got = outputs(node0)
        finally:
            code0 = node0.stop()
            code1 = node1.wait(timeout=30)
    assert got == expected
    assert (code0, code1) == (0, 0)
    logs1 = (tmp_path / "node1.log").read_text()
    # Node 1 ran ranks 2 and 3 and reached node 0 across the veth pair.
    assert f"joined the group at {namespace.peer_ip} (all-reduce over TCP)" in logs1
    assert "tensor-parallel rank 3: the leader stopped after" in logs1


def test_a_dead_node_stops_the_other(namespace, tmp_path):
    with open(tmp_path / "node1.log", "w") as log:
        node0, node1 = two_nodes(namespace, require(STORIES), 2, log)
        try:
            generate(node0.url, PROMPTS[0], 8)
            node0.proc.kill()  # the leader dies without a word
            code1 = node1.wait(timeout=30)
        finally:
            node0.stop()
            if node1.poll() is None:
                node1.kill()
    assert code1 == 1
    logs1 = (tmp_path / "node1.log").read_text()
    assert "tensor-parallel rank 1 of 2: broadcast failed" in logs1, logs1[-2000:]


@pytest.mark.parametrize("args,named", [
    (["--tp-size", 3], "--tp-size"),                       # 8 heads, 4 KV heads
    (["--tp-size", 2, "--dp-size", 2], "--dp-size"),
    (["--tp-size", 2, "--enable-lora"], "--enable-lora"),
    (["--tp-size", 2, "--enable-hierarchical-cache"], "--enable-hierarchical-cache"),
    (["--tp-size", 2, "--is-embedding"], "--tp-size"),
    (["--tp-size", 2, "--nnodes", 2], "--dist-init-addr"),
    (["--tp-size", 2, "--nnodes", 2, "--node-rank", 2, "--dist-init-addr", "127.0.0.1:1"],
     "--node-rank"),
    (["--tp-size", 2, "--dist-init-addr", "nohostport"], "--dist-init-addr"),
])
def test_layouts_it_cannot_run_exit_with_status_2(args, named):
    r = run_radixserve(BUILD / "radixserve", "--model-path", require(STORIES), "--port",
                       free_port(), *args, timeout=60)
    assert r.returncode == 2, r.stdout + r.stderr
    assert f"argument {named}" in r.stderr, r.stderr

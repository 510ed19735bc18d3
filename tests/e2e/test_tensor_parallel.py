"""--tp-size N and --pp-size M (issue 24 part 2): the model split over N x M processes joined by
gloo, heads and MLP rows over the tensor-parallel ranks, layers over the pipeline stages. The
reference is the same server with --tp-size 1 --pp-size 1: F32 checkpoints (stories260K, SmolLM2) give the same greedy tokens
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
from server_util import BUILD, MODELS, STORIES, Namespace, Server, free_port

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


def child_pids(srv):
    """The ranks the server's command started (as strings)."""
    return subprocess.run(["pgrep", "-P", str(srv.proc.pid)], capture_output=True,
                          text=True).stdout.split()


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


@pytest.mark.parametrize("model,tp,pp", [
    (STORIES, 2, 1), (STORIES, 4, 1), (SMOLLM2_F32, 3, 1),
    (STORIES, 1, 2), (STORIES, 2, 2), (SMOLLM2_F32, 1, 3)],
    ids=["stories-tp2", "stories-tp4", "smollm2-f32-tp3", "stories-pp2", "stories-tp2-pp2",
         "smollm2-f32-pp3"])
def test_greedy_output_equals_tp1(references, model, tp, pp):
    expected = references(model)
    srv = Server(require(model), "--skip-server-warmup", "--tp-size", tp, "--pp-size", pp)
    try:
        got = outputs(srv)
        info = srv.server_info()
        assert (info["tp_size"], info["pp_size"]) == (tp, pp)
    finally:
        code = srv.stop()
    assert got == expected
    assert code == 0
    logs = srv.log_path.read_text()
    # Every follower ran the steps and left when the leader stopped.
    for rank in range(1, tp * pp):
        assert f"tensor-parallel rank {rank}: the leader stopped after" in logs
    # One machine: every stage's tensor-parallel ranks all-reduce through shared memory.
    assert logs.count("(all-reduce over shared memory)") == (tp * pp if tp > 1 else 0)
    if pp > 1:
        assert logs.count("(no all-reduce: pipeline stages only)") == (pp if tp == 1 else 0)


def test_a_dead_rank_stops_the_leader():
    srv = Server(require(STORIES), "--skip-server-warmup", "--tp-size", 2)
    try:
        generate(srv.url, PROMPTS[0], 8)
        children = child_pids(srv)
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


def kill_a_rank_mid_decode(layout, ranks):
    """Starts SmolLM2 F32 split as `layout`, kills the last child rank while a long request
    decodes; returns the leader's exit status, the killed pid and the log."""
    srv = Server(require(SMOLLM2_F32), "--skip-server-warmup", *layout)
    try:
        with concurrent.futures.ThreadPoolExecutor(1) as pool:
            pending = pool.submit(requests.post, srv.url + "/generate", timeout=120, json={
                "text": PROMPTS[0],
                "sampling_params": {"max_new_tokens": 400, "ignore_eos": True}})
            time.sleep(3)  # decoding
            children = child_pids(srv)
            assert len(children) == ranks - 1, children
            os.kill(int(children[-1]), signal.SIGKILL)
            code = srv.proc.wait(timeout=30)
            with pytest.raises(requests.RequestException):
                pending.result()
    finally:
        srv.stop()
    return code, children[-1], srv.log_path.read_text()


def test_a_rank_dying_mid_step_stops_the_leader():
    """A rank killed while the others decode: they stop at once, not after --dist-timeout."""
    code, killed_pid, logs = kill_a_rank_mid_decode(["--tp-size", 3], 3)
    assert code == 1
    # Whichever the leader was in: the shared-memory all-reduce (it checks the ranks' pids) or
    # the next step's broadcast (the socket closed). In the all-reduce it may find rank 1 gone
    # first, rank 1 having stopped on finding rank 2 (the killed one) gone: then rank 1 says so.
    killed = rf"all-reduce failed \(rank 2 \(pid {killed_pid}\) exited\)"
    leader = re.search(r"tensor-parallel rank 0 of 3: (all-reduce failed \(rank ([12]) \(pid "
                       r"\d+\) exited\)|broadcast failed)", logs)
    assert leader, logs[-2000:]
    if leader.group(2) == "1":
        assert re.search(f"tensor-parallel rank 1 of 3: {killed}", logs), logs[-2000:]
    elif leader.group(2) == "2":
        assert re.search(f"tensor-parallel rank 0 of 3: {killed}", logs), logs[-2000:]


def ignores_sigpipe(pid):
    """Whether the process's SigIgn mask in /proc holds SIGPIPE."""
    status = pathlib.Path(f"/proc/{pid}/status").read_text()
    ignored = int(re.search(r"^SigIgn:\s*([0-9a-f]+)$", status, re.M).group(1), 16)
    return bool(ignored & (1 << (signal.SIGPIPE - 1)))


def test_every_rank_ignores_sigpipe():
    """A write to a rank that is gone must fail with EPIPE, which the leader logs before it
    exits 1 (the test below), not kill the writer with SIGPIPE: gloo's TCP pairs write with
    writev, which raises it."""
    srv = Server(require(STORIES), "--skip-server-warmup", "--pp-size", 2)
    try:
        children = child_pids(srv)
        assert len(children) == 1, children
        assert ignores_sigpipe(srv.proc.pid)
        assert ignores_sigpipe(children[0])
    finally:
        srv.stop()


def test_a_stage_dying_mid_step_stops_the_leader():
    """The last pipeline stage killed while the first decodes: the leader's next receive or
    broadcast fails at once."""
    code, _, logs = kill_a_rank_mid_decode(["--pp-size", 2], 2)
    assert code == 1
    assert re.search(r"tensor-parallel rank 0 of 2: (pipeline receive|pipeline send|broadcast) "
                     r"failed", logs), logs[-2000:]


@pytest.mark.parametrize("layout", [["--tp-size", 2], ["--pp-size", 2]], ids=["tp2", "pp2"])
def test_a_hung_rank_stops_the_group_after_dist_timeout(layout):
    """A rank that stops answering without closing its connections (SIGSTOP): the leader's next
    collective (the idle keep-alive's broadcast, or the step's all-reduce or pipeline receive)
    gives up after --dist-timeout, logs why and exits 1 (its stopped child dies with it)."""
    srv = Server(require(STORIES), "--skip-server-warmup", *layout, "--dist-timeout", 3)
    try:
        generate(srv.url, PROMPTS[0], 8)
        children = child_pids(srv)
        assert len(children) == 1, children
        os.kill(int(children[0]), signal.SIGSTOP)
        start = time.monotonic()
        with pytest.raises(requests.RequestException):
            generate(srv.url, PROMPTS[1], 8)
        code = srv.proc.wait(timeout=60)
        waited = time.monotonic() - start
    finally:
        srv.stop()
    assert code == 1
    assert waited < 60  # not the default 600 s
    logs = srv.log_path.read_text()
    assert re.search(r"tensor-parallel rank 0 of 2: (broadcast|all-reduce|pipeline receive) failed"
                     r" \(.*([Tt]imed out|did not arrive within --dist-timeout 3 s)", logs), \
        logs[-2000:]


def test_numa_node_binds_each_rank():
    """--numa-node: the i-th value binds the node's i-th rank to that NUMA node's CPUs (and
    memory), as SGLang binds its subprocesses."""
    node = max(int(p.name[4:]) for p in pathlib.Path("/sys/devices/system/node").glob("node[0-9]*"))
    cpus = pathlib.Path(f"/sys/devices/system/node/node{node}/cpulist").read_text().strip()
    srv = Server(require(STORIES), "--skip-server-warmup", "--pp-size", 2, "--numa-node", node,
                 node)
    try:
        generate(srv.url, PROMPTS[0], 8)
        children = child_pids(srv)
        for pid in [srv.proc.pid, *map(int, children)]:
            status = pathlib.Path(f"/proc/{pid}/status").read_text()
            assert re.search(rf"^Cpus_allowed_list:\s+{re.escape(cpus)}$", status, re.M), status
    finally:
        srv.stop()
    assert srv.log_path.read_text().count(f"bound to NUMA node {node} (CPUs {cpus})") == 2


@pytest.fixture
def namespace():
    ns = Namespace()
    yield ns
    ns.teardown()


def two_nodes(ns, model, tp, log, pp=1):
    """Node 0 here (it serves HTTP), node 1 in the namespace; both as SGLang launches them."""
    init = f"{ns.host_ip}:{free_port()}"
    common = ["--tp-size", tp, "--pp-size", pp, "--nnodes", 2, "--dist-init-addr", init,
              "--dist-timeout", 60]
    node1 = ns.popen([BUILD / "radixserve", "--model-path", model, *common, "--node-rank", 1], log)
    try:
        node0 = Server(model, "--skip-server-warmup", *common, "--node-rank", 0)
    except Exception:
        node1.kill()
        raise
    return node0, node1


@pytest.mark.parametrize("tp,pp,reduce", [
    (4, 1, "all-reduce over shared memory within the node, TCP between nodes"),
    (2, 2, "all-reduce over shared memory")], ids=["tp4", "tp2-pp2"])
def test_two_nodes_in_network_namespaces(references, namespace, tmp_path, tp, pp, reduce):
    """Node 1 runs ranks 2 and 3 and reaches node 0 across the veth pair. tp 4: each node's
    ranks sum through shared memory, the nodes' first ranks over TCP. tp 2 x pp 2: node 1 holds stage 1 (its two ranks
    all-reduce through shared memory); the micro-batches cross the veth pair."""
    expected = references(STORIES)
    with open(tmp_path / "node1.log", "w") as log:
        node0, node1 = two_nodes(namespace, require(STORIES), tp, log, pp=pp)
        try:
            got = outputs(node0)
        finally:
            code0 = node0.stop()
            code1 = node1.wait(timeout=30)
    assert got == expected
    assert (code0, code1) == (0, 0)
    logs1 = (tmp_path / "node1.log").read_text()
    assert f"joined the group at {namespace.peer_ip} ({reduce})" in logs1
    assert f"tp rank {3 % tp} of pipeline stage {3 // tp} of {pp}" in logs1
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
    (["--pp-size", 6], "--pp-size"),                       # 5 layers
    (["--pp-size", 2, "--enable-lora"], "--enable-lora"),
    (["--pp-size", 2, "--speculative-algorithm", "NGRAM"], "--pp-size"),
    (["--pp-size", 2, "--max-micro-batch-size", 0], "--max-micro-batch-size"),
    (["--pp-size", 2, "--is-embedding"], "--pp-size"),
    (["--tp-size", 2, "--pp-size", 2, "--nnodes", 3, "--dist-init-addr", "127.0.0.1:1"],
     "--nnodes"),
    (["--tp-size", 2, "--ep-size", 3], "--ep-size"),        # expert blocks divide the ranks
    (["--ep-size", 2], "--ep-size"),
    (["--numa-node", 999], "--numa-node"),
    (["--pp-size", 2, "--numa-node", 0], "--numa-node"),   # one value per rank of the node
])
def test_layouts_it_cannot_run_exit_with_status_2(args, named):
    r = run_radixserve(BUILD / "radixserve", "--model-path", require(STORIES), "--port",
                       free_port(), *args, timeout=60)
    assert r.returncode == 2, r.stdout + r.stderr
    assert f"argument {named}" in r.stderr, r.stderr

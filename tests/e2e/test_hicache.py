"""The hierarchical cache's disk tier (--enable-hierarchical-cache --hicache-storage-backend file)
end to end on SmolLM2, against the same model served without the tier (the reference: every
prompt computed from scratch):

- prefixes evicted from a RAM pool too small for them come back from disk with the same greedy
  output, for page sizes 1 and 16, under write_through and write_back, reported in
  meta_info.cached_tokens_details.storage and the sglang:prefetched/backuped_tokens_total metrics;
- after a restart the same directory serves a repeated prefix, but never to another model's
  weights or another KV dtype;
- concurrent requests for one stored prefix read it once;
- files truncated, corrupted or deleted while the server runs, a full disk (a file-size limit), a
  directory that disappears, and a kill -9 in the middle of write-back: the server keeps serving
  the reference output and never serves a bad block;
- /clear_hicache_storage_backend empties the directory; bad arguments exit with status 2."""
import concurrent.futures
import os
import pathlib
import resource
import signal
import shutil
import subprocess
import time

import pytest
import requests

from server_util import BUILD, MODELS, SMOLLM2, Server

# Three documents of about 1,000-1,100 tokens each: a 1536-token RAM pool holds one at a time.
DOCS = [" ".join(f"Record {i} of ledger {name}: the {name} shipment number {i * 13} arrived at "
                 f"dock {i % 9} carrying {i * 7} crates." for i in range(36))
        for name in ("alpha", "bravo", "charlie")]
POOL = "1536"
BLOCK = 64  # tokens per stored block at page sizes up to 64


def generate(server, text, n=12):
    reply = requests.post(server.url + "/generate", timeout=300, json={
        "text": text, "sampling_params": {"max_new_tokens": n, "temperature": 0}})
    assert reply.status_code == 200, reply.text
    return reply.json()


def storage_state(server):
    return server.server_info()["internal_states"][0]["hicache_storage"]


def wait_stored(server, out, timeout=30):
    """Waits until the blocks of a finished request (its prompt and output but the last token,
    whole blocks, written through) are on disk; returns how many the server stores."""
    meta = out["meta_info"]
    want = (meta["prompt_tokens"] + meta["completion_tokens"] - 1) // BLOCK
    deadline = time.time() + timeout
    while time.time() < deadline:
        stored = storage_state(server)["stored_blocks"]
        if stored >= want:
            return stored
        time.sleep(0.05)
    raise AssertionError(f"{want} blocks not stored in {timeout} s")


def flush(server):
    """/flush_cache once the server is idle (it refuses while a request runs)."""
    server.assert_no_leak()
    reply = requests.post(server.url + "/flush_cache", timeout=30)
    assert reply.status_code == 200, reply.text


def block_files(directory):
    return sorted(p for p in pathlib.Path(directory).iterdir() if p.name.endswith(".rkv"))


def tiered(directory, *extra, **kwargs):
    return Server(SMOLLM2, "--skip-server-warmup", "--max-total-tokens", POOL,
                  "--enable-hierarchical-cache", "--hicache-storage-backend", "file",
                  "--hicache-storage-prefetch-policy", "wait_complete", "--hicache-ratio", "8",
                  *extra,
                  env={"SGLANG_HICACHE_FILE_BACKEND_STORAGE_DIR": str(directory)}, **kwargs)


@pytest.fixture(scope="module")
def reference():
    """Each document's greedy continuation computed from scratch, without the tier."""
    if not SMOLLM2.exists():
        pytest.fail(f"{SMOLLM2} missing: run scripts/setup")
    server = Server(SMOLLM2, "--skip-server-warmup", "--disable-radix-cache")
    try:
        return [generate(server, doc)["text"] for doc in DOCS]
    finally:
        server.stop()


def round_robin(server, reference, rounds=2):
    """Sends the three documents in turn; returns each answer's cached-token breakdown."""
    details = []
    for _ in range(rounds):
        for doc, expected in zip(DOCS, reference):
            out = generate(server, doc)
            assert out["text"] == expected
            details.append(out["meta_info"]["cached_tokens_details"])
    return details


@pytest.mark.parametrize("page_size", ["1", "16"])
@pytest.mark.parametrize("policy", ["write_through", "write_back"])
def test_evicted_prefixes_come_back_from_disk(tmp_path, reference, page_size, policy):
    server = tiered(tmp_path, "--page-size", page_size, "--hicache-write-policy", policy,
                    "--enable-metrics")
    try:
        details = round_robin(server, reference)
        # First round: nothing stored yet. Second round: each document was pushed out of RAM by
        # the other two and its whole-block prefix comes from disk.
        assert all(d["storage"] == 0 for d in details[:3])
        for d in details[3:]:
            assert d["storage"] >= 8 * BLOCK, details
            assert d["storage_backend"] == "HiCacheFile" and d["host"] == 0
        state = storage_state(server)
        assert state["prefetched_tokens"] >= 3 * 8 * BLOCK
        assert state["failed_reads"] == 0 and state["failed_writes"] == 0
        metrics = requests.get(server.url + "/metrics", timeout=10).text
        values = {}
        names = ("sglang:prefetched_tokens_total", "sglang:backuped_tokens_total",
                 "sglang:prefetch_pgs_count", "sglang:prefetch_pgs_sum",
                 "sglang:backup_pgs_count", "sglang:prefetch_bandwidth_count",
                 "sglang:backup_bandwidth_count")
        for line in metrics.splitlines():
            for name in names:
                if line.startswith(name + "{") and 'storage_backend="file"' in line:
                    values[name] = float(line.rsplit(" ", 1)[1])
        assert values["sglang:prefetched_tokens_total"] == state["prefetched_tokens"]
        assert values["sglang:backuped_tokens_total"] == state["backuped_tokens"] > 0
        # One load per second-round request, its blocks summed; backups and their bandwidth.
        assert values["sglang:prefetch_pgs_count"] == 3
        assert values["sglang:prefetch_pgs_sum"] * BLOCK >= state["prefetched_tokens"]
        assert values["sglang:prefetch_bandwidth_count"] == 3
        assert values["sglang:backup_pgs_count"] >= 3
        assert values["sglang:backup_bandwidth_count"] >= 1
        server.assert_no_leak()
    finally:
        server.stop()


def test_a_restart_serves_stored_prefixes_to_the_same_model_only(tmp_path, reference):
    server = tiered(tmp_path)
    try:
        assert generate(server, DOCS[0])["text"] == reference[0]
    finally:
        server.stop()
    stored = block_files(tmp_path)
    assert len(stored) >= 8

    server = tiered(tmp_path)
    try:
        out = generate(server, DOCS[0])
        assert out["text"] == reference[0]
        assert out["meta_info"]["cached_tokens_details"]["storage"] == len(stored) * BLOCK
    finally:
        server.stop()

    # Another KV element type, other weights of the same architecture: nothing is served, and
    # the first model's files stay.
    others = [("--kv-cache-dtype", "fp8_e4m3")]
    f32 = MODELS / "smollm2-135m-instruct-f32.gguf"
    assert f32.exists(), f"{f32} missing: run scripts/setup"
    for extra in others:
        server = tiered(tmp_path, *extra)
        try:
            out = generate(server, DOCS[0])
            assert out["meta_info"]["cached_tokens_details"]["storage"] == 0
        finally:
            server.stop()
    server = Server(f32, "--skip-server-warmup", "--max-total-tokens", POOL,
                    "--enable-hierarchical-cache", "--hicache-storage-backend", "file",
                    "--hicache-storage-prefetch-policy", "wait_complete",
                    env={"SGLANG_HICACHE_FILE_BACKEND_STORAGE_DIR": str(tmp_path)})
    try:
        out = generate(server, DOCS[0])
        assert out["meta_info"]["cached_tokens_details"]["storage"] == 0
    finally:
        server.stop()
    assert set(stored) <= set(block_files(tmp_path))


def test_concurrent_requests_for_one_stored_prefix_read_it_once(tmp_path, reference):
    server = tiered(tmp_path)
    try:
        first = generate(server, DOCS[1])
        stored = wait_stored(server, first)
        assert len(block_files(tmp_path)) == stored
        flush(server)
        with concurrent.futures.ThreadPoolExecutor(4) as pool:
            outs = list(pool.map(lambda _: generate(server, DOCS[1]), range(4)))
        assert [o["text"] for o in outs] == [reference[1]] * 4
        # The stored blocks a prompt can use: all but its last token may come from the cache.
        blocks = (first["meta_info"]["prompt_tokens"] - 1) // BLOCK
        state = storage_state(server)
        assert state["read_blocks"] == blocks
        assert state["prefetched_tokens"] == blocks * BLOCK
        server.assert_no_leak()
    finally:
        server.stop()


def test_damaged_files_are_never_served(tmp_path, reference):
    server = tiered(tmp_path)
    try:
        wait_stored(server, generate(server, DOCS[2]))
        files = block_files(tmp_path)
        assert len(files) >= 8
        # Block 3 truncated, block 5 with a flipped payload byte, block 7 deleted: the chain is
        # served up to block 3 only, the damaged files are deleted.
        chain = order_by_chain(files)
        os.truncate(chain[3], chain[3].stat().st_size // 2)
        with open(chain[5], "r+b") as f:
            f.seek(-10, os.SEEK_END)
            byte = f.read(1)
            f.seek(-10, os.SEEK_END)
            f.write(bytes([byte[0] ^ 0xFF]))
        chain[7].unlink()
        flush(server)
        out = generate(server, DOCS[2])
        assert out["text"] == reference[2]
        assert out["meta_info"]["cached_tokens_details"]["storage"] == 3 * BLOCK
        # Three failed reads (truncated, corrupt, missing); the first two files were deleted
        # (the recomputed blocks are written again as they are cached).
        assert storage_state(server)["failed_reads"] == 3
        # The computed blocks were stored again; the next round trip serves all of them.
        wait_stored(server, out)
        flush(server)
        out = generate(server, DOCS[2])
        assert out["text"] == reference[2]
        assert out["meta_info"]["cached_tokens_details"]["storage"] >= 8 * BLOCK
        server.assert_no_leak()
    finally:
        server.stop()


def order_by_chain(files):
    """The block files of one prompt in prefix order (each header names its parent)."""
    headers = {}
    for f in files:
        data = f.read_bytes()[:64]
        own = int.from_bytes(data[24:32], "little")
        parent = int.from_bytes(data[32:40], "little")
        headers[own] = (parent, f)
    parents = {parent for parent, _ in headers.values()}
    first = [own for own, (parent, _) in headers.items() if parent not in headers]
    assert len(first) == 1, "expected one chain"
    chain, current = [], first[0]
    while True:
        chain.append(headers[current][1])
        nxt = [own for own, (parent, _) in headers.items() if parent == current]
        if not nxt:
            break
        current = nxt[0]
    assert len(chain) == len(files) and parents
    return chain


def test_a_full_disk_or_a_vanished_directory_does_not_stop_serving(tmp_path, reference):
    def limit_file_size():
        # Every block file is larger than this: each write fails (EFBIG), as on a full disk.
        resource.setrlimit(resource.RLIMIT_FSIZE, (256 * 1024, 256 * 1024))

    server = tiered(tmp_path, preexec_fn=limit_file_size)
    try:
        details = round_robin(server, reference)
        assert all(d["storage"] == 0 for d in details)
        state = storage_state(server)
        assert state["failed_writes"] > 0 and state["stored_blocks"] == 0
        assert block_files(tmp_path) == []
        server.assert_no_leak()
    finally:
        server.stop()

    vanishing = tmp_path / "vanishing"
    server = tiered(vanishing)
    try:
        shutil.rmtree(vanishing)
        vanishing.write_text("now a file")  # the directory cannot come back either
        round_robin(server, reference, rounds=1)
        assert storage_state(server)["failed_writes"] > 0
        assert server.server_info()["status"] == "ready"
    finally:
        server.stop()


def test_kill_during_write_back_then_restart(tmp_path, reference):
    server = tiered(tmp_path, "--hicache-write-policy", "write_back")
    try:
        # Evictions write blocks back while later documents are computed; the process dies with
        # some writes in flight.
        with concurrent.futures.ThreadPoolExecutor(3) as pool:
            futures = [pool.submit(generate, server, doc) for doc in DOCS + DOCS]
            time.sleep(1.5)
            server.proc.send_signal(signal.SIGKILL)
            server.proc.wait()
            for f in futures:
                try:
                    f.result()
                except Exception:  # noqa: BLE001 - the server died under these
                    pass
    finally:
        server.stop()
    server = tiered(tmp_path, "--hicache-write-policy", "write_back")
    try:
        assert not [p for p in tmp_path.iterdir() if p.name.endswith(".tmp")]
        round_robin(server, reference)
        server.assert_no_leak()
    finally:
        server.stop()


def test_clear_route_empties_the_directory(tmp_path, reference):
    server = tiered(tmp_path)
    try:
        wait_stored(server, generate(server, DOCS[0]))
        assert block_files(tmp_path)
        reply = requests.post(server.url + "/clear_hicache_storage_backend", timeout=30)
        assert reply.status_code == 200
        assert reply.text == "Hierarchical cache storage backend cleared.\n"
        assert wait_empty(tmp_path)
        flush(server)
        out = generate(server, DOCS[0])
        assert out["text"] == reference[0]
        assert out["meta_info"]["cached_tokens_details"]["storage"] == 0
    finally:
        server.stop()
    plain = Server(SMOLLM2, "--skip-server-warmup")
    try:
        reply = requests.get(plain.url + "/clear_hicache_storage_backend", timeout=30)
        assert reply.status_code == 400
        assert "not enabled" in reply.text
        assert "cached_tokens_details" not in generate(plain, "Hello")["meta_info"]
    finally:
        plain.stop()


def wait_empty(directory, timeout=10):
    deadline = time.time() + timeout
    while time.time() < deadline:
        if not block_files(directory):
            return True
        time.sleep(0.1)
    return False


@pytest.mark.parametrize("args,message", [
    (["--hicache-storage-backend", "file"],
     "--hicache-storage-backend: requires --enable-hierarchical-cache"),
    (["--enable-hierarchical-cache", "--hicache-storage-backend", "mooncake"], "'mooncake'"),
    (["--enable-hierarchical-cache", "--disable-radix-cache"],
     "cannot be combined with --disable-radix-cache"),
    (["--enable-hierarchical-cache", "--hicache-storage-backend", "file",
      "--hicache-storage-backend-extra-config", '{"prefetch_threshold": "x"}'],
     "prefetch_threshold must be an integer"),
    (["--enable-hierarchical-cache", "--hicache-storage-backend", "file",
      "--hicache-storage-backend-extra-config", '{"file_path": "/x"}'],
     "unknown key 'file_path'"),
])
def test_bad_arguments_exit_with_status_2(args, message):
    proc = subprocess.run([str(BUILD / "radixserve"), "--model-path", str(SMOLLM2), *args],
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode == 2, proc.stderr
    assert message in proc.stderr


def test_an_unusable_directory_is_a_startup_error(tmp_path):
    blocker = tmp_path / "file"
    blocker.write_text("x")
    proc = subprocess.run([str(BUILD / "radixserve"), "--model-path", str(SMOLLM2),
                           "--skip-server-warmup", "--enable-hierarchical-cache",
                           "--hicache-storage-backend", "file"],
                          capture_output=True, text=True, timeout=120,
                          env={**os.environ,
                               "SGLANG_HICACHE_FILE_BACKEND_STORAGE_DIR": str(blocker / "sub")})
    assert proc.returncode == 2, proc.stderr
    assert "argument --hicache-storage-backend" in proc.stderr and str(blocker) in proc.stderr

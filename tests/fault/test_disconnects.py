"""Disconnect storms and stalled readers leave no leak and do not slow other clients
(contract 10)."""
import asyncio
import json
import socket
import time

import aiohttp
import pytest

from fault_util import (STORIES, finish_module, post, start_server, wait_idle, wait_until)

STREAMS = 200
TOKENS = 100
ROUNDS = 3


@pytest.fixture(scope="module")
def server():
    # 200 streams x (prompt + 100 tokens) fit the pool, so nothing waits for KV.
    srv = start_server(STORIES, "--max-total-tokens", 40000)
    yield srv
    finish_module(srv)


def body(i):
    return {"text": f"Once upon a time {i}", "stream": True,
            "sampling_params": {"max_new_tokens": TOKENS, "ignore_eos": True,
                                "temperature": 0.8}}


async def one_stream(session, url, i, drop_after):
    """Reads the stream; with drop_after, closes the connection after that many events.
    Returns the data payloads read."""
    events = []
    async with session.post(url + "/generate", json=body(i)) as r:
        assert r.status == 200
        async for raw in r.content:
            line = raw.decode().strip()
            if line.startswith("data:"):
                events.append(line[5:].strip())
                if drop_after and len(events) >= drop_after:
                    r.close()  # drop the TCP connection mid-stream
                    return events
    return events


def session(limit):
    return aiohttp.ClientSession(connector=aiohttp.TCPConnector(limit=limit, force_close=True),
                                 timeout=aiohttp.ClientTimeout(total=120))


async def storm(url):
    async with session(STREAMS + 10) as s:
        tasks = [one_stream(s, url, i, drop_after=(1 + i % 5) if i % 2 else 0)
                 for i in range(STREAMS)]
        return await asyncio.wait_for(asyncio.gather(*tasks, return_exceptions=True), 180)


def test_disconnect_storm(server):
    start_rss = server.rss()
    for round_ in range(ROUNDS):
        results = asyncio.run(storm(server.url))
        errors = [r for r in results if isinstance(r, BaseException)]
        assert not errors, f"round {round_}: {errors[:3]}"
        for i, events in enumerate(results):
            if i % 2:
                continue  # dropped on purpose
            assert events[-1] == "[DONE]", (i, events[-2:])
            meta = json.loads(events[-2])["meta_info"]
            assert meta["finish_reason"]["type"] == "length", meta
            assert meta["completion_tokens"] == TOKENS, meta
        wait_idle(server, timeout=60)
        server.assert_no_leak()
    growth = (server.rss() - start_rss) / 2**20
    assert growth < 100, f"RSS grew by {growth:.0f} MB over {ROUNDS} storms"


def stalled_reader(server, tokens=450):
    """A raw connection that sends a large streaming request and never reads."""
    s = socket.socket()
    s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
    s.connect(("127.0.0.1", server.port))
    payload = json.dumps({"text": "Once upon a time", "stream": True, "return_logprob": True,
                          "top_logprobs_num": 20,
                          "sampling_params": {"max_new_tokens": tokens, "ignore_eos": True}})
    s.sendall((f"POST /generate HTTP/1.1\r\nHost: 127.0.0.1:{server.port}\r\n"
               f"Content-Type: application/json\r\nContent-Length: {len(payload)}\r\n\r\n"
               + payload).encode())
    return s


async def normal_traffic(url, n):
    async with session(n + 5) as s:
        async def one(i):
            t0 = time.time()
            async with s.post(url + "/generate", json={
                    "text": f"The cat {i}", "sampling_params": {"max_new_tokens": 32}}) as r:
                text = await r.text()
                assert r.status == 200, text[:300]
            return time.time() - t0
        return await asyncio.wait_for(asyncio.gather(*[one(i) for i in range(n)]), 60)


def stalled_round(server):
    """Three stalled readers beside normal traffic; returns their sockets and the latencies."""
    slow = [stalled_reader(server) for _ in range(3)]
    time.sleep(0.5)  # let the stalled responses fill their socket buffers
    return slow, asyncio.run(normal_traffic(server.url, 20))


def test_stalled_reader_does_not_affect_others(server):
    # A first round on a fresh server (pytest-xdist may give this test a server of its own)
    # raises the allocator's high-water mark by 100-123 MB (measured on a 2-core Zen 4): the
    # events of three 450-token streams with top-20 logprobs, built on the I/O threads, of which
    # each connection queues at most 4 MiB (max_pending_write_bytes). What a further round keeps
    # is what is bounded below.
    first, _ = stalled_round(server)
    for s in first:
        s.close()
    wait_until(lambda: server.server_info()["internal_states"][0]["num_running_reqs"] == 0, 60, 0.2)
    start_rss = server.rss()
    slow = [stalled_reader(server) for _ in range(3)]
    try:
        time.sleep(0.5)  # let the stalled responses fill their socket buffers
        latencies = asyncio.run(normal_traffic(server.url, 20))
        assert max(latencies) < 10, latencies
        # The stalled requests do not pin the engine: they end (finished or aborted) on their own.
        idle = wait_until(lambda: server.server_info()["internal_states"][0]
                          ["num_running_reqs"] == 0, 60, 0.2)
        assert idle, "a stalled reader keeps its request running"
        growth = (server.rss() - start_rss) / 2**20
        assert growth < 100, f"RSS grew by {growth:.0f} MB buffering for stalled readers"
        r = post(server, "/generate", {"text": "hi", "sampling_params": {"max_new_tokens": 2}})
        assert r.status_code == 200
    finally:
        for s in slow:
            s.close()
    wait_idle(server, timeout=60)
    server.assert_no_leak()


def test_half_sent_request_does_not_block(server):
    """A client that sends headers and half a body, then stalls, ties up nothing."""
    s = socket.socket()
    s.connect(("127.0.0.1", server.port))
    s.sendall(b"POST /generate HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
              b"Content-Length: 1000\r\n\r\n{\"text\": \"hi\"")
    try:
        latencies = asyncio.run(normal_traffic(server.url, 10))
        assert max(latencies) < 10, latencies
    finally:
        s.close()

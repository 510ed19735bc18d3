"""Load: 2,000 concurrent streaming connections held open plus real traffic that must complete
correctly meanwhile, in one asyncio process with raw sockets. The streams are /generate streams
queued behind --max-running-requests (one long low-priority "blocker" keeps the running slot
busy); the real traffic carries a higher priority, so priority scheduling runs it ahead of the
queue. Checks: every stream got its 200 SSE head and stays open, every real request answers
200 with the text the same prompt gives on an idle server, the server's thread count and RSS
stay bounded (printed), and once the clients close, nothing runs and the KV leak check holds."""
import asyncio
import json
import resource

import requests

from server_util import SMOLLM2, Server

STREAMS = 2000
REAL = 40
MAX_THREADS = 64                   # I/O threads + engine + compute pool + logging: no per-connection threads
MAX_RSS_GROWTH_MB = 400            # at 2,000 open streams, over the idle server


def proc_status(pid):
    fields = {}
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            key, _, value = line.partition(":")
            fields[key] = value.strip()
    return int(fields["Threads"]), int(fields["VmRSS"].split()[0]) // 1024


def open_sockets(pid):
    """Sockets the server process holds (its connections plus the listener)."""
    import os
    count = 0
    for fd in os.listdir(f"/proc/{pid}/fd"):
        try:
            count += os.readlink(f"/proc/{pid}/fd/{fd}").startswith("socket:")
        except OSError:
            pass
    return count


def http_request(method, path, body, extra=""):
    payload = json.dumps(body).encode()
    return (f"{method} {path} HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n{extra}"
            f"Content-Length: {len(payload)}\r\n\r\n").encode() + payload


async def open_stream(port, i):
    """A /generate stream that will wait in the queue; returns once its 200 head arrived."""
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    body = {"text": f"Story number {i}:", "stream": True, "priority": 0,
            "sampling_params": {"max_new_tokens": 4000, "ignore_eos": True}}
    writer.write(http_request("POST", "/generate", body))
    await writer.drain()
    head = await asyncio.wait_for(reader.readuntil(b"\r\n\r\n"), 120)
    assert head.startswith(b"HTTP/1.1 200"), head
    assert b"text/event-stream" in head, head
    return reader, writer


async def real_request(port, path, body):
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    writer.write(http_request("POST", path, body, "Connection: close\r\n"))
    await writer.drain()
    data = await asyncio.wait_for(reader.read(-1), 300)
    writer.close()
    head, _, payload = data.partition(b"\r\n\r\n")
    return int(head.split(b" ")[1]), json.loads(payload)


def real_traffic():
    out = []
    for i in range(REAL):
        prompt = f"Question {i % 8}: what is {i % 8} plus {i % 8}? Answer:"
        if i % 2 == 0:
            out.append(("/generate", {"text": prompt, "priority": 100,
                                      "sampling_params": {"max_new_tokens": 6, "temperature": 0}}))
        else:
            out.append(("/v1/completions", {"model": "x", "prompt": prompt, "priority": 100,
                                            "max_tokens": 6, "temperature": 0}))
    return out


def text_of(path, reply):
    return reply["text"] if path == "/generate" else reply["choices"][0]["text"]


def test_two_thousand_streams_and_real_traffic():
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    resource.setrlimit(resource.RLIMIT_NOFILE, (max(soft, min(hard, 8192)), hard))
    server = Server(SMOLLM2, "--skip-server-warmup", "--enable-priority-scheduling",
                    "--max-running-requests", 1, "--log-level-http", "warning")
    try:
        assert "Open file limit (RLIMIT_NOFILE)" in server.logs()
        traffic = real_traffic()
        # Reference answers on the idle server.
        expected = []
        for path, body in traffic:
            r = requests.post(server.url + path, json=body, timeout=60)
            assert r.status_code == 200, r.text
            expected.append(text_of(path, r.json()))
        idle_threads, idle_rss = proc_status(server.proc.pid)

        async def scenario():
            blocker = await open_stream(server.port, -1)
            streams = [blocker]
            for start in range(0, STREAMS - 1, 250):
                batch = range(start, min(start + 250, STREAMS - 1))
                streams += await asyncio.gather(*(open_stream(server.port, i) for i in batch))
            assert len(streams) == STREAMS
            loaded_threads, loaded_rss = proc_status(server.proc.pid)
            state = {"open_sockets": open_sockets(server.proc.pid)}
            # /server_info counts every stream behind the blocker as queued (polled: a request
            # is counted once the engine has admitted it, or while it waits in its inbox).
            for _ in range(100):
                info = await asyncio.to_thread(server.server_info)
                state["queued"] = info["internal_states"][0]["num_queued_reqs"]
                if state["queued"] == STREAMS - 1:
                    break
                await asyncio.sleep(0.1)
            replies = await asyncio.gather(*(real_request(server.port, path, body)
                                             for path, body in traffic))
            during_threads, during_rss = proc_status(server.proc.pid)
            # The streams are still open: nothing was closed by the server meanwhile.
            for reader, _ in streams[1:]:
                assert not reader.at_eof()
            for _, writer in streams:
                writer.close()
            return (loaded_threads, loaded_rss, state, replies, during_threads, during_rss)

        loaded_threads, loaded_rss, state, replies, during_threads, during_rss = \
            asyncio.run(scenario())
        print(f"\nidle: threads={idle_threads} rss={idle_rss} MiB; "
              f"{STREAMS} open streams: threads={loaded_threads} rss={loaded_rss} MiB; "
              f"with real traffic: threads={during_threads} rss={during_rss} MiB; "
              f"server sockets={state['open_sockets']}, queued={state['queued']}", flush=True)
        assert state["open_sockets"] >= STREAMS
        assert state["queued"] == STREAMS - 1
        for (path, _), (status, reply), want in zip(traffic, replies, expected):
            assert status == 200, reply
            assert text_of(path, reply) == want
        assert max(loaded_threads, during_threads) <= MAX_THREADS
        assert max(loaded_rss, during_rss) - idle_rss <= MAX_RSS_GROWTH_MB
        server.assert_no_leak()
        assert proc_status(server.proc.pid)[0] <= MAX_THREADS
    finally:
        assert server.stop() == 0

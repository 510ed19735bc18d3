"""The built-in chat page at / against a real radixserve (SmolLM2), in headless Chromium.

chat_page.mjs drives the page with playwright-core (npm, installed by scripts/setup into
~/.cache/radixserve/npm) and Debian's /usr/bin/chromium; this file starts the servers, runs it
and checks what the page did against what the server reports (/v1/models, /get_load,
/server_info, /metrics). Screenshots go to ~/.cache/radixserve/artifacts/.

Without chromium, node or playwright-core the browser tests skip with the reason, except in CI
(CI=true), where they fail.
"""
import json
import os
import pathlib
import shutil
import subprocess
import time

import pytest
import requests

from server_util import SMOLLM2, Server

HERE = pathlib.Path(__file__).resolve().parent
REPO = HERE.parents[1]
STATIC = REPO / "src/web/static"
CACHE = pathlib.Path(os.environ.get("RADIX_CACHE", pathlib.Path.home() / ".cache/radixserve"))
NPM = pathlib.Path(os.environ.get("RADIX_NPM", CACHE / "npm"))
CHROMIUM = pathlib.Path(os.environ.get("RADIX_CHROMIUM", "/usr/bin/chromium"))
ARTIFACTS = CACHE / "artifacts"
IN_CI = os.environ.get("CI", "").lower() in ("1", "true", "yes")
API_KEY = "sk-browser-test-key"


def require_browser():
    missing = []
    if not CHROMIUM.exists():
        missing.append(f"{CHROMIUM} (apt-get install chromium)")
    if shutil.which("node") is None:
        missing.append("node (apt-get install nodejs)")
    if not (NPM / "node_modules/playwright-core/package.json").exists():
        missing.append(f"playwright-core in {NPM} (scripts/setup)")
    if missing:
        message = "browser test needs " + ", ".join(missing)
        if IN_CI:
            pytest.fail(message)
        pytest.skip(message)


def run_page(url, scenario, *extra):
    require_browser()
    cmd = ["node", str(HERE / "chat_page.mjs"), "--url", url, "--scenario", scenario, *extra]
    done = subprocess.run(cmd, capture_output=True, text=True, timeout=900,
                          env={**os.environ, "RADIX_NPM": str(NPM),
                               "RADIX_CHROMIUM": str(CHROMIUM)})
    assert done.returncode == 0, f"{scenario} failed:\n{done.stderr}\n{done.stdout}"
    return json.loads(done.stdout.strip().splitlines()[-1])


def start_server(*args):
    if not SMOLLM2.exists():
        pytest.fail(f"{SMOLLM2} missing: run scripts/setup")
    # Every decode step takes at least 20 ms (the engine's test hook), so an answer streams over
    # many frames however fast the machine is: on a loaded CI machine the page once received a
    # whole 31-character answer in one read and rendered it in one update.
    return Server(SMOLLM2, *args, env={"RADIX_TEST_STEP_DELAY_MS": "20"})


@pytest.fixture(scope="module")
def server():
    srv = start_server("--enable-metrics", "--enable-cache-report")
    yield srv
    assert srv.stop() == 0, srv.logs()


@pytest.fixture(scope="module")
def keyed_server():
    srv = start_server("--api-key", API_KEY)
    yield srv
    assert srv.stop() == 0, srv.logs()


def metric(server, name):
    """Sum of every sample of metric `name` in the Prometheus text of /metrics."""
    text = requests.get(server.url + "/metrics", timeout=10).text
    total = 0.0
    for line in text.splitlines():
        if line.startswith(name) and line[len(name)] in " {":
            total += float(line.rsplit(" ", 1)[1])
    return total


def wait_idle(server, headers=None):
    """Waits until /get_load reports no request (the wait is bounded; nothing asserts on time)."""
    deadline = time.time() + 120
    while time.time() < deadline:
        load = requests.get(server.url + "/get_load", headers=headers, timeout=10).json()
        if sum(entry["num_reqs"] for entry in load) == 0:
            return
        time.sleep(0.1)
    raise AssertionError(f"server still busy: {load}")


def check_png(path):
    data = pathlib.Path(path).read_bytes()
    assert data[:8] == b"\x89PNG\r\n\x1a\n" and len(data) > 10_000
    print(f"screenshot: {path}")


def test_page_and_assets_are_served(server):
    page = requests.get(server.url + "/", timeout=10)
    assert page.status_code == 200
    assert page.headers["content-type"].startswith("text/html")
    assert "default-src 'none'" in page.headers["content-security-policy"]
    assert page.content == (STATIC / "index.html").read_bytes()
    for path in sorted(STATIC.iterdir()):
        got = requests.get(f"{server.url}/static/{path.name}", timeout=10)
        assert got.status_code == 200, path.name
        assert got.content == path.read_bytes(), path.name
    assert requests.get(server.url + "/static/chat.js").headers["content-type"].startswith(
        "text/javascript")
    missing = requests.get(server.url + "/static/missing.js", timeout=10)
    assert missing.status_code == 404 and missing.json()["code"] == 404
    head = requests.head(server.url + "/", timeout=10)
    assert head.status_code == 200 and head.content == b""
    assert requests.put(server.url + "/", timeout=10).status_code == 405
    # POST / is LightLLM's and RTP-LLM's generation route (docs/api.md), not the page's.
    assert requests.post(server.url + "/", timeout=10).status_code == 400


def test_chat_streams_markdown_and_stops(server):
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    screenshot = ARTIFACTS / "chat_page.png"
    generated_before = metric(server, "sglang:generation_tokens_total")
    aborted_before = metric(server, "sglang:num_aborted_requests_total")

    result = run_page(server.url, "chat", "--screenshot", str(screenshot))

    assert result["pageErrors"] == []
    assert not [e for e in result["consoleErrors"] if "Content Security Policy" in e]
    assert result["pwned"] is False and "<img" not in result["markdownXss"]
    models = requests.get(server.url + "/v1/models", timeout=10).json()["data"]
    assert result["modelOptions"] == [m["id"] for m in models]
    assert result["modelTitle"] == models[0]["id"]
    assert models[0]["id"].endswith(result["modelName"]) and "/" not in result["modelName"]

    # 1. The answer grew on screen while it streamed, then finished with stats.
    first = result["first"]
    assert first["error"] is None and first["text"].strip()
    streamed = [g["length"] for g in first["growth"] if g["streaming"] and g["length"] > 0]
    assert len(streamed) >= 3, first["growth"]
    assert streamed == sorted(streamed)
    assert first["finish"] in ("stop", "length")
    assert 0 < first["tokens"] <= 48
    assert "tok/s" in first["stats"]
    assert first["cached"] is not None  # --enable-cache-report: the page shows the count

    chats = [json.loads(r["body"]) for r in result["requests"]
             if r["path"] == "/v1/chat/completions"]
    assert len(chats) == 3
    assert chats[0]["rid"] == first["rid"] and chats[0]["stream"] is True
    assert chats[0]["stream_options"] == {"include_usage": True}
    assert chats[0]["max_tokens"] == 48 and chats[0]["temperature"] == 0
    assert chats[0]["messages"][0] == {"role": "system",
                                       "content": "You are a concise assistant."}

    # 2. Stop mid-answer: the fetch ended and /abort_request named the request's rid.
    stopped = result["stopped"]
    assert result["stopVisibleWhileStreaming"] and result["sendVisibleAfterStop"]
    assert stopped["finish"] == "stopped" and stopped["error"] is None
    assert stopped["chunks"] >= result["chunksAtStop"] >= 8
    assert chats[1]["rid"] == stopped["rid"] and chats[1]["max_tokens"] == 4000
    aborts = [json.loads(r["body"]) for r in result["requests"] if r["path"] == "/abort_request"]
    assert aborts == [{"rid": stopped["rid"]}]

    # 3. The follow-up shares the conversation's prefix, which the radix cache kept.
    third = result["third"]
    assert third["error"] is None and third["text"].strip()
    assert third["cached"] > 0
    assert [m["role"] for m in chats[2]["messages"]] == [
        "system", "user", "assistant", "user", "assistant", "user"]

    # The server released the stopped request long before its 4000 tokens and leaked nothing.
    wait_idle(server)
    server.assert_no_leak()
    assert metric(server, "sglang:num_aborted_requests_total") - aborted_before == 1
    generated = metric(server, "sglang:generation_tokens_total") - generated_before
    assert generated < 4000, generated
    check_png(screenshot)


def test_api_key_is_asked_for(keyed_server):
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    screenshot = ARTIFACTS / "chat_page_api_key.png"
    # The page is public; the API behind it is not.
    assert requests.get(keyed_server.url + "/", timeout=10).status_code == 200
    assert requests.get(keyed_server.url + "/v1/models", timeout=10).status_code == 401

    result = run_page(keyed_server.url, "apikey", "--api-key", API_KEY,
                      "--screenshot", str(screenshot))

    assert result["pageErrors"] == []
    assert result["pageStatus"] == 200 and result["dialogShown"] and result["wrongKeyRejected"]
    assert result["storedKey"] == API_KEY
    assert result["modelName"]
    first = result["first"]
    assert first["error"] is None and first["text"].strip()
    assert first["finish"] in ("stop", "length")
    chats = [r for r in result["requests"] if r["path"] == "/v1/chat/completions"]
    assert chats and all(r["authorization"] == f"Bearer {API_KEY}" for r in chats)
    headers = {"Authorization": f"Bearer {API_KEY}"}
    wait_idle(keyed_server, headers)
    keyed_server.assert_no_leak(headers)
    check_png(screenshot)

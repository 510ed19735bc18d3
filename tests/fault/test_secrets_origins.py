"""Secrets stay secret, admin routes need the admin key, cross-origin and rebinding requests are
refused, /health_generate does not spawn threads (contract 8)."""
import threading

import pytest
import requests

from fault_util import STORIES, TIMEOUT, finish_module, post, start_server

API_KEY = "sk-secret-XYZ"
ADMIN_KEY = "sk-admin-ABC123"
USER = {"Authorization": f"Bearer {API_KEY}"}
ADMIN = {"Authorization": f"Bearer {ADMIN_KEY}"}
EVIL = "http://evil.example"
GOOD = "http://good.example"


@pytest.fixture(scope="module")
def keyed():
    srv = start_server(STORIES, "--api-key", API_KEY)
    yield srv
    finish_module(srv, headers=USER)


@pytest.fixture(scope="module")
def admin():
    srv = start_server(STORIES, "--api-key", API_KEY, "--admin-api-key", ADMIN_KEY)
    yield srv
    finish_module(srv, headers=USER)


@pytest.fixture(scope="module")
def origins():
    srv = start_server(STORIES, "--allowed-origins", GOOD)
    yield srv
    finish_module(srv)


def exercise(server):
    """Authorized, unauthorized and wrong-key traffic, so that every auth path logs."""
    body = {"text": "hi", "sampling_params": {"max_new_tokens": 1}}
    assert post(server, "/generate", body, headers=USER).status_code == 200
    assert post(server, "/generate", body).status_code == 401
    assert post(server, "/generate", body,
                headers={"Authorization": "Bearer sk-secret-XYZW"}).status_code == 401
    requests.get(server.url + "/server_info", headers=USER, timeout=TIMEOUT)
    requests.get(server.url + "/get_server_info", headers=USER, timeout=TIMEOUT)


def test_api_key_not_in_logs_or_server_info(keyed):
    exercise(keyed)
    for route in ("/server_info", "/get_server_info"):
        r = requests.get(keyed.url + route, headers=USER, timeout=TIMEOUT)
        assert r.status_code == 200, r.text[:300]
        assert API_KEY not in r.text, f"{route} shows the API key"
    assert API_KEY not in keyed.log_path.read_text(errors="replace"), "the log shows the API key"


def test_admin_key_not_in_logs_or_server_info(admin):
    exercise(admin)
    r = requests.get(admin.url + "/server_info", headers=USER, timeout=TIMEOUT)
    assert r.status_code == 200, r.text[:300]
    for secret in (API_KEY, ADMIN_KEY):
        assert secret not in r.text
        assert secret not in admin.log_path.read_text(errors="replace")
    r = requests.get(admin.url + "/server_info", headers=ADMIN, timeout=TIMEOUT)
    for secret in (API_KEY, ADMIN_KEY):
        assert secret not in r.text


@pytest.mark.parametrize("method, path, body", [
    ("POST", "/flush_cache", None),
    ("GET", "/flush_cache", None),
    ("POST", "/abort_request", {"abort_all": True}),
])
def test_admin_routes_need_the_admin_key(admin, method, path, body):
    url = admin.url + path
    for headers in ({}, USER, {"Authorization": "Bearer wrong"}):
        r = requests.request(method, url, json=body, headers=headers, timeout=TIMEOUT)
        assert r.status_code == 401, (headers, r.status_code, r.text[:300])
    r = requests.request(method, url, json=body, headers=ADMIN, timeout=TIMEOUT)
    assert r.status_code == 200, r.text[:300]


def test_abort_all_without_admin_key_aborts_nothing(admin):
    """A refused abort_all leaves a running request alone."""
    body = {"text": "Once upon a time", "rid": "keep-me",
            "sampling_params": {"max_new_tokens": 200, "ignore_eos": True}}
    result = {}
    t = threading.Thread(target=lambda: result.update(
        r=post(admin, "/generate", body, headers=USER, timeout=60)))
    t.start()
    r = post(admin, "/abort_request", {"abort_all": True}, headers=USER)
    t.join(60)
    assert r.status_code == 401, r.text[:300]
    out = result["r"]
    assert out.status_code == 200, out.text[:300]
    assert out.json()["meta_info"]["finish_reason"]["type"] == "length"


def test_normal_key_still_serves_with_admin_key_set(admin):
    r = post(admin, "/generate", {"text": "hi", "sampling_params": {"max_new_tokens": 1}},
             headers=USER)
    assert r.status_code == 200, r.text[:300]
    r = requests.get(admin.url + "/health", timeout=TIMEOUT)
    assert r.status_code == 200


# ------------------------------------------------------------------------------------------------
# CORS


def credentialed_echo(response, origin):
    return (response.headers.get("Access-Control-Allow-Origin") == origin
            and response.headers.get("Access-Control-Allow-Credentials", "").lower() == "true")


def test_default_cors_does_not_echo_origin_with_credentials(stories):
    headers = {"Origin": EVIL, "Cookie": "session=abc"}
    r = requests.get(stories.url + "/v1/models", headers=headers, timeout=TIMEOUT)
    assert not credentialed_echo(r, EVIL), dict(r.headers)
    r = post(stories, "/generate", {"text": "hi", "sampling_params": {"max_new_tokens": 1}},
             headers=headers)
    assert not credentialed_echo(r, EVIL), dict(r.headers)
    r = requests.options(stories.url + "/generate", timeout=TIMEOUT, headers={
        "Origin": EVIL, "Access-Control-Request-Method": "POST",
        "Access-Control-Request-Headers": "content-type"})
    assert not credentialed_echo(r, EVIL), dict(r.headers)


def test_allowed_origins_preflight(origins):
    pre = {"Access-Control-Request-Method": "POST",
           "Access-Control-Request-Headers": "content-type"}
    r = requests.options(origins.url + "/v1/chat/completions", timeout=TIMEOUT,
                         headers={"Origin": GOOD, **pre})
    assert r.status_code < 300, r.text[:300]
    assert r.headers.get("Access-Control-Allow-Origin") == GOOD, dict(r.headers)
    r = requests.options(origins.url + "/v1/chat/completions", timeout=TIMEOUT,
                         headers={"Origin": EVIL, **pre})
    assert "Access-Control-Allow-Origin" not in r.headers, dict(r.headers)


def test_allowed_origins_simple_request(origins):
    r = requests.get(origins.url + "/v1/models", headers={"Origin": GOOD}, timeout=TIMEOUT)
    assert r.status_code == 200
    assert r.headers.get("Access-Control-Allow-Origin") == GOOD, dict(r.headers)
    r = requests.get(origins.url + "/v1/models", headers={"Origin": EVIL}, timeout=TIMEOUT)
    assert "Access-Control-Allow-Origin" not in r.headers, dict(r.headers)


# ------------------------------------------------------------------------------------------------
# DNS rebinding: bound to 127.0.0.1, only loopback Host names are served


@pytest.mark.parametrize("host", ["evil.example", "evil.example:80", "attacker.test:{port}"])
def test_foreign_host_header_is_refused(stories, host):
    host = host.format(port=stories.port)
    for method, path, body in (("GET", "/v1/models", None),
                               ("POST", "/generate",
                                {"text": "hi", "sampling_params": {"max_new_tokens": 1}})):
        r = requests.request(method, stories.url + path, json=body, headers={"Host": host},
                             timeout=TIMEOUT)
        assert r.status_code in (403, 421), (host, path, r.status_code, r.text[:300])


@pytest.mark.parametrize("host", ["127.0.0.1:{port}", "localhost:{port}"])
def test_loopback_host_header_is_served(stories, host):
    host = host.format(port=stories.port)
    r = requests.get(stories.url + "/v1/models", headers={"Host": host}, timeout=TIMEOUT)
    assert r.status_code == 200, (host, r.status_code, r.text[:300])
    r = post(stories, "/generate", {"text": "hi", "sampling_params": {"max_new_tokens": 1}},
             headers={"Host": host})
    assert r.status_code == 200, (host, r.status_code, r.text[:300])


# ------------------------------------------------------------------------------------------------
# /health_generate does not cost a thread per call


def test_health_generate_does_not_spawn_threads(stories):
    before = stories.threads()
    peak = [before]
    stop = threading.Event()

    def sample():
        while not stop.is_set():
            try:
                peak[0] = max(peak[0], stories.threads())
            except (OSError, KeyError):
                return
            stop.wait(0.005)

    sampler = threading.Thread(target=sample, daemon=True)
    sampler.start()
    results = []
    barrier = threading.Barrier(50)

    def call():
        barrier.wait(timeout=30)
        results.append(requests.get(stories.url + "/health_generate", timeout=60).status_code)

    callers = [threading.Thread(target=call) for _ in range(50)]
    for c in callers:
        c.start()
    for c in callers:
        c.join(90)
    stop.set()
    sampler.join(5)
    assert results == [200] * 50, results
    assert peak[0] - before <= 6, f"threads went from {before} to {peak[0]}"

"""Bad input gets a clear 4xx JSON error and the server keeps serving (issue 7)."""
import pytest
import requests

from server_util import SMOLLM2, Server

LIMIT = 32 * 1024 * 1024  # the documented request body limit


@pytest.fixture(scope="module")
def server():
    srv = Server(SMOLLM2, "--context-length", "512")
    yield srv
    assert srv.stop() == 0, srv.logs()


def post(server, path, data=None, json_body=None, headers=None):
    return requests.post(server.url + path, data=data, json=json_body, headers=headers,
                         timeout=60)


def assert_error(response, status):
    assert response.status_code == status, response.text
    body = response.json()
    message = body.get("message") or body.get("error", {}).get("message") or body.get("error")
    assert message, body


CHAT = "/v1/chat/completions"
JSON = {"Content-Type": "application/json"}


@pytest.mark.parametrize("path, data, status", [
    (CHAT, b"{not json", 400),
    ("/generate", b"{not json", 400),
    (CHAT, b'{"messages": "hi"}', 400),
    (CHAT, b'{"messages": []}', 400),
    (CHAT, b'{"messages": [{"role": "user", "content": "x"}], "max_tokens": -5}', 400),
    (CHAT, b'{"messages": [{"role": "user", "content": "x"}], "temperature": "hot"}', 400),
    (CHAT, b'{"messages": [{"role": "user", "content": "x"}], "top_p": 7}', 400),
    (CHAT, b'{"messages": [{"role": "wizard", "content": "x"}]}', 400),
    ("/v1/completions", b'{"prompt": "x", "max_tokens": 0}', 400),
    ("/v1/completions", b'{"prompt": ""}', 400),
    ("/v1/completions", b'{"prompt": "x", "suffix": "y"}', 400),
    ("/generate", b'{"sampling_params": {"max_new_tokens": 1}}', 400),
    ("/generate", b'{"text": "x", "sampling_params": {"top_k": 0}}', 400),
    ("/generate", b'{"text": "x", "bogus_field": 1}', 400),
    ("/generate", b'{"input_ids": [999999999]}', 400),
    (CHAT, b'{"messages": [{"role": "user", "content": "\xff\xfe"}]}', 400),
])
def test_bad_bodies(server, path, data, status):
    assert_error(post(server, path, data=data, headers=JSON), status)


def test_prompt_over_context(server):
    r = post(server, "/generate", json_body={"text": "hello " * 2000,
                                             "sampling_params": {"max_new_tokens": 4}})
    assert_error(r, 400)
    assert "context length" in r.text


def test_wrong_content_type(server):
    r = post(server, CHAT, data=b'{"messages": [{"role": "user", "content": "x"}]}',
             headers={"Content-Type": "text/plain"})
    assert_error(r, 400)
    assert "application/json" in r.text


def test_oversized_body(server):
    r = post(server, "/generate", data=b"x" * (LIMIT + 1), headers=JSON)
    assert r.status_code == 413


def test_unknown_route(server):
    r = requests.get(server.url + "/no/such/route")
    assert_error(r, 404)


def test_still_serving_and_no_leak(server):
    r = post(server, "/generate", json_body={"text": "Hello",
                                             "sampling_params": {"max_new_tokens": 3}})
    assert r.status_code == 200, r.text
    server.assert_no_leak()


@pytest.fixture(scope="module")
def keyed_server():
    srv = Server(SMOLLM2, "--api-key", "sekrit")
    yield srv
    assert srv.stop() == 0, srv.logs()


def test_api_key(keyed_server):
    url = keyed_server.url
    body = {"text": "hi", "sampling_params": {"max_new_tokens": 1}}
    assert requests.post(url + "/generate", json=body).status_code == 401
    assert requests.post(url + "/generate", json=body,
                         headers={"Authorization": "Bearer wrong"}).status_code == 401
    assert requests.post(url + "/generate", json=body,
                         headers={"Authorization": "Bearer sekrit"}).status_code == 200
    assert requests.get(url + "/health").status_code == 200
    keyed_server.assert_no_leak(headers={"Authorization": "Bearer sekrit"})

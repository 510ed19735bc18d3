"""SGLang's own frontend language against radixserve (issue 16): sgl.gen with regex and
json_schema, sgl.select, fork/join, multi-turn chat roles and run_batch, through SGLang's
RuntimeEndpoint backend (SGLang's package, pip-installed by scripts/setup; the frontend runs in a
subprocess, see sglang_frontend_script.py). Constrained outputs are checked with Python's
`re.fullmatch` and `jsonschema`, not with anything radixserve computes."""
import json
import pathlib
import re
import subprocess
import sys

import jsonschema
import pytest

from server_util import SMOLLM2, Server

SCRIPT = pathlib.Path(__file__).with_name("sglang_frontend_script.py")
sys.path.insert(0, str(SCRIPT.parent))
from sglang_frontend_script import CITY, IP_REGEX  # noqa: E402  (plain constants)


@pytest.fixture(scope="module")
def results():
    if not SMOLLM2.exists():
        pytest.fail(f"{SMOLLM2} missing: run scripts/setup")
    srv = Server(SMOLLM2, "--max-running-requests", "8")
    try:
        proc = subprocess.run([sys.executable, str(SCRIPT), srv.url], capture_output=True,
                              timeout=600)
        assert proc.returncode == 0, proc.stderr.decode()[-3000:]
        srv.assert_no_leak()
        yield json.loads(proc.stdout.decode().strip().splitlines()[-1])
    finally:
        assert srv.stop() == 0, srv.logs()


def test_gen_with_regex(results):
    assert re.fullmatch(IP_REGEX, results["ip"]), results["ip"]
    for ip in results["batch_ips"]:
        assert re.fullmatch(IP_REGEX, ip), ip
    # Greedy: the batch repeats the single run.
    assert results["batch_ips"] == [results["ip"]] * 3


def test_gen_with_json_schema(results):
    jsonschema.validate(json.loads(results["city"]), CITY)


def test_select(results):
    assert results["answer"] in ("yes", "no")
    assert results["answer_meta"]


def test_fork_join_and_chat(results):
    [text] = results["facts"]
    assert text.startswith("Two facts about cats:\nFirst: ") and "\nSecond: " in text
    chat = results["chat"]
    assert [m["role"] for m in chat["messages"]] == ["system", "user", "assistant", "user",
                                                     "assistant"]
    assert chat["messages"][2]["content"] == chat["first"]
    assert chat["messages"][4]["content"] == chat["second"]
    assert chat["first"] and chat["second"]

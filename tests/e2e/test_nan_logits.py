"""NaN logits against a real server: --enable-nan-detection warns, --crash-on-nan stops the
process, and without either a NaN logit is simply never chosen.

The model is a copy of stories260K's HF folder whose embedding row for one token is NaN, written
with numpy and safetensors (independent of radixserve). Its embeddings are tied to the LM head,
so every logits row holds exactly one NaN (that token's) as long as the prompt avoids the token."""
import pathlib
import shutil
import time

import numpy as np
import pytest
import requests

from server_util import STORIES, Server

NAN_TOKEN = 500  # "\\" in stories260K's vocabulary: not in the prompt
PROMPT = "Once upon a time, there was a little girl"


@pytest.fixture(scope="module")
def nan_model(tmp_path_factory):
    from safetensors.numpy import load_file, save_file
    src = STORIES.parents[1] / "hf"
    out = tmp_path_factory.mktemp("nan_model")
    for f in src.iterdir():
        if f.name != "model.safetensors":
            shutil.copy(f, out / f.name)
    weights = load_file(str(src / "model.safetensors"))
    embed = weights["model.embed_tokens.weight"].copy()
    embed[NAN_TOKEN] = np.nan
    weights["model.embed_tokens.weight"] = embed
    assert "lm_head.weight" not in weights  # tied: the NaN row is the LM head's row too
    save_file(weights, str(out / "model.safetensors"))
    return out


def full_log(server):
    server.log.flush()
    return server.log_path.read_text(errors="replace")


def greedy(server, **extra):
    return requests.post(server.url + "/generate", timeout=60, json={
        "text": PROMPT, "sampling_params": {"temperature": 0, "max_new_tokens": 6}, **extra})


def prompt_ids(server):
    r = requests.post(server.url + "/tokenize", json={"prompt": PROMPT}, timeout=30)
    return r.json()["tokens"]


def test_without_detection_a_nan_logit_is_never_chosen(nan_model):
    server = Server(nan_model, "--skip-server-warmup")
    try:
        assert NAN_TOKEN not in prompt_ids(server)
        r = greedy(server, return_logprob=True, top_logprobs_num=3)
        assert r.status_code == 200, r.text
        out = r.json()
        assert NAN_TOKEN not in out["output_ids"]
        for lp, token, _ in out["meta_info"]["output_token_logprobs"]:
            assert token != NAN_TOKEN and lp is not None and lp <= 0
        assert "NaN in the logits" not in full_log(server)
    finally:
        assert server.stop() == 0, server.logs()


def test_nan_detection_warns_and_serves(nan_model):
    server = Server(nan_model, "--skip-server-warmup", "--enable-nan-detection")
    try:
        r = greedy(server, rid="nan-rid")
        assert r.status_code == 200, r.text
        assert NAN_TOKEN not in r.json()["output_ids"]
        lines = [line for line in full_log(server).splitlines() if "NaN in the logits" in line]
        assert lines and all("nan-rid" in line for line in lines), lines
        assert greedy(server).status_code == 200
    finally:
        assert server.stop() == 0, server.logs()


def test_crash_on_nan_stops_the_server(nan_model):
    server = Server(nan_model, "--skip-server-warmup", "--crash-on-nan", "true")
    try:
        with pytest.raises(requests.RequestException):
            greedy(server, rid="crash-rid")
        deadline = time.time() + 30
        while server.proc.poll() is None and time.time() < deadline:
            time.sleep(0.1)
        assert server.proc.poll() not in (None, 0), server.logs()
        log = full_log(server)
        assert "NaN in the logits" in log and "crash-rid" in log and "--crash-on-nan" in log
    finally:
        server.stop()


def test_crash_on_nan_leaves_a_healthy_model_alone():
    server = Server(STORIES, "--skip-server-warmup", "--crash-on-nan", "true",
                    "--enable-nan-detection")
    try:
        assert greedy(server).status_code == 200
        assert "NaN in the logits" not in full_log(server)
    finally:
        assert server.stop() == 0, server.logs()

"""Helpers shared by the black-box tests (imported by module name; keep the name unique)."""
import os
import subprocess


def run_radixserve(binary, *args, timeout=30, env=None):
    """Runs the radixserve binary to completion and returns the CompletedProcess (`env`: added to
    this process's environment)."""
    return subprocess.run([str(binary), *map(str, args)], capture_output=True, text=True,
                          timeout=timeout, env=None if env is None else {**os.environ, **env})


def generate_retracting(srv, prompts, max_new):
    """One greedy /generate call with every prompt (ignore_eos), all queued at once into a server
    whose pool cannot hold them (so the pool runs out whatever the machine's speed): the bodies,
    after checking that the server retracted requests."""
    import re

    import requests
    r = requests.post(srv.url + "/generate", json={
        "text": prompts, "sampling_params": {"max_new_tokens": max_new, "temperature": 0,
                                             "ignore_eos": True}}, timeout=600)
    assert r.status_code == 200, r.text
    logs = srv.log_path.read_text(errors="replace")
    assert re.search(r"Retract requests. #retracted_reqs: [1-9]", logs), srv.logs()
    return r.json()

"""Fixtures of the metrics oracle tests: the radix_metrics_script binary, which replays a script
of metric operations through src/metrics and prints the Prometheus exposition."""

import json
import os
import pathlib
import subprocess

import pytest


def script_binary() -> pathlib.Path:
    build = pathlib.Path(os.environ.get("RADIX_BUILD_DIR", "/root/.cache/radixserve/build/release"))
    for candidate in (build / "radix_metrics_script", build / "src/metrics/radix_metrics_script"):
        if candidate.exists():
            return candidate
    return build / "radix_metrics_script"


@pytest.fixture(scope="session")
def run_script():
    """Runs a list of operation dicts; returns (ok, stdout or stderr)."""
    binary = script_binary()
    if not binary.exists():
        pytest.fail(f"{binary} not built (set RADIX_BUILD_DIR)")

    def run(ops):
        text = "".join(json.dumps(op) + "\n" for op in ops)
        proc = subprocess.run([str(binary)], input=text.encode(), capture_output=True)
        if proc.returncode == 0:
            return True, proc.stdout.decode()
        return False, proc.stderr.decode()

    return run

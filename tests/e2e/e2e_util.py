"""Helpers shared by the black-box tests (imported by module name; keep the name unique)."""
import os
import subprocess


def run_radixserve(binary, *args, timeout=30, env=None):
    """Runs the radixserve binary to completion and returns the CompletedProcess (`env`: added to
    this process's environment)."""
    return subprocess.run([str(binary), *map(str, args)], capture_output=True, text=True,
                          timeout=timeout, env=None if env is None else {**os.environ, **env})

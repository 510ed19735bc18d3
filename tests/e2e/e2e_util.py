"""Helpers shared by the black-box tests (imported by module name; keep the name unique)."""
import subprocess


def run_radixserve(binary, *args, timeout=30):
    """Runs the radixserve binary to completion and returns the CompletedProcess."""
    return subprocess.run([str(binary), *map(str, args)], capture_output=True, text=True,
                          timeout=timeout)

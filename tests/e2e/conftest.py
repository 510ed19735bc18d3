"""Shared fixtures for black-box tests of the radixserve binary."""
import json
import os
import pathlib
import subprocess

import pytest

REPO = pathlib.Path(__file__).resolve().parents[2]
SHARED = pathlib.Path(os.environ.get("RADIX_SHARED_DIR", REPO.parent / "shared"))
BUILD = pathlib.Path(os.environ.get("RADIX_BUILD_DIR",
                                    pathlib.Path.home() / ".cache/radixserve/build/release"))


@pytest.fixture(scope="session")
def radixserve_bin():
    path = BUILD / "radixserve"
    assert path.exists(), f"{path} not built (set RADIX_BUILD_DIR)"
    return path


@pytest.fixture(scope="session")
def shared_dir():
    assert SHARED.is_dir(), f"../shared not found at {SHARED}"
    return SHARED


@pytest.fixture(scope="session")
def arg_table():
    """The argument table as the build sees it, keyed by canonical name."""
    out = subprocess.run([str(BUILD / "radix_args_doc"), "--json"], check=True,
                         capture_output=True, text=True).stdout
    return {entry["name"]: entry for entry in json.loads(out)}


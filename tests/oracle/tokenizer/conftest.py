"""Fixtures for the tokenizer oracle tests (helpers live in tokenizer_oracle_util.py)."""

import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parent))
from tokenizer_corpus import build_corpus  # noqa: E402
from tokenizer_oracle_util import binary_path  # noqa: E402


@pytest.fixture(scope="session")
def corpus():
    return build_corpus()


@pytest.fixture(scope="module", autouse=True)
def _radix_tokenize_built():
    if not binary_path().exists():
        pytest.fail(f"{binary_path()} not built (set RADIX_BUILD_DIR)")

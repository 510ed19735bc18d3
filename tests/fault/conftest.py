"""Fixtures of the fault-and-abuse suite (black-box, against the radixserve binary).

Every module starts its own server(s) and, when its module fixture is torn down, checks that the
server is still alive, leak-free and serving (`fault_util.finish_module`).
"""
import pathlib
import sys

import pytest

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))

from fault_util import STORIES, finish_module, start_server  # noqa: E402


def pytest_xdist_make_scheduler(config, log):
    """Whole files per worker: a module's server is started once, not once per worker."""
    if getattr(config.option, "dist", "load") != "load":
        return None
    from xdist.scheduler import LoadFileScheduling
    return LoadFileScheduling(config, log)


@pytest.fixture(scope="module")
def stories():
    """A plain stories260K server (fast) with a chat template for the OpenAI chat route."""
    srv = start_server(STORIES, "--chat-template", "chatml")
    yield srv
    finish_module(srv)



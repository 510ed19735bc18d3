"""Root pytest hooks. Under the README's test command (scripts/test sets
RADIX_REQUIRE_REFERENCES=1) a skip in tests/oracle is a failure: an oracle whose reference
(a Python package, a model, an npm tokenizer) is missing must not go green unseen. Skips that
are part of a test's design say so with a reason starting "by design:" and stay skips."""
import os

import pytest

REQUIRED = os.environ.get("RADIX_REQUIRE_REFERENCES") == "1"
BY_DESIGN = "by design:"
ORACLE_DIR = os.path.join(os.path.dirname(os.path.abspath(__file__)), "oracle")


def _skip_reason(longrepr):
    # A skip's longrepr is (file, line, "Skipped: reason").
    if isinstance(longrepr, tuple) and len(longrepr) == 3:
        return str(longrepr[2])
    return str(longrepr)


def _strict(path, report):
    if not (REQUIRED and report.skipped and str(path).startswith(ORACLE_DIR)):
        return
    reason = _skip_reason(report.longrepr)
    if BY_DESIGN in reason:
        return
    report.outcome = "failed"
    report.longrepr = (f"oracle reference missing (RADIX_REQUIRE_REFERENCES=1 turns this skip "
                       f"into a failure): {reason}")


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item, call):
    outcome = yield
    _strict(item.fspath, outcome.get_result())


@pytest.hookimpl(hookwrapper=True)
def pytest_make_collect_report(collector):
    outcome = yield
    # A module-level importorskip skips the whole module at collection.
    _strict(getattr(collector, "fspath", ""), outcome.get_result())

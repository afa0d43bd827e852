"""Under CI=true a test skipped for a missing package fails instead (imported by tests/conftest.py).

A skip from `pytest.importorskip` ("could not import 'x'") means the session that ran
the test did not install what it needs, so the default run would silently test less
than it claims. Locally such skips stay skips (a developer may run one package's tests
alone). Skips with a reason of their own (a Python version, a package that a session
leaves out on purpose, named in that reason) are not touched.
"""

from __future__ import annotations

import os
from typing import Any

import pytest

#: The start of pytest.importorskip's skip reason.
MISSING_PACKAGE = "could not import "


def _reason(report: Any) -> str:
    longrepr = report.longrepr
    return str(longrepr[2] if isinstance(longrepr, tuple) and len(longrepr) == 3 else longrepr)


def _fail_if_missing_package(report: Any) -> None:
    if os.environ.get("CI") != "true" or not report.skipped:
        return
    reason = _reason(report)
    if MISSING_PACKAGE not in reason:
        return
    report.outcome = "failed"
    report.longrepr = (
        f"{reason.removeprefix('Skipped: ')}: CI=true turns a skip for a missing package into a failure; "
        "install the package in the nox session that runs this test"
    )


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo[None]) -> Any:
    outcome = yield
    _fail_if_missing_package(outcome.get_result())


@pytest.hookimpl(hookwrapper=True)
def pytest_make_collect_report(collector: pytest.Collector) -> Any:
    outcome = yield
    _fail_if_missing_package(outcome.get_result())

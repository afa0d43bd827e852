"""Under CI=true a skip for a missing package is a failure (tests/skip_policy.py).

pytest runs in a subprocess over two throw-away test files with the policy plugin,
once as CI runs it and once as a developer does.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

TESTS = Path(__file__).resolve().parent.parent

IN_A_TEST = """
import pytest

def test_needs_a_missing_package():
    pytest.importorskip("trainkit_no_such_package")

def test_skipped_for_a_reason_of_its_own():
    pytest.skip("needs Python 3.11+")

def test_passes():
    pass
"""
AT_MODULE_LEVEL = """
import pytest

pytest.importorskip("trainkit_no_such_package_either")

def test_never_collected():
    pass
"""


def run_pytest(folder: Path, ci: bool) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if k != "CI"}
    env["PYTHONPATH"] = os.pathsep.join([str(TESTS), env.get("PYTHONPATH", "")])
    env["PYTEST_DISABLE_PLUGIN_AUTOLOAD"] = "1"  # only the policy: starts in a fraction of the time
    if ci:
        env["CI"] = "true"
    return subprocess.run(
        [sys.executable, "-m", "pytest", "-p", "skip_policy", "-p", "no:cacheprovider", "-c", os.devnull,
         "--rootdir", str(folder), "--continue-on-collection-errors", "-rA", str(folder)],
        cwd=folder, env=env, capture_output=True, text=True, timeout=120,
    )  # fmt: skip


@pytest.mark.slow
def test_a_skip_for_a_missing_package_fails_under_ci(tmp_path: Path) -> None:
    (tmp_path / "test_in_a_test.py").write_text(IN_A_TEST)
    (tmp_path / "test_at_module_level.py").write_text(AT_MODULE_LEVEL)

    ci = run_pytest(tmp_path, ci=True)
    assert ci.returncode != 0, ci.stdout
    assert "FAILED test_in_a_test.py::test_needs_a_missing_package" in ci.stdout
    assert "ERROR test_at_module_level.py" in ci.stdout
    assert "could not import 'trainkit_no_such_package_either'" in ci.stdout
    assert "CI=true turns a skip for a missing package into a failure" in ci.stdout
    assert "SKIPPED [1] test_in_a_test.py" in ci.stdout and "needs Python 3.11+" in ci.stdout
    assert "PASSED test_in_a_test.py::test_passes" in ci.stdout

    local = run_pytest(tmp_path, ci=False)
    assert local.returncode == 0, local.stdout
    assert "1 passed, 3 skipped" in local.stdout

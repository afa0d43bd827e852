"""Test matrix of the trainkit monorepo.

`nox` (no arguments) runs the default sessions: lint, typecheck, the torch-free tests
of each package on every supported Python, the training stack's tests on 3.11 (the
Python of the CPU torch wheel on these machines), and plugin discovery. Sessions use
pip (not uv): only pip finds the CPU torch wheel on these machines' disks.
"""

from __future__ import annotations

import nox

nox.options.default_venv_backend = "venv"
nox.options.error_on_missing_interpreters = True
nox.options.sessions = ["lint", "typecheck", "tests", "ml", "plugin_discovery"]

ROOT = nox.project.load_toml("pyproject.toml")
PYTHONS = nox.project.python_versions(nox.project.load_toml("packages/trainkit-cli/pyproject.toml"))
ML_PYTHON = "3.11"
CONSTRAINTS = ("-c", "constraints/ci.txt")

CORE = "./packages/trainkit-core"
CLI = "./packages/trainkit-cli"
API = "./packages/trainkit-api"
MODAL = "./packages/trainkit-modal"

#: What each package's torch-free tests install (siblings they are tested with).
LIGHT_INSTALLS = {
    "core": [CORE, CLI],
    "cli": [CORE, CLI],
    "api": [CORE, CLI, API],
    "modal": [CORE, CLI, API, MODAL],
}
#: The ML tests need the [train] extra; they run e2e through every consumer.
ML_INSTALLS = [f"{CORE}[train]", CLI, API, MODAL]


def _pytest(session: nox.Session, *args: str) -> None:
    session.run("pytest", *args, *session.posargs, env={"PYTHONDONTWRITEBYTECODE": "1"})


@nox.session(python=PYTHONS)
@nox.parametrize("package", list(LIGHT_INSTALLS))
def tests(session: nox.Session, package: str) -> None:
    """One package's tests that need no torch, on one Python."""
    session.install(*CONSTRAINTS, *LIGHT_INSTALLS[package], *nox.project.dependency_groups(ROOT, "test"))
    _pytest(session, f"tests/{package}", "-m", "not ml and not browser and not unsloth and not modal_live")


@nox.session(python=ML_PYTHON)
def ml(session: nox.Session) -> None:
    """Tests that train, infer and evaluate for real (CPU, tiny model), e2e included."""
    session.install(*CONSTRAINTS, *ML_INSTALLS, *nox.project.dependency_groups(ROOT, "test", "ml-test"))
    _pytest(session, "tests", "-m", "ml and not unsloth and not modal_live", "-p", "no:cacheprovider")


@nox.session(python=ML_PYTHON)
def plugin_discovery(session: nox.Session) -> None:
    """The fixture third-party provider, installed non-editable, is found and passes the suite."""
    session.install(*CONSTRAINTS, CORE, CLI, "./tests/fixtures/trainkit-dirstore", *nox.project.dependency_groups(ROOT, "test"))
    _pytest(session, "tests/contract", "-m", "not ml")


@nox.session(python=ML_PYTHON)
def lint(session: nox.Session) -> None:
    session.install(*nox.project.dependency_groups(ROOT, "lint"))
    session.run("ruff", "check", ".")
    session.run("ruff", "format", "--check", ".")


@nox.session(python=ML_PYTHON)
def typecheck(session: nox.Session) -> None:
    session.install(*CONSTRAINTS, CORE, CLI, API, MODAL, *nox.project.dependency_groups(ROOT, "typecheck"))
    session.run("mypy")


@nox.session(python=ML_PYTHON, default=False)
def demo(session: nox.Session) -> None:
    """The README's main job: validate, sync, train tiny, eval base vs tuned, generate."""
    session.install(*CONSTRAINTS, f"{CORE}[train]", CLI)
    session.run("trainkit", "demo", *session.posargs)

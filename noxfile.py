"""Test matrix of the trainkit monorepo.

`nox` (no arguments) runs the default sessions: lint, typecheck, the torch-free tests
of each package alone on 3.11 and of all four together (but the `slow` ones) on every
other supported Python, the training stack's tests on 3.11 (the
Python of the CPU torch wheel on these machines), the Modal app in simulated
containers, plugin discovery, the release check (`build`) and the documentation
site (`docs`). Sessions that install
torch use pip (not uv): only pip finds the CPU torch wheel on these machines' disks;
the others use uv when it is installed (run.py installs nox with it).
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import sys
from pathlib import Path

import nox

try:
    import fcntl
except ImportError:  # Windows: concurrent nox runs may build the wheels twice; the rename keeps one
    fcntl = None  # type: ignore[assignment]

nox.options.default_venv_backend = "venv"
nox.options.error_on_missing_interpreters = True
nox.options.sessions = [
    "lint", "typecheck", "tests", "ml", "modal_container", "plugin_discovery", "build", "docs", "modal_resolve", "ray",
]  # fmt: skip

ROOT = nox.project.load_toml("pyproject.toml")
PYTHONS = nox.project.python_versions(nox.project.load_toml("packages/trainkit-cli/pyproject.toml"))
ML_PYTHON = "3.11"
CONSTRAINTS = ("-c", "constraints/ci.txt")
HERE = Path(__file__).resolve().parent

#: The distributions built from this repository, by short name.
SOURCES = {
    "core": "packages/trainkit-core",
    "cli": "packages/trainkit-cli",
    "api": "packages/trainkit-api",
    "modal": "packages/trainkit-modal",
    "dirstore": "tests/fixtures/trainkit-dirstore",
    "sqlvol": "tests/fixtures/trainkit-sqlvol",
    "ray": "packages/trainkit-ray",
}
#: Source paths, for sessions that install from source (not the shared wheels).
CORE, CLI, API, MODAL = (f"./{SOURCES[name]}" for name in ("core", "cli", "api", "modal"))
#: What each package's torch-free tests install (siblings they are tested with).
LIGHT_INSTALLS = {
    "core": ["core", "cli"],
    "cli": ["core", "cli"],
    "api": ["core", "cli", "api"],
    "modal": ["core", "cli", "api", "modal"],
}
#: Sessions without torch install with uv when it is there (seconds instead of a minute
#: each over a matrix of 16); the ML sessions stay on pip, the only installer that
#: takes the CPU torch wheel lying on these machines' disks.
LIGHT_BACKEND = "uv|venv"
LIGHT_MARKERS = "not ml and not browser and not unsloth and not modal_live and not container_sim and not pypi_resolve"


def _wheels(session: nox.Session) -> dict[str, str]:
    """Wheels of the local distributions, built once per state of their sources.

    Every session installs the same non-editable wheels instead of building each
    package again (a build environment per package per session costs minutes over
    the matrix). The folder is keyed by a hash of the sources, so an edit rebuilds.
    """
    digest = hashlib.sha256()
    for source in SOURCES.values():
        for path in sorted((HERE / source).rglob("*")):
            if path.is_file() and "__pycache__" not in path.parts and path.suffix != ".pyc":
                digest.update(path.relative_to(HERE).as_posix().encode())
                digest.update(path.read_bytes())
    folder = HERE / ".nox" / "_wheels" / digest.hexdigest()[:16]
    folder.parent.mkdir(parents=True, exist_ok=True)
    # `run.py test` runs two nox processes at once: the second waits for the first's build.
    with open(folder.with_name(f"{folder.name}.lock"), "w") as lock:
        if fcntl is not None:
            fcntl.flock(lock, fcntl.LOCK_EX)
        if not folder.is_dir():
            _build_wheels(session, folder)
    built = {}
    for name, source in SOURCES.items():
        dist = Path(source).name.replace("-", "_")
        [wheel] = folder.glob(f"{dist}-*.whl")
        built[name] = str(wheel)
    return built


def _build_wheels(session: nox.Session, folder: Path) -> None:
    # Built aside and renamed into place, so a half-built folder is never used.
    building = folder.with_name(f"{folder.name}.building-{os.getpid()}")
    shutil.rmtree(building, ignore_errors=True)
    # nox's own Python has pip whichever installer the session uses.
    session.log(f"building the wheels of {', '.join(SOURCES)} (once per state of their sources; about a minute)")
    wheel = [sys.executable, "-m", "pip", "wheel", "--progress-bar", "off", "--no-deps", "-w", str(building)]
    # run_install: an install step, so `--install-only` builds them too.
    session.run_install(*wheel, *(f"./{s}" for s in SOURCES.values()), external=True, silent=False)
    try:
        building.rename(folder)
    except OSError:  # another nox run finished the same build first
        shutil.rmtree(building, ignore_errors=True)


def _install(
    session: nox.Session,
    packages: list[str],
    *groups: str,
    extras: dict[str, str] | None = None,
    constraints: tuple[str, ...] = CONSTRAINTS,
    reuse: bool = False,
) -> None:
    """Install local wheels (with extras, e.g. core[train]) and dependency groups of the root.

    With `reuse` (sessions declared `reuse_venv=True`, the demos) nothing is installed when
    the environment already holds this exact install: same wheels (their folder is keyed by
    the sources' hash), constraints, groups and pyproject.toml, as a stamp in the venv
    records. A second `python3 run.py demo` then skips minutes of torch-stack install.
    """
    wheels = _wheels(session)
    extras = extras or {}
    targets = [wheels[p] + (f"[{extras[p]}]" if p in extras else "") for p in packages]
    names = [p + (f"[{extras[p]}]" if p in extras else "") for p in packages]
    stamp = Path(str(session.virtualenv.location)) / ".trainkit-install"
    key = hashlib.sha256()
    for part in [*targets, *groups, *constraints]:
        key.update(part.encode() + b"\0")
    for path in [HERE / "pyproject.toml", *(HERE / c for c in constraints if c != "-c")]:
        key.update(path.read_bytes())
    if reuse and stamp.is_file() and stamp.read_text() == key.hexdigest():
        session.log(f"reusing the installed {', '.join(names)}: sources, constraints and groups unchanged")
        return
    if reuse and stamp.is_file():
        # pip keeps an installed local wheel of the same version: the changed sources' wheels must replace it.
        dists = [Path(wheels[p]).name.split("-")[0].replace("_", "-") for p in packages]
        if session.venv_backend == "uv":
            uv = nox.virtualenv.find_uv()[1]
            python = f"{session.virtualenv.location}/bin/python"
            session.run_install(uv, "pip", "uninstall", "--python", python, *dists, external=True, silent=True)
        else:
            session.run_install("python", "-m", "pip", "uninstall", "-y", *dists, silent=True)
    needs_torch = any("train" in extras.get(p, "").split(",") for p in packages)
    session.log(f"installing {', '.join(names)}" + (f" and the groups {', '.join(groups)}" if groups else ""))
    requirements = [*constraints, *targets, *(nox.project.dependency_groups(ROOT, *groups) if groups else ())]
    if needs_torch:
        _install_beside_torch(session, requirements)
    else:
        session.install(*requirements, silent=True)
    if reuse:
        stamp.write_text(key.hexdigest())


def _install_beside_torch(session: nox.Session, requirements: list[str]) -> None:
    """The CPU torch through pip (the only installer that finds its file on disk), the rest through uv.

    pip installing the whole training stack took about two and a half minutes per
    session; uv takes seconds and keeps the installed torch, which meets the pin. A
    session on the uv backend (no pip in the venv) or a nox without uv installs with
    `session.install` as before.
    """
    has_uv, uv, _ = nox.virtualenv.find_uv()
    if session.venv_backend == "uv" or not has_uv:
        session.install(*requirements, silent=False)
        return
    venv = Path(str(session.virtualenv.location))
    if not any(venv.glob("lib/python*/site-packages/torch/__init__.py")):  # a second install into the venv
        session.install(*CONSTRAINTS, "torch", silent=False)
    python = f"{venv}/bin/python"
    # Compiled at install, as pip does: processes that cannot write `__pycache__` (Ray's
    # workers in the `ray` session) would otherwise compile every module they import.
    install = [uv, "pip", "install", "--compile-bytecode", "--python", python]
    session.run_install(*install, *requirements, external=True, silent=True)


def _pytest(session: nox.Session, *args: str, folder: str) -> None:
    """Run pytest on `folder`; a folder with no test module yet is a skip, not a failure."""
    if not any((HERE / folder).rglob("test_*.py")):
        session.skip(f"{folder} has no tests yet")
    # Exit 5 is "no test collected": a folder whose tests are all deselected by the markers.
    session.run("pytest", folder, *args, *session.posargs, success_codes=[0, 5])


#: pytest-xdist workers of the test sessions, one test file each at a time (`--dist
#: loadfile`: module fixtures, such as a trained run, stay shared). Three on CI's two
#: cores: the tests wait on subprocesses they start (jobs, servers, a CLI), and the tiny
#: model trains on one torch thread, so two workers left the CPU idle 14 % of the time.
#: Measured on this 2-core machine: the torch-free tests 89 -> 71 s, a sixth of the
#: ML tests 341 -> 257 s (CPU busy 86 -> 99 %). The whole `ml` suite measured no faster
#: with three than with two (1285-1416 s against 1290 s, 2026-12-06): it keeps both cores
#: busy either way.
WORKERS = "3"
#: Where each package's torch-free tests run alone (only its siblings installed) and
#: in full, `slow` ones included: the Python of the ML sessions.
PRIMARY_PYTHON = ML_PYTHON
#: The `tests` sessions: each package alone on the primary Python; on every other
#: Python the four packages together in one session, without the `slow` tests (a
#: session per package per Python spent a third of the default run, mostly on tests
#: whose subject is not the Python version: subprocesses, servers, property searches).
LIGHT_SESSIONS = [(PRIMARY_PYTHON, package) for package in LIGHT_INSTALLS] + [
    (python, "all") for python in PYTHONS if python != PRIMARY_PYTHON
]
#: The Pythons of the `tests` sessions in the default run: the oldest and the newest
#: supported, and the primary (every package alone). Those between (3.12) run on
#: request, `python3 run.py test -s "tests(3.12-all)"`: the default run must stay under
#: 40 minutes on CI's 2 cores, and what differs between Pythons shows at the ends of
#: the range (syntax and typing at the oldest, removals at the newest).
DEFAULT_LIGHT_PYTHONS = (PYTHONS[0], PRIMARY_PYTHON, PYTHONS[-1])
nox.options.sessions = [
    session
    for name in nox.options.sessions
    for session in (
        [f"tests({py}-{pkg})" for py, pkg in LIGHT_SESSIONS if py in DEFAULT_LIGHT_PYTHONS]
        if name == "tests"
        else [name]
    )
]


@nox.session(venv_backend=LIGHT_BACKEND)
@nox.parametrize(("python", "package"), LIGHT_SESSIONS, ids=[f"{py}-{pkg}" for py, pkg in LIGHT_SESSIONS])
def tests(session: nox.Session, package: str) -> None:
    """Tests that need no torch: one package's, or (`all`) every package's but the `slow` ones."""
    if package == "all":
        installs, folders, markers = (
            list(LIGHT_INSTALLS),
            [f"tests/{p}" for p in LIGHT_INSTALLS],
            f"{LIGHT_MARKERS} and not slow",
        )
    else:
        installs, folders, markers = LIGHT_INSTALLS[package], [f"tests/{package}"], LIGHT_MARKERS
    groups = ("test", "parallel", "api-test") if "api" in installs else ("test", "parallel")
    _install(session, installs, *groups)
    session.run(
        "pytest", *folders, "-m", markers, "-n", WORKERS, "--dist", "loadfile", *session.posargs, success_codes=[0, 5]
    )


@nox.session(python=ML_PYTHON)
def ml(session: nox.Session) -> None:
    """Tests that train, infer and evaluate for real (CPU, tiny model), e2e and the dashboard in Chromium.

    One environment with the training stack serves the ML tests, the browser tests and
    `runs plot`'s PNGs, since installing it is the slowest step of CI. A missing
    Chromium, Playwright or matplotlib is a failure here, not a skip. The GGUF export's
    tests (tests/gguf) run here too: llama.cpp comes as xllamacpp's prebuilt wheel
    (trainkit-core's `gguf` extra, 34 MB), nothing is compiled.
    """
    _install(
        session,
        ["core", "cli", "api", "modal"],
        *("test", "parallel", "ml-test", "api-test"),
        extras={"core": "train,gguf", "cli": "plot"},
    )
    session.env.update({"TRAINKIT_REQUIRE_BROWSER": "1", "TRAINKIT_REQUIRE_PLOT": "1"})
    markers = "(ml or browser) and not unsloth and not modal_live"
    # tests/ray belongs to a session of its own (a loopback-only namespace).
    _pytest(
        session, "-m", markers, "-p", "no:cacheprovider", "-n", WORKERS, "--dist", "loadfile",
        "--ignore=tests/ray", folder="tests",
    )  # fmt: skip
    session.run("pytest", "tests/cli/test_runs_plot.py", "-p", "no:cacheprovider", *session.posargs)


@nox.session(python=ML_PYTHON, venv_backend=LIGHT_BACKEND)
def modal_container(session: nox.Session) -> None:
    """The Modal app in containers as strict as Modal's (tests/modal/container_sim), on the images' Python.

    Each image becomes a venv of exactly its packages (the CPU torch on disk through pip,
    the rest through uv, in seconds instead of minutes; cached in .nox/_container_sim by
    content) holding the sources its mounts
    upload and no trainkit distribution. The session itself needs no torch: training,
    generation and evals run in those venvs. The images' Python is `images.toml`'s, which
    is this session's.
    """
    _install(session, ["core", "cli", "api", "modal"], "test")
    session.install("uv")
    session.run(
        "pytest", "tests/modal/test_container_sim.py", "-m", "container_sim", "-p", "no:cacheprovider", *session.posargs
    )


@nox.session(python=ML_PYTHON, venv_backend=LIGHT_BACKEND)
def modal_resolve(session: nox.Session) -> None:
    """Every Modal image resolved as a whole against PyPI, PyTorch's CUDA wheels as stand-ins (uv; ~1 min).

    Nothing is installed from those resolutions. Under CI=true a PyPI that cannot be
    reached fails the session instead of skipping it.
    """
    _install(session, ["core", "cli", "api", "modal"], "test")
    session.install("uv")
    session.run("pytest", "tests/modal/test_image_resolution.py", "-m", "pypi_resolve", "-p", "no:cacheprovider",
                *session.posargs)  # fmt: skip


@nox.session(python=ML_PYTHON, default=False)
def modal_locks(session: nox.Session) -> None:
    """Regenerate the Modal images' locks (trainkit_modal/locks/*.txt) from images.toml and the packages' requirements."""
    _install(session, ["core", "cli", "api", "modal"])
    session.install("uv")
    # The session installs wheels: the locks are written into the repository, not site-packages.
    locks = HERE / "packages" / "trainkit-modal" / "src" / "trainkit_modal" / "locks"
    session.run("python", "-m", "trainkit_modal.lock_images", "--locks-dir", str(locks), *session.posargs)


@nox.session(python=ML_PYTHON, venv_backend=LIGHT_BACKEND)
def plugin_discovery(session: nox.Session) -> None:
    """The fixture third-party providers, installed non-editable, are found and pass the suite.

    Two: `dirstore` (volumes and state only) and `sqlvol` (volumes as SQLite rows, jobs
    run detached, settings of its own). ``TRAINKIT_REQUIRE_DIRSTORE=1`` turns the tests'
    skip-when-not-installed into a failure.
    """
    _install(session, ["core", "cli", "dirstore", "sqlvol"], "test", "parallel")
    session.env["TRAINKIT_REQUIRE_DIRSTORE"] = "1"
    _pytest(session, "-m", "not ml", "-n", WORKERS, "--dist", "loadfile", folder="tests/contract")


@nox.session(python=ML_PYTHON, default=False)
def browser(session: nox.Session) -> None:
    """The dashboard in headless Chromium against a real server (a live tiny run), and `runs plot`'s PNGs.

    Playwright's Python package drives Debian's `chromium` (`.ci/run` installs it when
    missing); `playwright install`, which downloads a browser, is never run.
    TRAINKIT_REQUIRE_BROWSER=1 and TRAINKIT_REQUIRE_PLOT=1 turn a missing Chromium,
    Playwright or matplotlib into a failure instead of a skip. Screenshots land in
    `test-artifacts/dashboard/`.
    """
    _install(session, ["core", "cli", "api"], "test", extras={"core": "train", "cli": "plot"})
    session.install("playwright>=1.45,<2")
    session.env.update({"TRAINKIT_REQUIRE_BROWSER": "1", "TRAINKIT_REQUIRE_PLOT": "1"})
    session.run("pytest", "tests/api", "-m", "browser", "-p", "no:cacheprovider", *session.posargs)
    session.run("pytest", "tests/cli/test_runs_plot.py", "-p", "no:cacheprovider", *session.posargs)


@nox.session(python=ML_PYTHON)
def ray(session: nox.Session) -> None:
    """The `ray` provider against a real Ray cluster on loopback: conformance, a tiny run, retries, restarts.

    pytest runs as root in a network namespace of its own holding only `lo` (``unshare -n``,
    then ``ip link set lo up``), so the cluster the tests start (`tests/ray/ray_cluster.py`)
    can neither listen on nor reach any other address. Ray is pinned in constraints/ray.txt.
    ``TRAINKIT_REQUIRE_RAY=1`` turns the tests' skips (no ray, no such namespace) into failures.
    """
    _install(
        session,
        ["core", "cli", "api", "ray"],
        "test",
        extras={"core": "train", "ray": "web"},
        constraints=(*CONSTRAINTS, "-c", "constraints/ray.txt"),
    )
    # The cluster the tests start has a dashboard (Ray's state API, where the secrets test looks).
    _install_beside_torch(session, [*CONSTRAINTS, "-c", "constraints/ray.txt", "ray[default]"])
    session.env["TRAINKIT_REQUIRE_RAY"] = "1"
    pytest = [f"{session.virtualenv.location}/bin/pytest", "tests/ray", "-p", "no:cacheprovider"]
    pytest += session.posargs
    session.run("unshare", "-n", "sh", "-c", 'ip link set lo up && exec "$@"', "sh", *pytest, external=True)


@nox.session(python=ML_PYTHON, venv_backend=LIGHT_BACKEND)
def lint(session: nox.Session) -> None:
    """ruff, the import layers (import-linter's contracts in pyproject.toml), and dead code (vulture).

    import-linter and vulture read the source folders, so no package is installed here.
    """
    session.install(*nox.project.dependency_groups(ROOT, "lint"))
    session.run("ruff", "check", ".")
    session.run("ruff", "format", "--check", ".")
    sources = os.pathsep.join(str(HERE / SOURCES[name] / "src") for name in ("core", "cli", "api", "modal", "ray"))
    session.run("lint-imports", "--no-cache", env={"PYTHONPATH": sources})
    session.run("python", "scripts/dead_code.py")


@nox.session(python=ML_PYTHON, venv_backend=LIGHT_BACKEND)
def typecheck(session: nox.Session) -> None:
    _install(session, ["core", "cli", "api", "modal"], "typecheck")
    # A cache of its own: a .mypy_cache left by the development venv (editable installs)
    # made this session report modules as missing that the wheels do have.
    session.run("mypy", "--cache-dir", f"{session.virtualenv.location}/.mypy_cache")


#: The packages a release uploads, in dependency order.
RELEASED = ("core", "cli", "api", "modal", "ray")
#: Where `build` leaves the sdists and wheels: what an upload to the index would take.
DIST = HERE / "dist"


@nox.session(python=ML_PYTHON, venv_backend=LIGHT_BACKEND)
def build(session: nox.Session) -> None:
    """The release check: each package as sdist and wheel, `twine check`, and each installed alone.

    `python -m build` makes the sdist and then the wheel from that sdist (so the sdist
    is proven to build). tests/release reads the metadata an index would show, and
    installs each package alone into a fresh environment from `dist/` (standing in
    for the index; its other dependencies from the registry) and runs it.
    """
    session.install("build[uv]>=1.2", "twine>=6", "packaging", *nox.project.dependency_groups(ROOT, "test", "parallel"))
    shutil.rmtree(DIST, ignore_errors=True)
    for name in RELEASED:
        session.run("python", "-m", "build", "--installer", "uv", "--outdir", str(DIST), f"./{SOURCES[name]}")
    session.run("twine", "check", "--strict", *sorted(str(p) for p in DIST.iterdir()))
    # tests/conftest.py imports trainkit_core; the tests install their own environments.
    [core_wheel] = DIST.glob("trainkit_core-*.whl")
    session.install(str(core_wheel))
    session.run(
        "pytest", "tests/release", "-p", "no:cacheprovider", "-n", "2", *session.posargs,
        env={"TRAINKIT_DIST": str(DIST)},
    )  # fmt: skip


@nox.session(python=ML_PYTHON, venv_backend=LIGHT_BACKEND)
def docs(session: nox.Session) -> None:
    """The documentation site: generated pages current, `mkdocs build --strict`, the docs' tests.

    Torch-free (uv): the reference is read from the torch-free packages, and the tests
    that run the first tutorial train the tiny model, so they are marked `ml` and run in
    the `ml` session; here every example is parsed. A broken link or anchor, or a page
    outside the navigation, fails the build (mkdocs.yml's `validation`).
    """
    _install(session, ["core", "cli", "api"], "test", "docs")
    session.env["NO_MKDOCS_2_WARNING"] = "1"  # Material's banner about its successor, on every build
    session.run("python", "scripts/docs_reference.py", "--check")
    session.run("mkdocs", "build", "--strict", "--site-dir", str(Path(session.create_tmp()) / "site"))
    session.run("pytest", "tests/docs", "-m", "not ml", "-p", "no:cacheprovider", *session.posargs)


@nox.session(python=ML_PYTHON, venv_backend=LIGHT_BACKEND, default=False, reuse_venv=True)
def docs_serve(session: nox.Session) -> None:
    """`python3 run.py docs-serve`: the documentation site at http://127.0.0.1:8000/trainkit/.

    The one install path of the docs that works from a fresh clone: the `docs` dependency
    group (mkdocs with the Material theme and its plugins) needs a pip that reads groups,
    which a fresh venv's pip may not; nox installs it. The site is under `/trainkit/`
    because mkdocs.yml's `site_url` is the GitHub Pages address.
    """
    _install(session, ["core", "cli", "api"], "docs", reuse=True)
    session.env["NO_MKDOCS_2_WARNING"] = "1"
    session.run("mkdocs", "serve", "--dev-addr", "127.0.0.1:8000", *session.posargs)


#: The oldest supported Python, where `minimums` installs the lowest versions.
MIN_PYTHON = PYTHONS[0]
#: What `minimums` installs and checks at their lowest versions, per stack: the packages
#: with their extras (`gpu` is left out: Unsloth needs CUDA, see the `unsloth` session).
MINIMUM_STACKS = {
    "light": {"core": "", "cli": "plot", "api": "", "modal": ""},
    "train": {"core": "train", "cli": ""},
}


def _lower_bounds(stack: dict[str, str], python: str) -> dict[str, str]:
    """Each third-party requirement of `stack` -> the lowest version its declared range allows (its `>=`)."""
    from packaging.requirements import Requirement
    from packaging.utils import canonicalize_name

    bounds = {}
    for name, extra in stack.items():
        declared = nox.project.load_toml(f"{SOURCES[name]}/pyproject.toml")["project"]
        required = [(text, "") for text in declared["dependencies"]]
        required += [(text, extra) for text in declared.get("optional-dependencies", {}).get(extra, [])]
        for text, in_extra in required:
            req = Requirement(text)
            wanted = req.marker is None or req.marker.evaluate({"python_version": python, "extra": in_extra})
            if req.name.startswith("trainkit-") or not wanted:
                continue
            [low] = [spec.version for spec in req.specifier if spec.operator == ">="]
            bounds[canonicalize_name(req.name)] = low
    return bounds


def _check_lowest(session: nox.Session, bounds: dict[str, str]) -> None:
    """Fail unless every requirement is installed at its declared lower bound: the ranges say only what is tested."""
    from packaging.utils import canonicalize_name
    from packaging.version import Version

    code = "import json, importlib.metadata as m; print(json.dumps({d.metadata['Name']: d.version for d in m.distributions()}))"
    out = session.run("python", "-c", code, silent=True)
    installed = {canonicalize_name(k): v for k, v in json.loads(str(out).strip().splitlines()[-1]).items()}
    for name in sorted(bounds):
        session.log(f"{name}: declared >={bounds[name]}, installed {installed.get(name)}")
    off = [
        f"{n} {installed.get(n)} (declared >={b})"
        for n, b in sorted(bounds.items())
        # `.public`: the CPU torch is 2.13.0+cpu.
        if Version(Version(installed.get(n, "0")).public) != Version(b)
    ]
    if off:
        session.error(
            f"not at the declared lower bound (raise the bound to what resolves and passes): {', '.join(off)}"
        )


@nox.session(venv_backend="uv", default=False)
@nox.parametrize(("python", "stack"), [(MIN_PYTHON, "light"), (ML_PYTHON, "train")], ids=["light", "train"])
def minimums(session: nox.Session, stack: str) -> None:
    """The lowest versions every declared range allows (uv's `--resolution lowest-direct`), tested.

    light: the four packages and their extras but `train` and `gpu` on the oldest
    supported Python, running the torch-free tests. train: trainkit-core[train] with
    the lowest transformers, peft, trl, accelerate, datasets, tokenizers and
    safetensors beside the CPU torch (3.11, pip: uv would fetch a CUDA torch), running
    the tests that train, infer and evaluate the tiny model. Both fail unless each
    requirement is installed at exactly its declared lower bound. Test tools are not
    held low (the packages do not declare them), only kept from moving those that are.
    """
    chosen = MINIMUM_STACKS[stack]
    tmp = Path(session.create_tmp())
    lowest = _lowest_pins(session, chosen, tmp, ["torch==2.13.0"] if stack == "train" else [])
    wheels = _wheels(session)
    targets = [wheels[n] + (f"[{e}]" if e else "") for n, e in chosen.items()]
    if stack == "light":
        groups = nox.project.dependency_groups(ROOT, "test", "parallel", "api-test")
        # A test tool fitted to the lowest fastapi: its starlette's TestClient passes
        # `app=` to httpx.Client, which httpx 0.28 removed (trainkit-api never uses httpx).
        session.install("-c", lowest, *targets, *groups, "httpx<0.28")
        _check_lowest(session, _lower_bounds(chosen, str(session.python)))
        session.env["TRAINKIT_REQUIRE_PLOT"] = "1"
        folders = [f"tests/{n}" for n in LIGHT_INSTALLS] + ["tests/contract"]
        light = ("-m", LIGHT_MARKERS, "-n", WORKERS, "--dist", "loadfile", "-p", "no:cacheprovider")
        session.run("pytest", *folders, *light, *session.posargs)
        return
    # pip, not uv, installs: only pip takes the CPU torch wheel lying on disk.
    pip = [sys.executable, "-m", "pip", "--python", f"{session.virtualenv.location}/bin/python", "install", "-q"]
    tools = nox.project.dependency_groups(ROOT, "test")
    session.run(*pip, "-c", lowest, "torch==2.13.0", *targets, *tools, external=True)
    # trainkit-core[train]'s bounds only: the CLI (which the demo test drives) has its
    # own checked in `light`; here huggingface-hub, which transformers 5 needs, lifts click.
    _check_lowest(session, _lower_bounds({"core": "train"}, str(session.python)))
    markers = "ml and not browser and not unsloth and not modal_live"
    session.run(
        "pytest", "tests/core", "tests/e2e/test_demo.py", "-m", markers, "-p", "no:cacheprovider", *session.posargs
    )


def _lowest_pins(session: nox.Session, chosen: dict[str, str], tmp: Path, extra: list[str]) -> str:
    """A constraints file: uv's lowest-direct resolution of the chosen packages, for this session's Python.

    Resolved from the source folders, not the wheels: uv holds the requirements of a
    local project at their lowest, not those of a wheel file. For the train stack it
    reads PyPI's torch metadata (CUDA packages included), but a constraint installs
    nothing: pip then takes the CPU torch from disk.
    """
    (tmp / "minimums.in").write_text(
        "\n".join([*(f"{HERE / SOURCES[n]}{f'[{e}]' if e else ''}" for n, e in chosen.items()), *extra]) + "\n"
    )
    resolved = tmp / "lowest.txt"
    session.run(
        nox.virtualenv.find_uv()[1], "pip", "compile", "--resolution", "lowest-direct", "--no-header", "--no-annotate",
        "--python", f"{session.virtualenv.location}/bin/python", "-o", str(resolved), str(tmp / "minimums.in"),
        external=True,
    )  # fmt: skip
    pins = [line for line in resolved.read_text().splitlines() if line and not line.startswith((".", "/", "trainkit"))]
    resolved.write_text("\n".join(pins) + "\n")
    return str(resolved)


@nox.session(python=ML_PYTHON, default=False, reuse_venv=True)
def demo(session: nox.Session) -> None:
    """The README's main job: validate, sync, train tiny, eval base vs tuned, generate."""
    _install(session, ["core", "cli"], extras={"core": "train"}, reuse=True)
    session.run("trainkit", "demo", *session.posargs)


@nox.session(python=ML_PYTHON, default=False, reuse_venv=True)
def demo_images(session: nox.Session) -> None:
    """The image demo, as the images tutorial's shapes demo: draw `datasets/shapes`, train the
    Gemma 3 vision twin on it (the run's progress shown, the model kept), print the `infer` line.

    Extra arguments are `trainkit train` options (`-- --steps 200`). `scripts/measure_shapes.py`
    is the measuring twin: a scratch folder, one JSON line, nothing kept.
    """
    _install(session, ["core", "cli"], extras={"core": "train"}, reuse=True)
    session.run("python", "scripts/make_shapes_dataset.py")
    trainkit = str(Path(session.bin) / "trainkit")
    # `run.py demo-images -- --steps 200` hands nox the user's `--` too.
    options = session.posargs[1:] if session.posargs[:1] == ["--"] else session.posargs
    session.run(trainkit, "train", "--dataset", "shapes", "--model-size", "tiny-gemma3mm", *options)
    image = "datasets/shapes/images/eval-red-circle-000.png"
    session.log(
        f"try it: {trainkit} infer --model-size tiny-gemma3mm --prompt 'What is in the picture?' --image {image}"
    )


@nox.session(python=ML_PYTHON, default=False)
def unsloth(session: nox.Session) -> None:
    """The unsloth backend on CPU: the tiny model and the Gemma 3 twin on text, the Gemma 3 twin on pictures,
    DPO and GRPO on tiny (installs ~2.9 GB; not a default session). The Gemma 4 twins are refused here
    (their processor needs torchvision): `unsloth_gemma4` trains them.

    Unsloth pins older transformers/trl/datasets than constraints/ci.txt, so only torch is
    pinned here (the CPU wheel; anything else pulls a CUDA build). It also pulls PyPI's
    torchvision, a CUDA build that breaks `from transformers import Trainer` beside the CPU
    torch, so that is uninstalled again.
    """
    session.install("torch==2.13.0", f"{CORE}[train]", CLI, *nox.project.dependency_groups(ROOT, "test"))
    session.install("torch==2.13.0", "unsloth")
    session.run("python", "-m", "pip", "uninstall", "-y", "torchvision")
    session.run(
        "python",
        "-c",
        "import unsloth, transformers, trl; print('unsloth', unsloth.__version__, 'transformers', transformers.__version__, 'trl', trl.__version__)",
    )
    # Not `_pytest`: here no test collected is a failure, not a skip.
    tests = [
        "tests/e2e/test_train_unsloth.py",
        "tests/e2e/test_vision_unsloth.py",
        "tests/core/test_methods_unsloth.py",
    ]
    session.run("pytest", *tests, "-m", "unsloth", "-p", "no:cacheprovider", "-s", *session.posargs)


@nox.session(python=ML_PYTHON, default=False)
def unsloth_gemma4(session: nox.Session) -> None:
    """The unsloth backend on the Gemma 4 twins (31B, E2B/E4B, 26B-A4B layouts) on text (installs ~5.6 GB).

    Unsloth caps transformers at 5.17, whose Gemma 4 processor imports torchvision, and no
    torchvision imports beside the CPU torch 2.13.0 (the `unsloth` session therefore checks
    that those twins are refused). torch 2.14.1 with torchvision 0.29.1 is the pair on these
    machines' disks that imports together (a CUDA build, run on the CPU), so this session
    alone takes them instead of constraints/ci.txt's torch. trl is 1.14.0, as the Modal train
    image pins it: 1.15.0's SFT loss has no CPU path.
    """
    stack = ("torch==2.14.1", "torchvision==0.29.1")
    session.install(*stack, f"{CORE}[train]", CLI, *nox.project.dependency_groups(ROOT, "test"))
    session.install(*stack, "unsloth", "trl==1.14.0")
    session.run(
        "python",
        "-c",
        "from transformers import Gemma4Processor; import unsloth, transformers, torch; "
        "print('unsloth', unsloth.__version__, 'transformers', transformers.__version__, 'torch', torch.__version__)",
    )
    session.run(
        "pytest", "tests/e2e/test_train_unsloth.py", "-m", "unsloth", "-k", "gemma4", "-p", "no:cacheprovider",
        *session.posargs,
    )  # fmt: skip


@nox.session(python=ML_PYTHON, default=False)
def modal_live(session: nox.Session) -> None:
    """Against the real Modal (needs `modal token new` or MODAL_TOKEN_ID/SECRET): deploy a throw-away
    app, run ping and the GPU ping (the 4b one on its GPU, in the locked train image: CUDA device,
    torch, Unsloth), train `tiny` a few steps, retry a failed attempt, stop the app.
    Builds the images on first run."""
    _install(session, ["core", "cli", "api", "modal"], "test")
    session.run(
        "pytest", "tests/modal/test_live.py", "-m", "modal_live", "-v", *session.posargs,
        env={"TRAINKIT_MODAL_LIVE": "1", "PYTHONDONTWRITEBYTECODE": "1"},
    )  # fmt: skip

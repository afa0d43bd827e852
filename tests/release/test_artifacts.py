"""The sdists and wheels `nox -s build` builds, as a package index shows them and a user installs them.

The folder of built artifacts (`TRAINKIT_DIST`) stands in for the package index: each
package is installed alone into a fresh virtual environment from that folder, its
other dependencies from the registry, and its console entry point is run (or it is
imported). Without `TRAINKIT_DIST` these tests skip: only the `build` session builds.
"""

from __future__ import annotations

import email.parser
import json
import os
import subprocess
import sys
import tarfile
import venv
import zipfile
from email.message import Message
from pathlib import Path

import pytest
from packaging.requirements import Requirement

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover - 3.10
    import tomli as tomllib

REPO = Path(__file__).resolve().parents[2]
DIST = os.environ.get("TRAINKIT_DIST")
pytestmark = pytest.mark.skipif(not DIST, reason="TRAINKIT_DIST is not set: `nox -s build` builds the artifacts")

PACKAGES = ("trainkit-core", "trainkit-cli", "trainkit-api", "trainkit-modal", "trainkit-ray")
#: The trainkit distributions that installing one package brings (itself and its siblings).
BRINGS = {
    "trainkit-core": {"trainkit-core"},
    "trainkit-cli": {"trainkit-core", "trainkit-cli"},
    "trainkit-api": {"trainkit-core", "trainkit-api"},
    "trainkit-modal": {"trainkit-core", "trainkit-cli", "trainkit-modal"},
    "trainkit-ray": {"trainkit-core", "trainkit-cli", "trainkit-ray"},
}
#: Never pulled by a plain install: the training stack is the `train` extra.
HEAVY = {"torch", "transformers", "peft", "trl", "accelerate", "datasets"}


def project(package: str) -> dict:
    return tomllib.loads((REPO / "packages" / package / "pyproject.toml").read_text())["project"]


def source_version(package: str) -> str:
    init = REPO / "packages" / package / "src" / package.replace("-", "_") / "__init__.py"
    namespace: dict[str, str] = {}
    for line in init.read_text().splitlines():
        if line.startswith("__version__ = "):
            exec(line, namespace)
    return namespace["__version__"]


def dist_folder() -> Path:
    assert DIST
    return Path(DIST)


def artifact(package: str, kind: str) -> Path:
    stem = f"{package.replace('-', '_')}-{source_version(package)}"
    path = dist_folder() / (f"{stem}.tar.gz" if kind == "sdist" else f"{stem}-py3-none-any.whl")
    assert path.is_file(), (
        f"no {kind} {path.name} in {dist_folder()}: {sorted(p.name for p in dist_folder().iterdir())}"
    )
    return path


def wheel_metadata(package: str) -> tuple[Message, zipfile.ZipFile]:
    wheel = zipfile.ZipFile(artifact(package, "wheel"))
    [name] = [n for n in wheel.namelist() if n.endswith(".dist-info/METADATA")]
    return email.parser.Parser().parsestr(wheel.read(name).decode()), wheel


def test_exactly_one_sdist_and_one_wheel_per_package_and_nothing_else() -> None:
    expected = {artifact(p, kind).name for p in PACKAGES for kind in ("sdist", "wheel")}
    assert {p.name for p in dist_folder().iterdir()} == expected


@pytest.mark.parametrize("package", PACKAGES)
def test_the_metadata_an_index_shows_is_complete(package: str) -> None:
    meta, wheel = wheel_metadata(package)
    declared = project(package)
    assert meta["Name"] == package
    assert meta["Version"] == source_version(package)
    assert meta["Summary"] and meta["Summary"] == declared["description"]
    assert meta["Requires-Python"] == ">=3.10"
    assert meta["License-Expression"] == "Apache-2.0"
    assert meta.get_all("License-File") == ["LICENSE"]
    [license_text] = [n for n in wheel.namelist() if n.endswith(".dist-info/licenses/LICENSE")]
    assert "Apache License" in wheel.read(license_text).decode()
    # The long description is the package's README, rendered as Markdown.
    assert meta["Description-Content-Type"] == "text/markdown"
    readme = (REPO / "packages" / package / "README.md").read_text()
    assert meta.get_payload().strip() == readme.strip()
    assert len(readme.split()) > 40, f"{package}/README.md is too thin to describe the package on an index"
    urls = dict(u.split(", ", 1) for u in meta.get_all("Project-URL") or [])
    assert {"Repository", "Changelog", "Documentation"} <= set(urls), urls
    assert all(u.startswith("https://") for u in urls.values()), urls
    classifiers = set(meta.get_all("Classifier") or [])
    pythons = {c.rsplit(" ", 1)[-1] for c in classifiers if c.startswith("Programming Language :: Python :: 3.")}
    assert pythons == {"3.10", "3.11", "3.12", "3.13"}
    assert any(c.startswith("Development Status ::") for c in classifiers)
    # Every declared dependency made it into the metadata, unchanged.
    built = {str(Requirement(r)) for r in meta.get_all("Requires-Dist") or []}
    wanted = {str(Requirement(r)) for r in declared["dependencies"]}
    for extra, requirements in declared.get("optional-dependencies", {}).items():
        assert extra in (meta.get_all("Provides-Extra") or [])
        for r in requirements:
            req = Requirement(r)
            marker = f'extra == "{extra}"' if req.marker is None else f'({req.marker}) and extra == "{extra}"'
            wanted.add(str(Requirement(f"{str(req).split(';')[0]}; {marker}")))
    assert built == wanted


@pytest.mark.parametrize("package", PACKAGES)
def test_the_sdist_holds_what_a_rebuild_needs(package: str) -> None:
    sdist = artifact(package, "sdist")
    with tarfile.open(sdist) as tar:
        names = {n.split("/", 1)[1] for n in tar.getnames() if "/" in n}
        pkg_info = tar.extractfile(f"{sdist.name[: -len('.tar.gz')]}/PKG-INFO")
        assert pkg_info is not None
        meta = email.parser.Parser().parsestr(pkg_info.read().decode())
    module = package.replace("-", "_")
    assert {"pyproject.toml", "README.md", "LICENSE", "CHANGELOG.md", f"src/{module}/__init__.py"} <= names
    assert meta["Version"] == source_version(package)


def fresh_install(package: str, where: Path) -> tuple[Path, dict[str, str], set[str]]:
    """A new virtual environment with `package` installed from the artifacts folder.

    Returns its bin folder, an environment to run it with, and the distributions pip
    installed. Every trainkit distribution must come from the folder, never from the
    registry.
    """
    venv.EnvBuilder(with_pip=True).create(where / "venv")
    bin_dir = where / "venv" / "bin"
    env = {
        k: v
        for k, v in os.environ.items()
        if k not in ("PYTHONPATH", "VIRTUAL_ENV", "PYTHONHOME") and not k.startswith(("TRAINKIT_", "MODAL_"))
    }
    env["PATH"] = f"{bin_dir}{os.pathsep}{env.get('PATH', '')}"
    env["TRAINKIT_HOME"] = str(where / "home")
    env["MODAL_CONFIG_PATH"] = str(where / "modal.toml")  # no token: nothing may reach Modal
    (where / "modal.toml").write_text("")
    report = where / "report.json"
    pip = [bin_dir / "python", "-m", "pip", "install", "-q", "--find-links", dist_folder(), "--report", report]
    subprocess.run([*pip, package], env=env, check=True)
    installed = {}
    for item in json.loads(report.read_text())["install"]:
        installed[item["metadata"]["name"].lower()] = item["download_info"]["url"]
    from_folder = {name for name, url in installed.items() if url.startswith(dist_folder().resolve().as_uri())}
    trainkit = {name for name in installed if name.startswith("trainkit-")}
    assert trainkit == BRINGS[package], f"installing {package} brought {sorted(trainkit)}"
    assert trainkit <= from_folder, (
        f"not from the artifacts folder: { {n: installed[n] for n in trainkit - from_folder} }"
    )
    assert not HEAVY & set(installed), f"{package} alone pulled the training stack: {sorted(HEAVY & set(installed))}"
    return bin_dir, env, set(installed)


def run(env: dict[str, str], *command: str | Path) -> str:
    done = subprocess.run([str(c) for c in command], env=env, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, f"{command} exited {done.returncode}:\n{done.stdout}\n{done.stderr}"
    return done.stdout


def test_trainkit_modal_alone_gives_the_trainkit_command(tmp_path: Path) -> None:
    """The README's start: `pip install trainkit-modal`, then `trainkit`, with the modal provider listed."""
    bin_dir, env, installed = fresh_install("trainkit-modal", tmp_path)
    assert "modal" in installed
    help_text = run(env, bin_dir / "trainkit", "--help")
    for command in ("app", "train", "providers", "serve"):
        assert f"  {command} " in help_text or f"  {command}\n" in help_text, f"`trainkit --help` lacks {command}"
    providers = json.loads(run(env, bin_dir / "trainkit", "providers", "--json"))
    by_name = {p["name"]: p for p in providers}
    assert set(by_name) == {"local", "modal"}
    assert by_name["modal"]["package"] == "trainkit-modal"
    assert by_name["modal"]["version"] == source_version("trainkit-modal")
    table = run(env, bin_dir / "trainkit", "providers")
    assert "modal" in table and "trainkit-modal" in table
    assert run(env, bin_dir / "trainkit", "--version").strip() == f"trainkit, version {source_version('trainkit-cli')}"


def test_trainkit_ray_alone_gives_the_trainkit_command_with_the_ray_provider(tmp_path: Path) -> None:
    """`pip install trainkit-ray`, then `trainkit`: the `ray` provider listed, the store read without a cluster."""
    bin_dir, env, installed = fresh_install("trainkit-ray", tmp_path)
    assert {"ray", "grpcio"} <= installed, "ray with its `client` extra (Ray Client, a laptop's way in)"
    providers = json.loads(run(env, bin_dir / "trainkit", "providers", "--json"))
    by_name = {p["name"]: p for p in providers}
    assert set(by_name) == {"local", "ray"}
    assert by_name["ray"]["package"] == "trainkit-ray"
    assert by_name["ray"]["version"] == source_version("trainkit-ray")
    # No cluster at that address: listing runs reads the store on the storage path and never connects.
    nowhere = {**env, "TRAINKIT_RAY_ADDRESS": "127.0.0.1:1"}
    assert json.loads(run(nowhere, bin_dir / "trainkit", "--provider", "ray", "runs", "list", "--json")) == []
    assert (tmp_path / "home" / "ray" / "kv.sqlite3").is_file(), "the store is not on the default storage path"


def test_trainkit_cli_alone_runs_on_the_local_provider(tmp_path: Path) -> None:
    bin_dir, env, _ = fresh_install("trainkit-cli", tmp_path)
    assert run(env, bin_dir / "trainkit", "--version").strip() == f"trainkit, version {source_version('trainkit-cli')}"
    providers = json.loads(run(env, bin_dir / "trainkit", "providers", "--json"))
    assert [p["name"] for p in providers] == ["local"]


def test_trainkit_core_alone_imports_and_finds_its_local_provider(tmp_path: Path) -> None:
    bin_dir, env, _ = fresh_install("trainkit-core", tmp_path)
    code = "import trainkit_core as t; print(t.__version__, [p.name for p in t.list_providers()])"
    out = run(env, bin_dir / "python", "-c", code)
    assert out.strip() == f"{source_version('trainkit-core')} ['local']"


def test_trainkit_api_alone_builds_its_app(tmp_path: Path) -> None:
    bin_dir, env, installed = fresh_install("trainkit-api", tmp_path)
    assert {"fastapi", "uvicorn"} <= installed
    code = (
        "from trainkit_api.app import create_app; app = create_app(); "
        "print(app.version, sorted(p for p in app.openapi()['paths'] if p.startswith('/v1/runs')))"
    )
    out = run(env, bin_dir / "python", "-c", code)
    assert out.startswith(f"{source_version('trainkit-api')} [") and "/v1/runs" in out

"""Each package's version is written in one place, and its CHANGELOG has an entry for it.

The version is `__version__` in the package's `__init__.py`; hatch reads it from there
(`[tool.hatch.version]`), so the pyproject never repeats it and the built metadata,
`trainkit --version` and the API's `version` cannot disagree.
"""

from __future__ import annotations

import re
import sys
from importlib.metadata import PackageNotFoundError, version
from pathlib import Path

import pytest

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover - 3.10
    import tomli as tomllib

PACKAGES = ("trainkit-core", "trainkit-cli", "trainkit-api", "trainkit-modal", "trainkit-ray")
VERSION_LINE = re.compile(r'^__version__ = "([^"]+)"$', re.M)


def source_version(folder: Path) -> str:
    """The version written in the package, the way hatch's `path` source reads it."""
    config = tomllib.loads((folder / "pyproject.toml").read_text())
    path = folder / config["tool"]["hatch"]["version"]["path"]
    found = VERSION_LINE.findall(path.read_text())
    assert len(found) == 1, f"{path} must assign __version__ exactly once, found {found}"
    return found[0]


@pytest.mark.parametrize("package", PACKAGES)
def test_the_version_is_written_only_in_the_package(repo_root: Path, package: str) -> None:
    folder = repo_root / "packages" / package
    project = tomllib.loads((folder / "pyproject.toml").read_text())["project"]
    assert "version" not in project, f"{package}/pyproject.toml repeats the version; it belongs in __init__.py"
    assert "version" in project.get("dynamic", []), f"{package}/pyproject.toml must declare the version dynamic"
    config = tomllib.loads((folder / "pyproject.toml").read_text())
    assert config["tool"]["hatch"]["version"]["path"] == f"src/{package.replace('-', '_')}/__init__.py"
    assert re.fullmatch(r"\d+\.\d+\.\d+((a|b|rc)\d+)?", source_version(folder))


@pytest.mark.parametrize("package", PACKAGES)
def test_the_changelog_has_an_entry_for_the_current_version(repo_root: Path, package: str) -> None:
    folder = repo_root / "packages" / package
    current = source_version(folder)
    changelog = (folder / "CHANGELOG.md").read_text()
    headings = re.findall(r"^## (\S+)", changelog, re.M)
    assert current in headings, (
        f"{package}/CHANGELOG.md has no '## {current}' entry (it has {headings}); "
        "add one for the version in __init__.py"
    )


@pytest.mark.parametrize("package", PACKAGES)
def test_an_installed_package_reports_the_version_of_its_source(repo_root: Path, package: str) -> None:
    """Where the package is installed (the sessions install wheels built from these sources)."""
    try:
        installed = version(package)
    except PackageNotFoundError:
        pytest.skip(f"{package} is not installed here")
    assert installed == source_version(repo_root / "packages" / package)

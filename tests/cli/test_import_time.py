"""`trainkit --help` must stay fast: it imports no ML stack and no provider SDK."""

from __future__ import annotations

import subprocess
import sys

HEAVY = {"torch", "transformers", "peft", "trl", "accelerate", "datasets", "bitsandbytes", "unsloth", "modal"}


def imported_modules(*args: str, env: dict[str, str]) -> set[str]:
    done = subprocess.run(
        [sys.executable, "-X", "importtime", "-m", "trainkit_cli", *args],
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr[-2000:]
    modules = set()
    for line in done.stderr.splitlines():
        if line.startswith("import time:") and "|" in line:
            name = line.rsplit("|", 1)[1].strip()
            if name != "imported package":
                modules.add(name)
    assert "trainkit_cli.main" in modules, "importtime output was not parsed"
    return modules


def test_help_imports_no_heavy_module(cli_env: dict[str, str]) -> None:
    modules = imported_modules("--help", env=cli_env)
    heavy = sorted(m for m in modules if m.split(".")[0] in HEAVY)
    assert not heavy, f"trainkit --help imported {heavy}"


def test_listing_providers_imports_no_heavy_module(cli_env: dict[str, str]) -> None:
    # Every installed plugin is loaded here (the Modal one too, when installed).
    modules = imported_modules("providers", "--json", env=cli_env)
    heavy = sorted(m for m in modules if m.split(".")[0] in HEAVY)
    assert not heavy, f"trainkit providers imported {heavy}"

"""`trainkit --help` must stay fast: it imports no ML stack and no provider SDK."""

from __future__ import annotations

import importlib.util
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


#: Modules a command needs only once it runs: reading settings (pydantic-settings),
#: the provider facade and plugin loading. Help text needs none of them.
COMMAND_ONLY = {
    "pydantic_settings",
    "trainkit_core.settings",
    "trainkit_core.plugins.provider",
    "trainkit_core.plugins.manager",
}
#: Packages help text needs none of (pydantic alone is a third of `trainkit --help`'s time).
COMMAND_ONLY_PACKAGES = {"pydantic", "pydantic_core", "pydantic_settings"}


def test_help_imports_no_settings_or_providers(cli_env: dict[str, str]) -> None:
    for args in (["--help"], ["runs", "list", "--help"], ["train", "--help"]):
        modules = imported_modules(*args, env=cli_env)
        early = sorted(m for m in modules if m in COMMAND_ONLY or m.split(".")[0] in COMMAND_ONLY_PACKAGES)
        assert not early, f"trainkit {' '.join(args)} imported {early}"


def test_listing_providers_reads_no_settings(cli_env: dict[str, str]) -> None:
    # Listing what is installed loads the plugins, but needs no setting. The `ray` provider is
    # the exception where installed: its manifest reads the settings to find the file its last
    # deploy left on the cluster's storage, which says whether the cluster has GPUs.
    without_ray = {"TRAINKIT_DISABLE_PLUGINS": "ray"} if importlib.util.find_spec("trainkit_ray") else {}
    modules = imported_modules("providers", "--json", env={**cli_env, **without_ray})
    assert "trainkit_core.plugins.manager" in modules, "the plugins were not loaded"
    read = sorted(m for m in modules if m == "trainkit_core.settings" or m.split(".")[0] == "pydantic_settings")
    assert not read, f"trainkit providers imported {read}"


def test_import_trainkit_core_is_lazy() -> None:
    code = (
        "import sys, trainkit_core\n"
        "assert 'trainkit_core.settings' not in sys.modules, 'settings imported'\n"
        "assert 'pluggy' not in sys.modules, 'pluggy imported'\n"
        "assert {'TrainingRun', 'get_provider'} <= set(dir(trainkit_core)), 'lazy names missing from dir()'\n"
        "assert 'trainkit_core.runs.training_run' not in sys.modules, 'dir() imported the names'\n"
        "from trainkit_core import Settings, UsageError, get_provider\n"
        "assert Settings.__module__ == 'trainkit_core.settings'\n"
        "assert 'Settings' in dir(trainkit_core)\n"
        "try:\n"
        "    trainkit_core.nothing\n"
        "except AttributeError:\n"
        "    pass\n"
        "else:\n"
        "    raise SystemExit('no AttributeError')\n"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr[-2000:]

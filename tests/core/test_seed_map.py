"""docs/concepts/seed-map.md names every seed name a user would type or read, and trainkit's exists.

The seeds' names are listed here, transcribed from ``../shared/seeds/`` (seed 000's
configuration table, seed 002's `TrainingRun` attributes and methods); when the seeds
sit beside the repository, as they do in the project's checkouts, the lists are
checked against them too, so a name added to a seed cannot be missed.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from trainkit_core.settings import SEED_VARIABLES, settings_table

ROOT = Path(__file__).resolve().parents[2]
MAP = ROOT / "docs" / "concepts" / "seed-map.md"
SEEDS = ROOT.parent / "shared" / "seeds"

#: Seed 000's configuration table.
SEED_000_VARIABLES = [
    "SIDECAR_PROVIDER",
    "SIDECAR_APP_NAME",
    "SIDECAR_GPU",
    "SIDECAR_TRAIN_TIMEOUT_S",
    "SIDECAR_INFER_IDLE_TIMEOUT_S",
    "SIDECAR_HF_SECRET",
    "SIDECAR_VOL_DATA",
    "SIDECAR_VOL_MODELS",
    "SIDECAR_VOL_EVAL",
    "SIDECAR_VOL_HF_CACHE",
]
#: Seed 002's `TrainingRun`: attributes, then methods and properties.
SEED_002_NAMES = [
    "training_run_id", "modal_app_id", "modal_app_url", "framework", "config", "dataset_id", "deployment_id",
    "status", "framework_status", "created_at", "started_at", "ended_at", "completed_at", "updated_at",
    "duration_seconds", "step_times", "substep_times", "error_message", "metadata", "function_call_id",
    "app_name", "source_model", "metrics",
    "add_dashboard_component", "apply_framework_status", "checkpoint_dir", "checkpoints", "close", "done",
    "error", "from_id", "from_stored_data", "function_call", "group_id", "latest_checkpoint", "model",
    "record_latest_rollout", "result", "save", "wait", "wait_all",
]  # fmt: skip


def _sections() -> dict[str, list[tuple[str, str]]]:
    """(first cell, second cell) of every table row, by the section (``## ...``) it is in."""
    sections: dict[str, list[tuple[str, str]]] = {}
    current = ""
    for line in MAP.read_text().splitlines():
        if line.startswith("## "):
            current = line[3:].strip()
            sections[current] = []
        elif line.startswith("|") and not line.startswith("|---") and current:
            cells = [c.strip() for c in line.strip("|").split("|")]
            if cells[0] not in ("Seed 000", "Seed 002", "Seed"):
                sections[current].append((cells[0], cells[1]))
    return sections


def _code(cell: str) -> list[str]:
    return re.findall(r"`([^`]+)`", cell)


def test_the_transcribed_names_are_the_seeds() -> None:
    if not SEEDS.is_dir():
        pytest.skip(f"the seeds are not beside this checkout ({SEEDS})")
    seed_000 = next(SEEDS.glob("000_*.txt")).read_text()
    assert re.findall(r"^`(SIDECAR_[A-Z_]+)`", seed_000, flags=re.M) == SEED_000_VARIABLES
    seed_002 = next(SEEDS.glob("002_*.txt")).read_text()
    names = set(re.findall(r"^([a-z][a-z0-9_]+)", seed_002, flags=re.M)) - {"from"}  # `from modal_dojo import`
    assert names == set(SEED_002_NAMES)


def test_every_seed_variable_is_mapped_to_a_setting_that_exists() -> None:
    rows = dict(_sections()["Environment variables"])
    mapped = {_code(seed)[0]: _code(new) for seed, new in rows.items()}
    assert set(SEED_000_VARIABLES) <= set(mapped), set(SEED_000_VARIABLES) - set(mapped)
    variables = {row[0] for row in settings_table()}
    for seed, new in mapped.items():
        if new:
            assert new[0] in variables, f"{seed} maps to {new[0]}, which is not a trainkit setting"
            assert SEED_VARIABLES.get(seed) == new[0], f"the map and the settings' report disagree on {seed}"
        else:
            assert seed not in SEED_VARIABLES, f"{seed} has a trainkit setting, but the map gives none"
    assert set(SEED_VARIABLES) <= set(mapped)


def test_every_attribute_and_method_of_the_seeds_training_run_is_mapped_to_one_that_exists() -> None:
    import trainkit_core
    from trainkit_core.runs.training_run import TrainingRun

    rows = {_code(seed)[0]: _code(new)[0] for seed, new in _sections()["`TrainingRun` (seed 002)"]}
    missing = [name for name in SEED_002_NAMES if name not in rows]
    assert not missing, f"seed 002 names not in the map: {missing}"
    for seed, new in rows.items():
        if seed == "wait_all":
            assert callable(trainkit_core.wait_all)
            continue
        assert new in TrainingRun.model_fields or hasattr(TrainingRun, new), f"{seed} -> {new}: no such attribute"
        assert seed in TrainingRun.model_fields or hasattr(TrainingRun, seed), f"the seed's {seed} is not kept"


def test_every_command_and_flag_it_names_exists() -> None:
    import click

    from trainkit_cli.main import build_cli

    cli = build_cli()

    for seed, new in _sections()["Commands and flags"]:
        words = _code(new)[0].split()
        if words[:2] == ["python3", "run.py"]:
            assert (ROOT / "run.py").is_file()
            continue
        assert words[0] == "trainkit", new
        command: click.Command = cli
        flags = [w for w in words[1:] if w.startswith("--")]
        for word in [w for w in words[1:] if not w.startswith("--")]:
            assert isinstance(command, click.Group), f"{seed}: {' '.join(words)}"
            found = command.get_command(click.Context(command), word)
            assert found is not None, f"{seed}: no command `{word}` in `{' '.join(words)}`"
            command = found
        options = {opt for param in command.params for opt in getattr(param, "opts", [])}
        for flag in flags:
            assert flag in options, f"{seed}: `{' '.join(words)}` has no {flag}"
        for flag in (w for w in _code(seed)[0].split() if w.startswith("--") and w != "--action"):
            assert flag in options or flag == "--dataset", f"{seed}: trainkit has no {flag} on {' '.join(words)}"


def test_the_app_and_volume_names_are_trainkits_defaults() -> None:
    defaults = {row[1] for row in settings_table()}
    for seed, new in _sections()["App and volume names"]:
        assert _code(new)[0] in defaults, f"{seed} -> {new}: not a default of trainkit's settings"


def test_the_paths_it_names_exist() -> None:
    for seed, new in _sections()["Paths"]:
        path = _code(new)[0]
        if "<" in path:  # a pattern: its folder exists with an example in it
            folder = path.split("<", 1)[0].rstrip("/")
            if folder and not folder.startswith("trained"):
                assert (ROOT / folder).is_dir(), f"{seed} -> {path}"
            continue
        assert (ROOT / path).exists(), f"{seed} -> {path}: no such path in the repository"


def test_the_modal_entry_point_it_names_exists() -> None:
    text = MAP.read_text()
    assert "modal run -m trainkit_modal.entrypoint" in text
    assert (ROOT / "packages/trainkit-modal/src/trainkit_modal/entrypoint.py").is_file()

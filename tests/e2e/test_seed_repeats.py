"""One `--seed` gives one model: the adapters' initial weights are seeded too.

They were drawn before the trainer seeded anything, so two runs of one seed started
from different adapters. A fresh home hid it for text (building `tiny` in the job seeds
torch); a second run on the same home, or any image run, differed. Here the Gemma 3 twin
trains on pictures three times in one home: twice with one seed, once with another.
"""

from __future__ import annotations

import importlib.util
import re
from pathlib import Path
from typing import Any

import pytest
from cli_env import REPO, Env

pytestmark = [pytest.mark.ml, pytest.mark.e2e, pytest.mark.timeout(1800)]


def _write_shapes(folder: Path) -> None:
    spec = importlib.util.spec_from_file_location("make_shapes_dataset", REPO / "scripts" / "make_shapes_dataset.py")
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    module.write(folder, train_per_class=2, eval_per_class=1)


def _train(env: Env, seed: int) -> dict[str, Any]:
    from safetensors.torch import load_file

    done = env.cli("train", "--dataset", "shapes", "--model-size", "tiny-gemma3mm", "--steps", "3", "--seed", str(seed))
    found = re.search(r"model: trained/(run-\S+)", done.stdout)
    assert found, done.stdout
    [adapter] = (env.home / "volumes").glob(f"*models/trained/{found.group(1)}/adapter_model.safetensors")
    return load_file(adapter)


def test_two_runs_of_one_seed_train_the_same_adapter(tmp_path: Path) -> None:
    datasets = tmp_path / "datasets"
    _write_shapes(datasets / "shapes")
    env = Env(tmp_path / "home", datasets)
    first, again, other = _train(env, 7), _train(env, 7), _train(env, 8)
    assert first.keys() == again.keys() == other.keys()
    different = [name for name in first if not (first[name] == again[name]).all()]
    assert different == [], f"seed 7 twice, different weights: {different[:5]}"
    assert any(not (first[name] == other[name]).all() for name in first)  # the seed does matter

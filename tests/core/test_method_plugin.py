"""A training method from another package: one module with a `Method`, one entry point.

The plugin here is written as a user would (a module and a dist-info on the path, in the
``trainkit.methods`` group): SFT with a different recipe for tiny. The CLI's plan and a real
run on the local provider find it; the run's job, a process of its own, finds it too.
A broken plugin is named in the error.
"""

from __future__ import annotations

import json
import os
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

pytestmark = pytest.mark.ml

PLUGIN = '''
from trainkit_core.training.methods import MethodDefaults
from trainkit_core.training.methods.sft import Sft


class QuickSft(Sft):
    """SFT with a short recipe of its own on tiny."""

    name = "quick-sft"
    defaults = {"tiny": MethodDefaults(steps=3, learning_rate=2e-3)}


METHOD = QuickSft()
BROKEN = object()
'''


@pytest.fixture
def plugin_on_path(tmp_path: Path) -> Iterator[Path]:
    site = tmp_path / "site"
    site.mkdir()
    (site / "quick_methods.py").write_text(PLUGIN)
    info = site / "quick_methods-1.0.dist-info"
    info.mkdir()
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: quick-methods\nVersion: 1.0\n")
    (info / "entry_points.txt").write_text(
        "[trainkit.methods]\nquick-sft = quick_methods:METHOD\nbroken = quick_methods:BROKEN\n"
    )
    old_path, old_env = list(sys.path), os.environ.get("PYTHONPATH")
    sys.path.insert(0, str(site))
    os.environ["PYTHONPATH"] = os.pathsep.join(p for p in (str(site), old_env) if p)  # the job's process too
    from trainkit_core.training import methods

    before = dict(methods.METHODS)
    methods._plugins_loaded = False
    yield site
    sys.path[:] = old_path
    if old_env is None:
        os.environ.pop("PYTHONPATH", None)
    else:
        os.environ["PYTHONPATH"] = old_env
    methods.METHODS.clear()
    methods.METHODS.update(before)
    methods._plugins_loaded = False


def _broken_removed(site: Path) -> None:
    (site / "quick_methods-1.0.dist-info" / "entry_points.txt").write_text(
        "[trainkit.methods]\nquick-sft = quick_methods:METHOD\n"
    )


def test_a_broken_method_plugin_is_named(plugin_on_path: Path) -> None:
    from trainkit_core.errors import UsageError
    from trainkit_core.training.config import TrainConfig

    with pytest.raises(UsageError, match=r"method plugin 'broken' \(quick_methods:BROKEN\) is not a Method"):
        TrainConfig.parse({"dataset": "demo", "method": "quick-sft"})


def test_a_method_plugin_trains_a_run_with_its_own_defaults(plugin_on_path: Path, trainkit_home: Path) -> None:
    from trainkit_core import get_provider
    from trainkit_core.training.methods import METHODS
    from trainkit_core.training.submit import start_run

    _broken_removed(plugin_on_path)
    provider = get_provider("local")
    run: Any = start_run(provider, {"dataset": "demo", "method": "quick-sft"}).wait(timeout=600)
    assert run.status == "succeeded", run.error_message
    assert run.method == "quick-sft" and run.step == 3 and run.config["learning_rate"] == 2e-3
    assert "quick-sft" in METHODS  # and sft, dpo and grpo beside it
    assert {"sft", "dpo", "grpo"} <= set(METHODS)
    card = json.loads((provider.volume("models").root / "trained" / run.id / "trained_model.json").read_text())
    assert card["config"]["method"] == "quick-sft"

"""A `tiny` base built with another copying lesson (seed, length), to compare lessons.

The tiny base is taught to copy when it is built (`trainkit_core.models.copying_lesson`,
seed 0, 1,500 steps; build 4). This script builds the same base with another seed or
length of the lesson and writes it where a trainkit home's hf-cache volume keeps the
tiny base, so every `trainkit train --model-size tiny` of that home (or of the suite's,
as below) fine-tunes it instead:

    .venv/bin/python bench/copying_base.py HOME [--seed N] [--steps N]
    .venv/bin/python bench/copying_base.py DIR/home --seed 1 && .venv/bin/python bench/tool_demo.py --keep DIR

Measured (``docs/developer/research-logs.md``, "The tiny base taught to copy"). About
a minute and a half on one CPU thread.
"""

from __future__ import annotations

import argparse
import json
import shutil
import sys
from pathlib import Path

from trainkit_core.models.copying_lesson import SEED, STEPS


def empty_base_folder(home: Path) -> Path:
    """Where `home`'s jobs find the tiny base (HF_HOME is the hf-cache volume), emptied and created."""
    from trainkit_core.local.plugin import job_context
    from trainkit_core.models.tiny_model import TINY_BASE_PATH
    from trainkit_core.settings import ProviderSettings, Settings

    settings = Settings(provider=ProviderSettings(home=home))
    target = job_context(settings, "tiny-base").path("hf-cache") / TINY_BASE_PATH
    if target.exists():
        shutil.rmtree(target)
    target.mkdir(parents=True)
    return target


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("home", type=Path, help="The trainkit home whose hf-cache volume gets the base.")
    parser.add_argument("--seed", type=int, default=SEED, help="Seed of the copying lesson's sequences.")
    parser.add_argument("--steps", type=int, default=STEPS, help="Steps of the lesson (the rate decays over them).")
    opts = parser.parse_args()

    from trainkit_core.models.tiny_model import build_base

    target = empty_base_folder(opts.home)
    build_base(target, opts.seed, opts.steps)
    lesson = json.loads((target / "trainkit_tiny.json").read_text())["copying_lesson"]
    print(f"{target}: {lesson}", file=sys.stderr)


if __name__ == "__main__":
    main()

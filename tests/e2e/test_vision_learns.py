"""The shapes demo learns: `trainkit train` with the twin's default recipe names unseen pictures.

The dataset is the script's default (200 drawn pictures per shape and colour, 3 unseen
per class to score), trained through the CLI on the `local` provider with no option
but the dataset and the twin. A model that reads only the colour (what the twin's
first recipe reached) tops out at 1/3 exact match: the threshold needs shapes read
from the picture too. Measured on the 2-core machine (2026-12-04, twin build 4, 1000
steps of 16, the CPU loss): 25 of the 27 (0.93) with the default seed in 118 s of
training; on 200 unseen pictures, seeds 42 / 5 / 1 / 7 named 0.93 / 0.885 / 0.875 /
0.955. Build 5 (2026-12-05: a general tokenizer corpus instead of one holding this
demo's sentence): 24 of the 27 (0.89) with the default seed in 90 s. Runs differ with the seed and the CPU's float order
(docs/tutorials/images.md; `scripts/measure_shapes.py`).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = [pytest.mark.ml, pytest.mark.e2e, pytest.mark.timeout(900)]

REPO = Path(__file__).resolve().parents[2]
#: The lowest seed's rate (0.875 of 200 pictures, about 23 of these 27), less two pictures
#: for the spread between CPUs, whose float order changes a run as a seed does.
EXACT_MATCH_AT_LEAST = 21 / 27
COLOUR_ONLY_CEILING = 1 / 3


def test_the_default_twin_recipe_names_unseen_shapes(tmp_path: Path) -> None:
    done = subprocess.run(
        [sys.executable, "scripts/measure_shapes.py", "--model-size", "tiny-gemma3mm"],
        env={**os.environ, "TMPDIR": str(tmp_path)},
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=800,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    figures = json.loads(done.stdout.strip().splitlines()[-1])
    print("shapes demo:", json.dumps(figures))  # the figures, for the session's output
    assert figures["eval_examples"] == 27 and figures["base_eval_exact_match"] == 0.0
    assert figures["eval_exact_match"] > COLOUR_ONLY_CEILING
    assert figures["eval_exact_match"] >= EXACT_MATCH_AT_LEAST

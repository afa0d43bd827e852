"""The tutorials beyond the first run as written: every `runs` block, in order, in one shell.

`test_docs.py::test_first_tutorial_runs` does this for the first tutorial; the same
mechanism (`tutorial_script`) runs the others here, from an empty folder, on the data
trainkit ships (`demo`, `demo-prefs`, `demo-prompts`). A renamed command or flag in a
block fails the script, and so the test.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from test_docs import DOCS, run_tutorial


@pytest.mark.ml
@pytest.mark.e2e
def test_preference_and_reward_tutorial_runs(tmp_path: Path, trainkit_home: Path) -> None:
    """SFT on `demo` (200 steps, as the first tutorial), DPO on `demo-prefs`, GRPO on `demo-prompts`, as the page says."""
    output = run_tutorial(DOCS / "tutorials" / "preference-and-reward.md", tmp_path)
    assert output.count("0 error(s), 0 warning(s)") == 2, "the shipped datasets did not validate clean"
    runs = re.findall(r"run (run-\S+): succeeded at step (\d+)/\2", output)
    assert len({run for run, _ in runs}) == 3, output[-4000:]
    # DPO learnt the preference: the held-out pairs' accuracy, against the model it started from.
    accuracy = float(re.search(r"\beval_preference_accuracy: ([\d.]+)", output).group(1))
    base = float(re.search(r"base_eval_preference_accuracy: ([\d.]+)", output).group(1))
    assert accuracy >= 0.8 and base <= 0.3, (accuracy, base)
    assert len(re.findall(r"trained/run-\S+: \d+ tokens", output)) == 2, "infer did not answer twice (SFT, DPO)"
    # GRPO ran its graders and recorded its latest group.
    assert "exact_match=" in output and "reward_mean" in output, output[-4000:]


def test_tutorial_runner_fails_on_a_broken_command(tmp_path: Path, trainkit_home: Path) -> None:
    """The runner is not lenient: a block with an unknown flag fails the run (what a renamed option would do)."""
    page = tmp_path / "tutorials" / "broken.md"
    page.parent.mkdir()
    page.write_text("<!-- example: runs -->\n```bash\ntrainkit validate demo-prefs --local --nosuchflag\n```\n")
    with pytest.raises(AssertionError, match="nosuchflag"):
        run_tutorial(page, tmp_path)

"""The tutorials beyond the first run as written: every `runs` block, in order, in one shell.

`test_docs.py::test_first_tutorial_runs` does this for the first tutorial; the same
mechanism (`tutorial_script`) runs the others here, from an empty folder, on the data
trainkit ships (`demo`, `demo-prefs`, `demo-prompts`) or that the page has the user
make (the shapes pictures). The Modal tutorial's `fake-modal` blocks run against the
fake Modal SDK. A renamed command or flag in a block fails the script, and so the test.
The images tutorial, the longest, has a file of its own (`test_images_tutorial.py`), so
that the two test workers share the load.
"""

from __future__ import annotations

import os
import re
import shutil
from pathlib import Path

import pytest
from test_docs import DOCS, ROOT, run_tutorial


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


@pytest.mark.ml
@pytest.mark.e2e
def test_modal_tutorial_runs_on_the_fake_sdk(
    tmp_path: Path, trainkit_home: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Deploy, ping, sync, plan, train `tiny`, infer, deploy with the web API, stop: through the fake Modal.

    The `trainkit` commands are the real ones, each a process of its own; only `import
    modal` gives the fake of `tests/modal/fake_modal.py`, whose functions run in worker
    processes as Modal's containers would. Cut off from Modal as the modal tests are.
    """
    pytest.importorskip("trainkit_modal")
    shutil.copytree(ROOT / "datasets" / "demo", tmp_path / "datasets" / "demo")
    empty_config = tmp_path / "modal.toml"
    empty_config.write_text("")
    for name in ("MODAL_TOKEN_ID", "MODAL_TOKEN_SECRET", "MODAL_PROFILE", "MODAL_ENVIRONMENT", "TRAINKIT_API_TOKEN"):
        monkeypatch.delenv(name, raising=False)
    env = {
        "TRAINKIT_PROVIDER": "modal",  # what section 1 exports
        "FAKE_MODAL_ROOT": str(tmp_path / "fake-modal"),
        "PYTHONPATH": os.pathsep.join([str(ROOT / "tests" / "modal" / "fake_sdk"), os.environ.get("PYTHONPATH", "")]),
        "MODAL_CONFIG_PATH": str(empty_config),
        "MODAL_SERVER_URL": "http://127.0.0.1:9",  # refused at once, should anything reach for Modal
    }
    output = run_tutorial(DOCS / "tutorials" / "modal.md", tmp_path, markers=("fake-modal",), env=env)
    before_token, after_token = output.split("modal app trainkit: deployed", 2)[1:]
    assert "web API not deployed: set TRAINKIT_API_TOKEN" in before_token  # section 2 deploys without one
    assert "gpu       none" in output and "volume models" in output, "ping did not report"
    assert re.search(r"run (run-\S+): succeeded at step 60/60", output), output[-4000:]
    assert re.search(r"trained/run-\S+: \d+ tokens", output), "infer did not answer on the fake Modal"
    assert "web API   https://" in after_token and "modal app trainkit: stopped" in output


def test_tool_calling_tutorial_data_validates_as_the_page_says(tmp_path: Path, trainkit_home: Path) -> None:
    """The page's quick blocks (its training is `long-run`: minutes on a CPU, figures in the developer records)."""
    output = run_tutorial(DOCS / "tutorials" / "tool-calling.md", tmp_path)
    assert "400 train" in output and "50 eval" in output and "0 error(s), 0 warning(s)" in output, output[-2000:]


def test_audio_tutorial_data_validates_as_the_page_says(tmp_path: Path, trainkit_home: Path) -> None:
    """The page's quick blocks: make the tones and validate them (its training is `long-run`; the same path,
    on a smaller draw, trains in tests/e2e/test_audio_train.py)."""
    (tmp_path / "scripts").mkdir()
    shutil.copy(ROOT / "scripts" / "make_tones_dataset.py", tmp_path / "scripts")
    output = run_tutorial(DOCS / "tutorials" / "audio.md", tmp_path)
    assert "360 train / 27 eval examples, 387 audio parts" in output, output[-2000:]
    assert (
        "0 error(s), 0 warning(s)" in output
        and (tmp_path / "datasets" / "tones" / "audio" / "unseen-high-2.wav").is_file()
    )

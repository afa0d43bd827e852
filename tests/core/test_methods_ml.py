"""DPO and GRPO learn on the tiny model after a short SFT run, with default options.

One short SFT run (the tiny preset's defaults) on the demo's opposites, whose answers
end with a full stop one time in ten (`methods_demo`), is shared by the module. Then, each started with ``--from
trained/<sft id>`` through `start_run` on the local provider, with the method's
default options:

- DPO on pairs preferring the answer with a full stop: on the demo's eval prompts
  (never trained on) the greedy answers end with one in <= 20 % of cases before and
  >= 90 % after; its progress events carry DPO's rewards, margin and accuracy, and its
  evals the preference accuracy on held-out pairs.
- GRPO on prompts scored by the built-in `exact_match` grader (reference: the answer
  with its full stop): the mean reward on the eval prompts rises by >= 0.4; the latest group is
  recorded on the run and shown by `runs show`.
- GRPO with a user grader from an installed plugin (and the KL term on: its reference is
  the --from model, not saved with the adapter), and graders that raise, answer NaN or
  hang: each such run fails naming the grader and the example.
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path
from typing import Any

import methods_demo as demo
import pytest

pytestmark = [pytest.mark.ml, pytest.mark.timeout(1200)]

#: GRPO runs that prove a code path (graders, failures, tools), not learning: two steps of
#: 2 prompts x 4 completions of at most 16 tokens, an eighth of a default step's 64 x 64.
CODE_PATH = {"steps": 2, "batch_size": 8, "num_generations": 4, "max_completion_length": 16}

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "cli"))


@pytest.fixture(scope="module")
def local(tmp_path_factory: pytest.TempPathFactory) -> Any:
    """The local provider on its own home, with the demonstration datasets and a grader plugin installed."""
    from trainkit_core import get_provider
    from trainkit_core.settings import DatasetSettings, ProviderSettings, Settings

    root = tmp_path_factory.mktemp("methods")
    demo.write_datasets(root / "datasets")
    site = root / "site"
    site.mkdir()
    (site / "style_graders.py").write_text(
        "import time\n"
        "def full_stop(completion, example):\n"
        "    return 1.0 if completion.strip().endswith('.') else 0.0\n"
        "def boom(completion, example):\n"
        "    raise RuntimeError('the grader broke')\n"
        "def not_a_number(completion, example):\n"
        "    return float('nan')\n"
        "def hangs(completion, example):\n"
        "    time.sleep(120)\n"
        "    return 1.0\n"
    )
    info = site / "style_graders-1.0.dist-info"
    info.mkdir()
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: style-graders\nVersion: 1.0\n")
    (info / "entry_points.txt").write_text(
        "[trainkit.rewards]\nfull_stop = style_graders:full_stop\nboom = style_graders:boom\n"
        "not_a_number = style_graders:not_a_number\nhangs = style_graders:hangs\n"
    )
    # Installed for this process and the local provider's workers (the job loads graders by name).
    sys.path.insert(0, str(site))
    old = os.environ.get("PYTHONPATH")
    os.environ["PYTHONPATH"] = os.pathsep.join(p for p in (str(site), old) if p)
    for name in ("HF_HUB_OFFLINE", "TRANSFORMERS_OFFLINE", "HF_DATASETS_OFFLINE"):
        os.environ[name] = "1"
    settings = Settings(
        provider=ProviderSettings(home=root / "home"), datasets=DatasetSettings(datasets_dir=root / "datasets")
    )
    yield get_provider("local", settings)
    sys.path.remove(str(site))
    if old is None:
        os.environ.pop("PYTHONPATH", None)
    else:
        os.environ["PYTHONPATH"] = old


@pytest.fixture(scope="module")
def sft(local: Any) -> Any:
    """A short SFT run (the tiny preset's defaults): it learns the opposites, and its greedy answers lack the full stop."""
    from trainkit_core.training.submit import start_run

    run = start_run(local, {"dataset": "style-sft"}).wait(timeout=900)
    assert run.status == "succeeded", run.error_message
    answers = demo.answers(local, f"trained/{run.id}", demo.EVAL_PROMPTS)
    return run, answers


def _progress(run: Any) -> list[dict[str, Any]]:
    return [e for e in run.events.read() if e["type"] == "progress"]


def test_dpo_after_sft_follows_the_preferred_style_on_unseen_prompts(local: Any, sft: Any) -> None:
    from cli_helpers import run_main

    from trainkit_core.training.submit import start_run

    base, before = sft
    assert demo.full_stop_rate(before) <= 0.2, before
    run = start_run(local, {"dataset": "style-pref", "method": "dpo", "from_model": f"trained/{base.id}"})
    run = run.wait(timeout=900)
    assert run.status == "succeeded", run.error_message
    after = demo.answers(local, f"trained/{run.id}", demo.EVAL_PROMPTS)
    assert demo.full_stop_rate(after) >= 0.9, after

    assert run.method == "dpo" and run.config["from_model"] == f"trained/{base.id}"
    assert run.config["model_size"] == "tiny" and run.config["dpo_beta"] == 0.1  # the --from model's base; defaults
    last = _progress(run)[-1]
    for field in ("rewards_chosen", "rewards_rejected", "reward_margin", "reward_accuracy"):
        assert isinstance(last[field], float), last
    assert last["reward_margin"] > 0 and last["reward_accuracy"] >= 0.9
    assert run.metrics["eval_preference_accuracy"] >= 0.9  # held-out pairs, the tuned model
    status, output = run_main("--provider", "local", "runs", "show", run.id, env=_cli_env(local))
    assert status == 0 and f"method dpo, from trained/{base.id}" in output, output
    status, output = run_main("--provider", "local", "runs", "list", "--json", env=_cli_env(local))
    assert {r["id"]: r["method"] for r in json.loads(output)}[run.id] == "dpo"


def test_grpo_after_sft_raises_the_exact_match_reward_and_records_its_rollout(local: Any, sft: Any) -> None:
    from cli_helpers import run_main

    from trainkit_core.training.submit import start_run

    base, before = sft
    config = {"dataset": "style-prompts", "method": "grpo", "from_model": f"trained/{base.id}"}
    run = start_run(local, {**config, "rewards": ["exact_match"]}).wait(timeout=900)
    assert run.status == "succeeded", run.error_message
    after = demo.answers(local, f"trained/{run.id}", demo.EVAL_PROMPTS)
    assert demo.exact_match_reward(after) - demo.exact_match_reward(before) >= 0.4, (before, after)

    last = _progress(run)[-1]
    for field in ("reward_mean", "reward_std", "reward_exact_match_mean", "completion_length", "zero_advantage_share"):
        assert isinstance(last[field], float), last
    # The reward rose, and the run's end says by how much (no warning that it did not).
    assert run.metrics["reward_rise"] > 0 and run.metrics["reward_last"] > run.metrics["reward_first"], run.metrics
    assert not [e for e in run.events.read() if e["type"] == "warning" and "did not rise" in e.get("message", "")]
    rollout = run.latest_rollout
    assert rollout and rollout["kind"] == "grpo" and rollout["samples"]
    sample = rollout["samples"][0]
    assert sample["prompt"].startswith("Opposites:") and set(sample["rewards"]) == {"exact_match"}
    status, output = run_main("--provider", "local", "runs", "show", run.id, env=_cli_env(local))
    assert status == 0 and "latest rollout" in output and "exact_match=" in output, output


def test_grpo_with_a_plugin_grader_by_name_and_graders_that_fail(local: Any, sft: Any) -> None:
    from trainkit_core.training.submit import start_run

    base, _ = sft
    config = {"dataset": "style-prompts", "method": "grpo", "from_model": f"trained/{base.id}", **CODE_PATH}
    # With the KL term on, the reference is the --from model (trl's frozen copy of its adapter):
    # the first step's policy is that model, so its KL is 0. The copy is not saved with the adapter.
    with_kl = {**config, "rewards": ["full_stop=0.5", "exact_match"], "kl_coef": 0.04}
    run = start_run(local, with_kl).wait(timeout=900)
    assert run.status == "succeeded", run.error_message
    assert set(run.latest_rollout["samples"][0]["rewards"]) == {"full_stop", "exact_match"}
    progress = _progress(run)
    assert "reward_full_stop_mean" in progress[-1]
    assert progress[0]["kl"] == pytest.approx(0.0, abs=1e-4), progress[0]
    saved = local.settings.provider.home / "volumes" / "trainkit-models" / "trained" / run.id
    assert (saved / "adapter_config.json").is_file() and not (saved / "ref").exists(), sorted(saved.iterdir())

    for grader, words in (
        ("boom", "grader 'boom' raised RuntimeError: the grader broke on example"),
        ("not_a_number", "grader 'not_a_number' returned nan, not a finite number"),
        ("hangs", "grader 'hangs' ran past its timeout of 2 s"),
    ):
        failed = start_run(local, {**config, "rewards": [grader], "reward_timeout_s": 2}).wait(timeout=900)
        assert failed.status == "failed"
        assert words in (failed.error_message or ""), failed.error_message
        assert "(prompt 'Opposites:" in (failed.error_message or "")


def test_grpo_whose_completions_all_score_zero_fails_saying_why_and_what_to_try(local: Any) -> None:
    """From the bare base no completion matches the reference: no group teaches anything, and the error says so."""
    from trainkit_core.training.submit import start_run

    config = {"dataset": "style-prompts", "method": "grpo", "rewards": ["exact_match"], **CODE_PATH, "steps": 4}
    failed = start_run(local, config).wait(timeout=900)
    assert failed.status == "failed"
    message = failed.error_message or ""
    assert "adapter gate failed" in message and "it does nothing" in message, message
    assert "the GRPO reward did not rise: 0.000 over the first logged steps, 0.000 over the last" in message
    assert "in 100% of the groups every completion scored the same" in message
    assert "--from a model fine-tuned on the task with SFT" in message


def test_grpo_on_prompts_that_declare_tools_with_the_tool_calls_grader_and_an_openai_grader(
    local: Any, sft: Any
) -> None:
    """trl hands the reward functions each completion's ids; the `tool_calls` grader reads the calls from them."""
    from trainkit_core.training.submit import start_run

    base, _ = sft
    tools = [{"type": "function", "function": {"name": "opposite", "parameters": {"type": "object"}}}]
    folder = Path(local.settings.datasets.datasets_dir) / "tool-prompts"
    folder.mkdir()
    lines = [
        {
            "messages": [{"role": "user", "content": prompt}],
            "tools": tools,
            "tool_calls": [{"type": "function", "function": {"name": "opposite", "arguments": {"words": prompt}}}],
            "reference": "x",
        }
        for prompt in demo.EVAL_PROMPTS[:8]
    ]
    (folder / "train.jsonl").write_text("".join(json.dumps(line) + "\n" for line in lines))
    (folder / "dataset.toml").write_text('name = "tool-prompts"\nformat = "prompt"\ntrain = ["train.jsonl"]\n')
    grader = {
        "type": "string_check",
        "name": "says_x",
        "input": "{{sample.output_text}}",
        "reference": "{{item.reference}}",
        "operation": "like",
    }
    config = {"dataset": "tool-prompts", "method": "grpo", "from_model": f"trained/{base.id}", **CODE_PATH}
    run = start_run(local, {**config, "rewards": ["tool_calls"], "openai_graders": [grader]}).wait(timeout=900)
    assert run.status == "succeeded", run.error_message
    samples = run.latest_rollout["samples"]
    assert samples and all(set(s["rewards"]) == {"tool_calls", "says_x"} for s in samples)
    assert all(s["rewards"]["tool_calls"] in (0.0, 0.5, 1.0) for s in samples)
    assert "reward_says_x_mean" in _progress(run)[-1] and "reward_tool_calls_mean" in _progress(run)[-1]


def _cli_env(local: Any) -> dict[str, str]:
    return {
        "TRAINKIT_HOME": str(local.settings.provider.home),
        "TRAINKIT_DATASETS_DIR": str(local.settings.datasets.datasets_dir),
    }


@pytest.mark.parametrize(("method", "strategy"), [("dpo", "ddp"), ("grpo", "ddp"), ("dpo", "fsdp"), ("grpo", "fsdp")])
def test_dpo_and_grpo_learn_on_two_processes(local: Any, sft: Any, method: str, strategy: str) -> None:
    """The same runs as above on 2 CPU ranks (gloo; GRPO's groups gathered across ranks by trl), copied or sharded."""
    from trainkit_core.training.submit import start_run

    base, before = sft
    # GRPO at half its default length: 50 steps of 64 completions learn this rule; the default's
    # own learning is the one-process test's.
    grpo = {"dataset": "style-prompts", "rewards": ["exact_match"], "steps": 50}
    config = {"dpo": {"dataset": "style-pref"}, "grpo": grpo}[method]
    run = start_run(
        local, {**config, "method": method, "from_model": f"trained/{base.id}", "processes": 2, "strategy": strategy}
    )
    run = run.wait(timeout=900)
    assert run.status == "succeeded", run.error_message
    assert [(e["processes"], e["strategy"]) for e in run.events.read() if "processes" in e] == [(2, strategy)]
    after = demo.answers(local, f"trained/{run.id}", demo.EVAL_PROMPTS)
    if method == "dpo":
        assert demo.full_stop_rate(after) >= 0.9, after
    else:
        assert demo.exact_match_reward(after) - demo.exact_match_reward(before) >= 0.4, (before, after)

"""DPO and GRPO through the unsloth backend on the tiny model (the `unsloth` session only).

The same chain as tests/core/test_methods_ml.py, with ``backend = "unsloth"`` at each
step: a short SFT run on the demo's opposites, then DPO and GRPO started from it
(``--from``, which the unsloth backend loads with `FastModel.from_pretrained` on the
adapter folder). On a CPU, Unsloth 2026.10 leaves trl's DPO and GRPO trainers as they
are, apart from its CPU training defaults (`unsloth_zoo/cpu/trainer.py`: the configs'
precision and optimizer); on a GPU, `import unsloth` replaces them with its patched
ones (`PatchFastRL` at import), which no test here reaches. Each run is a few steps:
what is checked is that the Unsloth path runs the method end to end (its events, the
GRPO rollout, the DPO reference adapter left out of the saved one) and leaves an
adapter that loads as inference loads it and answers; DPO's six steps already move
the answers toward its preferred style.
"""

from __future__ import annotations

import os
from typing import Any

import methods_demo as demo
import pytest

pytestmark = [pytest.mark.ml, pytest.mark.unsloth, pytest.mark.timeout(1800)]


@pytest.fixture(scope="module")
def local(tmp_path_factory: pytest.TempPathFactory) -> Any:
    """The local provider on its own home, with the demonstration datasets."""
    pytest.importorskip("unsloth")
    from trainkit_core import get_provider
    from trainkit_core.settings import DatasetSettings, ProviderSettings, Settings

    root = tmp_path_factory.mktemp("methods")
    demo.write_datasets(root / "datasets")
    for name in ("HF_HUB_OFFLINE", "TRANSFORMERS_OFFLINE", "HF_DATASETS_OFFLINE"):
        os.environ[name] = "1"
    settings = Settings(
        provider=ProviderSettings(home=root / "home"), datasets=DatasetSettings(datasets_dir=root / "datasets")
    )
    return get_provider("local", settings)


def _print_logs(local: Any) -> None:
    logs = sorted((local.settings.provider.home / "logs").glob("*.log"), key=lambda p: p.stat().st_mtime)
    if logs:
        print(logs[-1].read_text(errors="replace")[-3000:])  # what Unsloth printed, for the session's output


@pytest.fixture(scope="module")
def sft(local: Any) -> Any:
    """A short SFT run through Unsloth: enough for answers in the demo's form."""
    run = _run(local, {"dataset": "style-sft", "steps": 150})
    return run, _answers(local, run)


def _run(local: Any, config: dict[str, Any]) -> Any:
    """A run of `config` through the unsloth backend, waited for; it must succeed with all its steps."""
    from trainkit_core.training.submit import start_run

    run = start_run(local, {**config, "backend": "unsloth"}).wait(timeout=1200)
    _print_logs(local)
    assert run.status == "succeeded", run.error_message
    assert run.framework == "unsloth" and run.method == config.get("method", "sft") and run.step == config["steps"]
    return run


def _progress(run: Any) -> list[dict[str, Any]]:
    return [e for e in run.events.read() if e["type"] == "progress"]


def _adapter_keys(local: Any, run: Any) -> list[str]:
    from safetensors import safe_open

    folder = local.settings.provider.home / "volumes" / "trainkit-models" / "trained" / run.id
    with safe_open(str(folder / "adapter_model.safetensors"), "pt") as weights:
        return list(weights.keys())


def _answers(local: Any, run: Any) -> list[str]:
    """Greedy answers to the demo's eval prompts (never trained on), the adapter loaded as inference loads it."""
    answers = demo.answers(local, f"trained/{run.id}", demo.EVAL_PROMPTS[:10])
    print(f"{run.method} answers:", answers)
    assert sum(bool(a.strip()) for a in answers) >= 7, answers  # it answers
    return answers


def test_dpo_through_unsloth_from_an_unsloth_sft_run(local: Any, sft: Any) -> None:
    base, before = sft
    run = _run(local, {"dataset": "style-pref", "method": "dpo", "from_model": f"trained/{base.id}", "steps": 6})
    last = _progress(run)[-1]
    for field in ("rewards_chosen", "rewards_rejected", "reward_margin", "reward_accuracy"):
        assert isinstance(last[field], float), last
    keys = _adapter_keys(local, run)
    assert keys and not [k for k in keys if ".ref." in k]  # trl's frozen reference copy is not saved
    # Even six steps move the answers toward the preferred style (a full stop at the end).
    after = _answers(local, run)
    assert demo.full_stop_rate(after) >= demo.full_stop_rate(before) + 0.3, (before, after)


def test_grpo_through_unsloth_from_an_unsloth_sft_run(local: Any, sft: Any) -> None:
    base, _ = sft
    config = {"dataset": "style-prompts", "method": "grpo", "from_model": f"trained/{base.id}", "steps": 3}
    run = _run(local, {**config, "rewards": ["exact_match"]})
    last = _progress(run)[-1]
    for field in ("reward_mean", "reward_std", "reward_exact_match_mean", "completion_length"):
        assert isinstance(last[field], float), last
    rollout = run.latest_rollout
    assert rollout and rollout["kind"] == "grpo" and rollout["samples"]
    assert rollout["samples"][0]["prompt"].startswith("Opposites:")
    _answers(local, run)

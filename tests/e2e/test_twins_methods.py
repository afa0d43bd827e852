"""The twins through DPO and GRPO from the CLI, on text data (the GPU path on a CPU).

The twins are the classes of the real presets (`Gemma3ForConditionalGeneration` for
4b/12b, `Gemma4ForConditionalGeneration` for 31b, and in the layouts of e2b/e4b and
26b-a4b), with their tokenizers, chat formats and LoRA targets. Two steps of each method prove the code path, not learning: the
model and tokenizer load, trl's trainer runs with its reference (DPO) or its
generations and graders (GRPO), the adapter passes the gate (it changes the base's
logits), holds LoRA on the language model only (no reference adapter left behind), and
answers through `trainkit infer`. Learning is shown on the tiny model
(tests/core/test_methods_ml.py).

GRPO is rewarded by `length_penalty` beside `exact_match`: a random twin never matches a
reference, so every completion of a group would score the same, its advantage would be
zero and the adapter would stay as it started (the gate fails such a run); lengths vary.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest
import test_vision_train
from cli_env import REPO, Env

# The fixture of the vision twins' test, here under another name: one home per module here too.
vision_env = test_vision_train.env

pytestmark = [pytest.mark.ml, pytest.mark.e2e, pytest.mark.timeout(900)]

#: Each twin's chat format and class (the class of the presets it stands for).
TWINS = {"tiny-gemma3mm": "gemma3", "tiny-gemma4": "gemma4", "tiny-gemma4-e": "gemma4", "tiny-gemma4-moe": "gemma4"}
CLASSES = {
    size: "Gemma3ForConditionalGeneration" if fmt == "gemma3" else "Gemma4ForConditionalGeneration"
    for size, fmt in TWINS.items()
}
#: Per method: its dataset, its extra options and the progress fields its trainer reports.
METHODS: dict[str, tuple[str, tuple[str, ...], tuple[str, ...]]] = {
    "dpo": ("pairs", (), ("rewards_chosen", "rewards_rejected", "reward_margin", "reward_accuracy")),
    "grpo": (
        "prompts",
        # A step of 2 prompts x 4 completions of at most 16 tokens (the default's is 8 x 8 of 64).
        (
            *("--reward", "length_penalty", "--reward", "exact_match=0.5"),
            *("--batch-size", "8", "--num-generations", "4", "--max-completion-length", "16"),
        ),
        ("reward_mean", "reward_length_penalty_mean", "reward_exact_match_mean", "completion_length"),
    ),
}
EXAMPLES = 16


def _write_datasets(root: Path) -> None:
    """`pairs` (preference, with held-out pairs) and `prompts` (prompt), from the demo's opposites."""
    demo = [json.loads(line)["messages"] for line in (REPO / "datasets/demo/train.jsonl").read_text().splitlines()]
    examples = [(m[0]["content"], m[1]["content"]) for m in demo[: EXAMPLES + 4]]

    def pair(prompt: str, answer: str) -> dict[str, Any]:
        return {
            "input": {"messages": [{"role": "user", "content": prompt}]},
            "preferred_output": [{"role": "assistant", "content": answer + "."}],
            "non_preferred_output": [{"role": "assistant", "content": answer}],
        }

    files = {
        "pairs": (
            'name = "pairs"\nformat = "preference"\ntrain = ["train.jsonl"]\neval = ["eval.jsonl"]\n',
            {
                "train.jsonl": [pair(p, a) for p, a in examples[:EXAMPLES]],
                "eval.jsonl": [pair(p, a) for p, a in examples[EXAMPLES:]],
            },
        ),
        "prompts": (
            'name = "prompts"\nformat = "prompt"\ntrain = ["train.jsonl"]\n',
            {
                "train.jsonl": [
                    {"messages": [{"role": "user", "content": p}], "reference": a + "."} for p, a in examples[:EXAMPLES]
                ]
            },
        ),
    }
    for name, (spec, records) in files.items():
        folder = root / name
        folder.mkdir(parents=True)
        (folder / "dataset.toml").write_text(spec)
        for file, lines in records.items():
            (folder / file).write_text("".join(json.dumps(line) + "\n" for line in lines))


@pytest.fixture(scope="module")
def env(vision_env: Env) -> Env:
    """The vision twins' test's home and datasets folder (its warm worker ended at its end), with `pairs` and `prompts`."""
    _write_datasets(Path(vision_env.env["TRAINKIT_DATASETS_DIR"]))
    return vision_env


@pytest.mark.parametrize("method", list(METHODS))
@pytest.mark.parametrize("size", list(TWINS))
def test_the_twin_trains_with_the_method_and_its_adapter_answers(env: Env, size: str, method: str) -> None:
    from safetensors import safe_open

    from trainkit_core import get_provider
    from trainkit_core.runs.training_run import RunStore
    from trainkit_core.settings import DatasetSettings, ProviderSettings, Settings

    dataset, options, fields = METHODS[method]
    out = env.cli(
        "train", "--dataset", dataset, "--method", method, "--model-size", size, "--steps", "2",
        *options,
    ).stdout  # fmt: skip
    found = re.search(r"model: (trained/(run-\S+))", out)
    assert found, out
    model_path, run_id = found.groups()
    provider = get_provider("local", Settings(provider=ProviderSettings(home=env.home), datasets=DatasetSettings()))
    run = RunStore.for_provider(provider).get(run_id)
    assert run.status == "succeeded" and run.method == method and run.config["model_size"] == size
    progress = [e for e in run.events.read() if e["type"] == "progress"]
    assert progress and all(isinstance(progress[-1][field], float) for field in fields), progress[-1]
    assert run.metrics["gate_effect_max_abs_diff"] >= run.metrics["gate_effect_minimum"]
    if method == "dpo":
        assert isinstance(run.metrics["eval_preference_accuracy"], float)  # scored on the held-out pairs
    else:
        assert run.latest_rollout and run.latest_rollout["samples"][0]["prompt"].startswith("Opposites:")

    folder = Path(provider.volume("models").root) / model_path
    adapter = json.loads((folder / "adapter_config.json").read_text())
    assert not (folder / "ref").exists()  # DPO's reference adapter is not saved with the trained one
    with safe_open(str(folder / "adapter_model.safetensors"), "pt") as weights:
        keys = list(weights.keys())
    lora = [k for k in keys if ".lora_" in k]
    assert lora and all(".language_model." in k for k in lora), lora[:5]  # not the vision tower
    assert not any("vision" in k or ".ref." in k for k in keys), keys[:5]
    card = json.loads((folder / "trained_model.json").read_text())
    assert card["base_model"] == f"trainkit/{size}" and card["chat_format"] == TWINS[size]
    base = json.loads((Path(adapter["base_model_name_or_path"]) / "config.json").read_text())
    assert base["architectures"] == [CLASSES[size]]

    answer = json.loads(
        env.cli(
            "infer", "--model-path", model_path, "--prompt", "Opposites: hot early", "--max-new-tokens", "4", "--json"
        ).stdout
    )
    assert answer["text"].strip() and answer["usage"]["completion_tokens"] > 0, answer

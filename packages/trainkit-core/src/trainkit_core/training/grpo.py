"""GRPO: trl's `GRPOTrainer` on prompts, rewarded by graders (`trainkit_core.rewards`).

Each grader named by ``--reward NAME[=WEIGHT]`` becomes one of trl's reward functions
(trl logs each one's mean and spread under its name; the weights are trl's
`reward_weights`), called through `rewards.scoring.call_grader_batch`, so a grader that
raises, answers NaN or hangs fails the run naming itself and the example. The latest
group (prompts, completions, rewards per grader) is kept by `RolloutKeeper` and
recorded on the run at every logged step (`TrainingRun.record_latest_rollout`). On a
CPU generation dominates and two torch threads are far slower than one on small
matrices (docs/developer/facts.md), which `small_model_threads` already sets for the tiny model.
"""

from __future__ import annotations

import threading
from pathlib import Path
from typing import Any

from trainkit_core.models.chat_format import ChatFormat, render_prompt
from trainkit_core.training.config import TrainConfig

#: trl's log keys -> trainkit's progress-event fields (per-grader keys are added by name).
GRPO_EVENT_FIELDS = {
    "reward": "reward_mean",
    "reward_std": "reward_std",
    "kl": "kl",
    "completions/mean_length": "completion_length",
}
#: Completions kept per recorded rollout (one group or two).
ROLLOUT_SAMPLES = 16


def grader_event_fields(names: list[str]) -> dict[str, str]:
    fields = dict(GRPO_EVENT_FIELDS)
    for name in names:
        fields[f"rewards/{name}/mean"] = f"reward_{name}_mean"
        fields[f"rewards/{name}/std"] = f"reward_{name}_std"
    return fields


class RolloutKeeper:
    """The latest scored completions, written by the reward functions and read by the callback."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._latest: dict[tuple[str, str], dict[str, Any]] = {}
        self._order: list[tuple[str, str]] = []

    def note(self, grader: str, prompt: str, completion: str, reward: float, user: str) -> None:
        with self._lock:
            key = (prompt, completion)
            if key not in self._latest:
                self._latest[key] = {"prompt": user, "completion": completion, "rewards": {}}
                self._order.append(key)
                if len(self._order) > ROLLOUT_SAMPLES:
                    self._latest.pop(self._order.pop(0), None)
            self._latest[key]["rewards"][grader] = reward

    def take(self) -> list[dict[str, Any]]:
        with self._lock:
            samples = [self._latest[k] for k in self._order if k in self._latest]
            self._latest, self._order = {}, []
        return samples


def rollout_callback(run: Any, keeper: RolloutKeeper, interval_s: float = 2.0) -> Any:
    """A `TrainerCallback` recording the latest group on the run, at most every `interval_s` and at the end."""
    import time

    from transformers import TrainerCallback

    class RolloutRecorder(TrainerCallback):  # type: ignore[misc]
        last = 0.0

        def _record(self, step: int) -> None:
            samples = keeper.take()
            if samples:
                run.record_latest_rollout({"step": step, "kind": "grpo", "samples": samples})
            self.last = time.monotonic()

        def on_log(self, args: Any, state: Any, control: Any, **kwargs: Any) -> None:
            if time.monotonic() - self.last >= interval_s:
                self._record(state.global_step)

        def on_train_end(self, args: Any, state: Any, control: Any, **kwargs: Any) -> None:
            self._record(state.global_step)

    return RolloutRecorder()


def prompt_rows(
    prompts: list[dict[str, Any]], fmt: ChatFormat
) -> tuple[list[dict[str, str]], dict[str, dict[str, Any]]]:
    """trl's standard prompt rows, and each rendered prompt's dataset line (what graders read)."""
    rows, by_prompt = [], {}
    for example in prompts:
        text = render_prompt(example["messages"], fmt)
        rows.append({"prompt": text})
        by_prompt[text] = example
    return rows, by_prompt


def reward_functions(
    config: TrainConfig, by_prompt: dict[str, dict[str, Any]], keeper: RolloutKeeper
) -> tuple[list[Any], list[float]]:
    """One trl reward function per grader, and their weights."""
    from trainkit_core.rewards.builtin import BUILTIN_GRADERS
    from trainkit_core.rewards.process import GraderProcess
    from trainkit_core.rewards.registry import check_reward_names, load_grader
    from trainkit_core.rewards.scoring import call_grader_batch, call_grader_process_batch

    functions, weights = [], []
    for name, weight in check_reward_names(list(config.rewards or [])):
        grader = load_grader(name)  # a plugin that fails to import fails the run here, naming itself
        # A plugin grader runs in a process of its own: one holding the GIL cannot stop the job
        # (its timeout, `runs stop`); the built-in ones are trusted and run on a thread.
        process = None if name in BUILTIN_GRADERS else GraderProcess(name)

        def reward(
            prompts: list[str],
            completions: list[Any],
            _name: str = name,
            _grader: Any = grader,
            _process: Any = process,
            **_: Any,
        ) -> list[float]:
            texts = [c if isinstance(c, str) else str(c[-1].get("content", "")) for c in completions]
            examples = [by_prompt.get(prompt, {"messages": []}) for prompt in prompts]
            calls = list(zip(texts, examples, strict=True))
            if _process is not None:
                scores = call_grader_process_batch(_name, _process, calls, config.reward_timeout_s)
            else:
                scores = call_grader_batch(_name, _grader, calls, config.reward_timeout_s)
            for prompt, text, example, score in zip(prompts, texts, examples, scores, strict=True):
                user = [m["content"] for m in example.get("messages", []) if m.get("role") == "user"]
                keeper.note(_name, prompt, text, score, user[-1] if user else "")
            return scores

        reward.__name__ = name
        functions.append(reward)
        weights.append(weight)
    return functions, weights


def build_grpo_trainer(
    backend: str,
    model: Any,
    tokenizer: Any,
    prompts: list[dict[str, Any]],
    fmt: ChatFormat,
    config: TrainConfig,
    output_dir: Path,
    callbacks: list[Any],
    keeper: RolloutKeeper,
) -> Any:
    """trl's `GRPOTrainer` (Unsloth's patched one where `import unsloth` ran first on a GPU) over the prompts."""
    from trl import GRPOConfig, GRPOTrainer

    from datasets import Dataset  # type: ignore[attr-defined]
    from trainkit_core.training.backends import trainer_arguments
    from trainkit_core.training.methods import grpo_batch

    rows, by_prompt = prompt_rows(prompts, fmt)
    functions, weights = reward_functions(config, by_prompt, keeper)
    generations = config.num_generations or 4
    arguments = trainer_arguments(backend, config, output_dir)
    arguments["per_device_train_batch_size"] = grpo_batch(arguments["per_device_train_batch_size"], generations)
    args = GRPOConfig(
        **arguments,
        num_generations=generations,
        max_completion_length=config.max_completion_length or 64,
        beta=config.kl_coef if config.kl_coef is not None else 0.0,
        temperature=config.temperature if config.temperature is not None else 1.0,
        reward_weights=weights,
        remove_unused_columns=False,
    )
    tokenizer.padding_side = "left"
    # Generation stops at the format's end of turn (trl reads the stops from the generation config).
    stops = [tokenizer.convert_tokens_to_ids(fmt.end_of_turn), tokenizer.eos_token_id]
    model.generation_config.eos_token_id = [i for i in dict.fromkeys(stops) if i is not None]
    model.generation_config.pad_token_id = tokenizer.pad_token_id
    trainer = GRPOTrainer(
        model=model,
        reward_funcs=functions,
        args=args,
        train_dataset=Dataset.from_list(rows),
        processing_class=tokenizer,
        callbacks=callbacks,
    )
    from transformers import PrinterCallback

    trainer.remove_callback(PrinterCallback)
    return trainer

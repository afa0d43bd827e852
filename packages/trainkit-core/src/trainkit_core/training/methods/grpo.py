"""GRPO: trl's `GRPOTrainer` on prompts, rewarded by graders (`trainkit_core.rewards`).

Each grader named by ``--reward NAME[=WEIGHT]`` becomes one of trl's reward functions
(trl logs each one's mean and spread under its name; the weights are trl's
`reward_weights`), called through `rewards.scoring.call_grader_batch`, so a grader that
raises, answers NaN or hangs fails the run naming itself and the example. The latest
group (prompts, completions, rewards per grader) is kept by `RolloutKeeper` and
recorded on the run at every logged step (`TrainingRun.record_latest_rollout`). On a
CPU generation dominates and two torch threads are far slower than one on small
matrices (docs/developer/facts.md), which `small_model_threads` already sets for the tiny model.

Defaults on the GPU presets: learning rate 5e-6, 8 generations per prompt, completions of at
most 256 tokens, KL coefficient 0.0 (trl's `GRPOConfig` defaults since trl 0.19: beta 0.0;
Unsloth's GRPO notebooks: lr 5e-6, 6-8 generations, 200-256 tokens). tiny: chosen on the
GRPO families of bench/method_suite.py on a CPU (docs/developer/research-logs.md).
"""

from __future__ import annotations

import math
import threading
from collections.abc import Callable, Mapping
from functools import partial
from pathlib import Path
from typing import TYPE_CHECKING, Any

from trainkit_core.errors import UsageError
from trainkit_core.models.chat_format import ChatFormat, render_prompt
from trainkit_core.training.methods.base import Method, MethodDefaults, TrainerInputs, drop_reference

if TYPE_CHECKING:
    from trainkit_core.training.config import TrainConfig

#: trl's log keys -> trainkit's progress-event fields (per-grader keys are added by name).
GRPO_EVENT_FIELDS = {
    "reward": "reward_mean",
    "reward_std": "reward_std",
    # The share of groups whose completions all scored the same: their advantage is zero,
    # so they teach nothing. Near 1, the run is not learning whatever else it logs.
    "frac_reward_zero_std": "zero_advantage_share",
    "kl": "kl",
    "entropy": "entropy",
    "completions/mean_length": "completion_length",
}
#: Logged steps compared at each end of a run (a third of them, at most this many).
REWARD_WINDOW = 5
#: Completions kept per recorded rollout (one group or two).
ROLLOUT_SAMPLES = 16
#: Completions held between two records. Each grader notes every completion of a step in turn,
#: so the buffer must hold a whole step's: one as small as the record let the first grader's
#: notes be evicted by the next grader's, and the record held one grader's rewards only.
ROLLOUT_BUFFER = 4096


def grader_event_fields(names: list[str]) -> dict[str, str]:
    fields = dict(GRPO_EVENT_FIELDS)
    for name in names:
        fields[f"rewards/{name}/mean"] = f"reward_{name}_mean"
        fields[f"rewards/{name}/std"] = f"reward_{name}_std"
    return fields


def reward_verdict(log_history: list[dict[str, Any]]) -> tuple[dict[str, Any], list[str]]:
    """(metrics, warnings): the reward at the start and the end of a GRPO run, and a warning when it did not rise.

    A GRPO run that ends with the reward where it started has learnt nothing from its
    graders, however its loss moved; said at the end as the adapter gate says it for SFT,
    with the share of groups that taught nothing (every completion scored the same).
    """
    logged = [e for e in log_history if isinstance(e.get("reward"), int | float)]
    if len(logged) < 2:
        return {}, []
    window = max(1, min(REWARD_WINDOW, len(logged) // 3))
    first = sum(e["reward"] for e in logged[:window]) / window
    last = sum(e["reward"] for e in logged[-window:]) / window
    shares = [e["frac_reward_zero_std"] for e in logged if isinstance(e.get("frac_reward_zero_std"), int | float)]
    zero = sum(shares) / len(shares) if shares else None
    metrics = {"reward_first": round(first, 4), "reward_last": round(last, 4), "reward_rise": round(last - first, 4)}
    if zero is not None:
        metrics["zero_advantage_share"] = round(zero, 4)
    if last > first:
        return metrics, []
    why = (
        f"; in {zero:.0%} of the groups every completion scored the same, which teaches nothing: more "
        "generations per prompt, a higher temperature, a grader with partial credit or a start that already "
        "gets some answers right (--from a model fine-tuned on the task with SFT) give them a spread"
        if zero is not None and zero >= 0.5
        else "; try another learning rate or more steps"
    )
    return metrics, [
        f"the GRPO reward did not rise: {first:.3f} over the first logged steps, {last:.3f} over the last{why}"
    ]


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
                if len(self._order) > ROLLOUT_BUFFER:
                    self._latest.pop(self._order.pop(0), None)
            self._latest[key]["rewards"][grader] = reward

    def take(self) -> list[dict[str, Any]]:
        """The last completions noted (the end of the latest step), each with every grader's reward."""
        with self._lock:
            samples = [self._latest[k] for k in self._order[-ROLLOUT_SAMPLES:] if k in self._latest]
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
        text = render_prompt(example["messages"], fmt, tools=example.get("tools"))
        rows.append({"prompt": text})
        by_prompt[text] = example
    return rows, by_prompt


def _reward_function(
    name: str,
    score: Callable[[list[tuple[str, dict[str, Any]]]], list[float]],
    by_prompt: dict[str, dict[str, Any]],
    keeper: RolloutKeeper,
    calls_of: Callable[[list[int]], list[tuple[str, dict[str, Any]]]] | None = None,
) -> Any:
    """trl's reward function for one grader: `score` gets (completion text, dataset line) pairs.

    With `calls_of`, each line also carries the completion's calls as ``_tool_calls``, read
    from its token ids (trl's text has the special tokens that write Gemma 4's calls removed).
    """

    def reward(prompts: list[str], completions: list[Any], **kwargs: Any) -> list[float]:
        texts = [c if isinstance(c, str) else str(c[-1].get("content", "")) for c in completions]
        examples = [by_prompt.get(prompt, {"messages": []}) for prompt in prompts]
        ids = kwargs.get("completion_ids")
        if calls_of is not None and ids is not None:
            examples = [
                {**example, "_tool_calls": [{"name": n, "arguments": a} for n, a in calls_of(list(map(int, one)))]}
                for example, one in zip(examples, ids, strict=True)
            ]
        scores = score(list(zip(texts, examples, strict=True)))
        for prompt, text, example, value in zip(prompts, texts, examples, scores, strict=True):
            user = [m["content"] for m in example.get("messages", []) if m.get("role") == "user"]
            keeper.note(name, prompt, text, value, user[-1] if user else "")
        return scores

    reward.__name__ = name
    return reward


def reward_functions(
    config: TrainConfig,
    by_prompt: dict[str, dict[str, Any]],
    keeper: RolloutKeeper,
    calls_of: Callable[[list[int]], list[tuple[str, dict[str, Any]]]] | None = None,
) -> tuple[list[Any], list[float]]:
    """One trl reward function per grader (named ones, then OpenAI grader objects), and their weights.

    `calls_of(completion ids)` reads a completion's tool calls (`tool_syntax.calls_made`), which
    graders get as ``_tool_calls`` (the built-in `tool_calls` grader compares them).
    """
    from trainkit_core.rewards import openai_graders
    from trainkit_core.rewards.builtin import BUILTIN_GRADERS
    from trainkit_core.rewards.process import GraderProcess
    from trainkit_core.rewards.registry import check_reward_names, load_grader
    from trainkit_core.rewards.scoring import call_grader_batch, call_grader_process_batch

    timeout = config.reward_timeout_s
    functions: list[Any] = []
    weights: list[float] = []
    for name, weight in check_reward_names(list(config.rewards or [])):
        grader = load_grader(name)  # a plugin that fails to import fails the run here, naming itself
        if name in BUILTIN_GRADERS:  # trusted: on a thread
            score = partial(call_grader_batch, name, grader, timeout_s=timeout)
        else:
            # A plugin grader runs in a process of its own: one holding the GIL cannot stop the job
            # (its timeout, `runs stop`).
            score = partial(call_grader_process_batch, name, GraderProcess(name), timeout_s=timeout)
        functions.append(_reward_function(name, score, by_prompt, keeper, calls_of))
        weights.append(weight)
    # OpenAI's graders are trainkit's own code over the caller's templates: on a thread too; a
    # python grader is the caller's code: in a process of its own, as a plugin is.
    specs = list(config.openai_graders or [])
    for name, spec in zip(openai_graders.grader_names(specs), specs, strict=True):
        if spec["type"] == "python":
            process = GraderProcess(name, source=spec["source"])
            score = partial(call_grader_process_batch, name, process, timeout_s=timeout)
        else:
            score = partial(call_grader_batch, name, openai_graders.grader_for(spec), timeout_s=timeout)
        functions.append(_reward_function(name, score, by_prompt, keeper, calls_of))
        weights.append(1.0)
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
    from trainkit_core.models.tool_syntax import calls_made
    from trainkit_core.training.backends import trainer_arguments

    rows, by_prompt = prompt_rows(prompts, fmt)

    def calls_of(ids: list[int]) -> list[tuple[str, dict[str, Any]]]:
        return calls_made(tokenizer.decode(ids, skip_special_tokens=False), fmt.name)

    functions, weights = reward_functions(config, by_prompt, keeper, calls_of)
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


def grpo_batch(batch_size: int, generations: int) -> int:
    """GRPO's batch in completions: a whole number of groups, at least one (trl's rule)."""
    return max(generations, (batch_size // generations) * generations)


#: The work of generating one token against training on one, an assumed figure (token-by-token
#: decoding is memory-bound; trl's generation without vLLM): what the plan counts per generated token.
GENERATED_TOKEN_WORK = 10.0

_GPU = MethodDefaults(
    learning_rate=5e-6,
    epochs=1.0,
    warmup_steps=5,
    lr_scheduler="linear",
    num_generations=8,
    max_completion_length=256,
    kl_coef=0.0,
    temperature=1.0,
)


class Grpo(Method):
    name = "grpo"
    formats = ("prompt",)
    options = ("num_generations", "max_completion_length", "kl_coef", "temperature", "rewards", "openai_graders")
    records_rollouts = False  # it records its own latest group (`RolloutKeeper`)
    defaults: Mapping[str, MethodDefaults] = {
        "tiny": MethodDefaults(
            # Chosen on bench/method_suite.py's GRPO families (tasks a short SFT run learns in
            # part), not on a demo. The earlier 2 prompts x 4 completions a step made the reward
            # of a step noise (0 to 0.6 and back) and left every family where it started or
            # worse; 8 prompts x 8 completions a step raised it on every family. Temperature 0.7
            # beat 1.0 (a tiny model's samples at 1.0 are mostly wrong); 3e-3 collapsed, 300
            # steps gained nothing over 100. 8 tokens (the old default) cut off longer answers.
            learning_rate=1e-3,
            steps=100,
            batch_size=64,
            warmup_steps=0,
            lr_scheduler="constant",
            num_generations=8,
            max_completion_length=64,
            kl_coef=0.0,
            temperature=0.7,
        ),
        "": _GPU,  # every GPU preset, and a base model given by id
    }

    def check_request(self, config: TrainConfig) -> None:
        from trainkit_core.rewards.registry import check_reward_names

        if not config.rewards and not config.openai_graders:
            raise UsageError(
                "--method grpo needs at least one grader", hint="e.g. --reward exact_match (see trainkit_core.rewards)"
            )
        check_reward_names(list(config.rewards or []))

    def event_fields(self, config: TrainConfig) -> dict[str, str]:
        from trainkit_core.rewards.openai_graders import grader_names
        from trainkit_core.rewards.registry import check_reward_names

        names = [name for name, _ in check_reward_names(list(config.rewards or []))]
        return grader_event_fields(names + grader_names(list(config.openai_graders or [])))

    def training_summary(self, log_history: list[dict[str, Any]]) -> tuple[dict[str, Any], list[str]]:
        """Whether the reward rose: its mean over the first logged steps against the last ones."""
        return reward_verdict(log_history)

    def build_trainer(self, inputs: TrainerInputs) -> Any:
        keeper = RolloutKeeper()
        callbacks = [*inputs.callbacks, rollout_callback(inputs.run, keeper)]
        return build_grpo_trainer(
            inputs.backend,
            inputs.model,
            inputs.tokenizer,
            inputs.dataset.train,
            inputs.fmt,
            inputs.config,
            inputs.output_dir,
            callbacks,
            keeper,
        )

    def before_save(self, trainer: Any) -> None:
        drop_reference(trainer.model)  # the KL term's reference, when --kl-coef is above 0

    def as_conversations(self, train: list[dict[str, Any]]) -> list[dict[str, Any]]:
        # The prompt with a one-character stand-in answer (the job counts completions, not references).
        return [
            {"messages": [*e["messages"], {"role": "assistant", "content": "."}], "tools": e.get("tools")}
            for e in train
        ]

    def completions_per_example(self, config: TrainConfig) -> int:
        return config.num_generations or 1

    def micro_batch(self, config: TrainConfig, batch: int) -> int:
        return grpo_batch(batch, config.num_generations or 1)

    def work(
        self, config: TrainConfig, counts: list[int], train: list[dict[str, Any]]
    ) -> tuple[list[int], float, list[str]]:
        generations = config.num_generations or 1
        completion, source = expected_completion_tokens(train, config.max_completion_length or 0)
        per_prompt = [generations * (count + completion) for count in counts]
        generated = generations * completion
        trained = max(1, sum(per_prompt))
        work = 1 + GENERATED_TOKEN_WORK * generated * len(counts) / trained
        note = (
            f"grpo: {generations} completions per prompt of about {completion} tokens ({source}), generated token "
            f"by token (counted as {GENERATED_TOKEN_WORK:g}x a trained token's work: an assumption) and then "
            "trained on"
        )
        return per_prompt, work, [note]


def expected_completion_tokens(train: list[dict[str, Any]], limit: int) -> tuple[int, str]:
    """(tokens a completion is expected to take, where that figure comes from), for the plan.

    A completion ends at the end of turn, mostly long before `max_completion_length`: a
    plan that counted the limit for every completion overestimated a tiny GRPO run about
    tenfold (9 minutes for 35 s). A line's `reference` is the answer its graders expect,
    so its length is the better guess; a line without one counts the limit.
    """
    from trainkit_core.datasets.validate import CHARS_PER_TOKEN

    references = [e["reference"] for e in train if isinstance(e.get("reference"), str) and e["reference"]]
    if not references or not limit:
        return limit, "max_completion_length: the lines have no reference"
    lengths = [min(limit, math.ceil(len(r) / CHARS_PER_TOKEN) + 1) for r in references]
    lengths += [limit] * (len(train) - len(references))
    source = "the length of the lines' references, at 4 characters a token, plus the end of turn"
    if len(references) < len(train):
        source += f"; max_completion_length for the {len(train) - len(references)} lines without one"
    return round(sum(lengths) / len(lengths)), source


METHOD = Grpo()

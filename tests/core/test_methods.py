"""Methods per run, `--from`, graders and their plugins, without torch.

Against the real `local` provider (SQLite, folders): what `start_run` refuses before
anything is written (a preference or prompt file given to the wrong method, a grader
no plugin provides, a `--from` model that is missing or trained on another base), the
defaults each method takes per preset, the built-in graders, and a grader that raises,
answers NaN or hangs, each failing with its name and the example. A user grader is a
real installed distribution: a module and its ``.dist-info`` (the files pip writes)
on the import path, found through the `trainkit.rewards` entry-point group.
"""

from __future__ import annotations

import json
import math
import sys
import time
from pathlib import Path

import pytest

from trainkit_core import get_provider
from trainkit_core.errors import NotFoundError, PluginLoadError, UsageError
from trainkit_core.rewards import builtin
from trainkit_core.rewards.registry import available_graders, check_reward_names, load_grader
from trainkit_core.rewards.scoring import GraderError, call_grader, call_grader_batch
from trainkit_core.runs.training_run import RunStore
from trainkit_core.training.config import TrainConfig
from trainkit_core.training.submit import start_run

EXAMPLE = {"messages": [{"role": "user", "content": "Opposites: hot early"}], "reference": "cold late."}


@pytest.fixture
def provider(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):  # type: ignore[no-untyped-def]
    root = tmp_path / "datasets"
    for name, fmt, line in (
        ("chatdata", "chat", {"messages": [{"role": "user", "content": "q"}, {"role": "assistant", "content": "a"}]}),
        (
            "prefdata",
            "preference",
            {
                "input": {"messages": [{"role": "user", "content": "q"}]},
                "preferred_output": [{"role": "assistant", "content": "a."}],
                "non_preferred_output": [{"role": "assistant", "content": "a"}],
            },
        ),
        ("promptdata", "prompt", {"messages": [{"role": "user", "content": "q"}], "reference": "a"}),
    ):
        (root / name).mkdir(parents=True)
        (root / name / "dataset.toml").write_text(f'name = "{name}"\nformat = "{fmt}"\ntrain = ["train.jsonl"]\n')
        (root / name / "train.jsonl").write_text(json.dumps(line) + "\n")
    monkeypatch.setenv("TRAINKIT_DATASETS_DIR", str(root))
    return get_provider("local")


@pytest.fixture
def grader_plugin(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """An installed distribution `trainkit-test-graders` providing graders through `trainkit.rewards`."""
    site = tmp_path / "site"
    site.mkdir()
    (site / "test_graders.py").write_text(
        "import time\n"
        "def ends_with_full_stop(completion, example):\n"
        "    return 1.0 if completion.strip().endswith('.') else 0.0\n"
        "def boom(completion, example):\n"
        "    raise RuntimeError('the grader broke')\n"
        "def not_a_number(completion, example):\n"
        "    return float('nan')\n"
        "def hangs(completion, example):\n"
        "    time.sleep(30)\n"
        "    return 1.0\n"
        "def backtracks(completion, example):\n"
        "    import re\n"
        "    return 1.0 if re.search(example['pattern'], completion) else 0.0\n"
        "def shouts(completion, example):\n"
        "    print('graded', completion)\n"
        "    return float(len(completion))\n"
    )
    info = site / "trainkit_test_graders-1.0.dist-info"
    info.mkdir()
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: trainkit-test-graders\nVersion: 1.0\n")
    (info / "entry_points.txt").write_text(
        "[trainkit.rewards]\n"
        "full_stop = test_graders:ends_with_full_stop\n"
        "boom = test_graders:boom\n"
        "not_a_number = test_graders:not_a_number\n"
        "hangs = test_graders:hangs\n"
        "backtracks = test_graders:backtracks\n"
        "shouts = test_graders:shouts\n"
        "missing_module = test_graders_gone:grade\n"
    )
    monkeypatch.syspath_prepend(str(site))
    return site


# ------------------------------------------------------------------ config and defaults


def test_sft_stays_the_default_and_keeps_the_presets_values() -> None:
    config = TrainConfig.parse(dataset="d").resolve()
    assert config.method == "sft" and config.steps == 400 and config.learning_rate == 1e-2
    assert config.dpo_beta is None and config.num_generations is None


def test_each_method_takes_its_defaults_per_preset_before_the_presets() -> None:
    dpo = TrainConfig.parse(dataset="d", method="dpo").resolve()
    assert (dpo.learning_rate, dpo.steps, dpo.dpo_beta, dpo.dpo_loss_type) == (5e-3, 60, 0.1, ["sigmoid", "sft"])
    grpo = TrainConfig.parse(dataset="d", method="grpo", model_size="4b").resolve()
    assert (grpo.learning_rate, grpo.epochs, grpo.num_generations, grpo.kl_coef) == (5e-6, 1.0, 8, 0.0)
    assert grpo.lora_r == 16  # from the preset
    mine = TrainConfig.parse(dataset="d", method="dpo", steps=7, learning_rate=1e-3, dpo_beta=0.5).resolve()
    assert (mine.steps, mine.epochs, mine.learning_rate, mine.dpo_beta) == (7, None, 1e-3, 0.5)


def test_the_recorded_rollout_holds_every_graders_reward_for_a_step_of_many_completions() -> None:
    """Each grader notes a whole step's completions in turn (trl calls them one after the other)."""
    from trainkit_core.training.methods.grpo import ROLLOUT_SAMPLES, RolloutKeeper

    keeper = RolloutKeeper()
    step = [(f"<p{i // 8}>", f"answer {i}") for i in range(64)]  # 8 prompts x 8 completions
    for grader in ("exact_match", "fuzzy"):
        for prompt, completion in step:
            keeper.note(grader, prompt, completion, 1.0, prompt)
    samples = keeper.take()
    assert [s["completion"] for s in samples] == [c for _, c in step[-ROLLOUT_SAMPLES:]]
    assert all(set(s["rewards"]) == {"exact_match", "fuzzy"} for s in samples)
    assert keeper.take() == []  # taken once


@pytest.mark.parametrize(
    ("fields", "words"),
    [
        ({"method": "ppo"}, "method"),
        ({"dpo_beta": 0.1}, "dpo_beta is an option of --method dpo"),
        ({"method": "dpo", "rewards": ["exact_match"]}, "rewards is an option of --method grpo"),
        ({"method": "grpo", "rewards": ["exact match"]}, "not NAME or NAME=WEIGHT"),
        ({"method": "grpo", "rewards": ["exact_match=heavy"]}, "'heavy' is not a number"),
        ({"method": "grpo", "rewards": ["exact_match=inf"]}, "finite"),
        ({"from_model": "../trained/x"}, "from_model"),
        ({"from_model": "trained/not-a-run"}, "not a run id"),
        ({"method": "grpo", "num_generations": 1}, "num_generations"),
    ],
)
def test_bad_method_options_are_refused_naming_the_field(fields: dict[str, object], words: str) -> None:
    with pytest.raises(UsageError, match="invalid training config") as err:
        TrainConfig.parse(dataset="d", **fields)
    assert words in err.value.message


def test_from_takes_a_run_id_or_its_model_path() -> None:
    assert TrainConfig.parse(dataset="d", from_model="run-20261202-120000-abcdef").from_model == (
        "trained/run-20261202-120000-abcdef"
    )
    path = "trained/run-20261202-120000-abcdef/checkpoints/00000050"
    assert TrainConfig.parse(dataset="d", from_model=path).from_model == path


# ------------------------------------------------------------------ refused before anything starts


@pytest.mark.parametrize(
    ("fields", "error", "words"),
    [
        ({"dataset": "prefdata"}, UsageError, "--method dpo trains on preference data"),
        ({"dataset": "promptdata", "method": "dpo"}, UsageError, "--method grpo trains on prompt data"),
        ({"dataset": "chatdata", "method": "grpo", "rewards": ["exact_match"]}, UsageError, '"prompt"'),
        ({"dataset": "promptdata", "method": "grpo"}, UsageError, "needs at least one grader"),
        ({"dataset": "promptdata", "method": "grpo", "rewards": ["exact_macth"]}, UsageError, "no grader named"),
        (
            {"dataset": "prefdata", "method": "dpo", "from_model": "trained/run-20261202-120000-abcdef"},
            NotFoundError,
            "no trained model",
        ),
    ],
)
def test_wrong_data_graders_or_models_are_refused_and_leave_no_run(provider, fields, error, words) -> None:  # type: ignore[no-untyped-def]
    with pytest.raises(error) as err:
        start_run(provider, fields)
    assert words in f"{err.value.message} ({err.value.hint})"
    assert RunStore.for_provider(provider).list() == []
    assert not provider.volume("data").exists(f"datasets/{fields['dataset']}")  # nothing synced either


def _trained(provider, run_id: str, base: str, preset: str, config: dict[str, object]) -> str:  # type: ignore[no-untyped-def]
    """A trained model's folder as a run leaves it (the files the checks read)."""
    volume = provider.volume("models")
    card = {"run_id": run_id, "base_model": base, "preset": preset, "chat_format": "gemma3", "config": config}
    volume.write_bytes(f"trained/{run_id}/trained_model.json", json.dumps(card).encode())
    volume.write_bytes(f"trained/{run_id}/adapter_config.json", b"{}")
    volume.write_bytes(f"trained/{run_id}/adapter_model.safetensors", b"")
    return f"trained/{run_id}"


def test_from_a_model_of_another_base_is_refused(provider) -> None:  # type: ignore[no-untyped-def]
    path = _trained(provider, "run-20261202-120000-abcdef", "google/gemma-3-4b-it", "4b", {"lora_r": 16})
    with pytest.raises(UsageError, match="trained on 'google/gemma-3-4b-it', not on 'trainkit/tiny-gemma'"):
        start_run(provider, {"dataset": "prefdata", "method": "dpo", "model_size": "tiny", "from_model": path})
    with pytest.raises(UsageError, match="lora_r is 16 in its adapter"):
        start_run(provider, {"dataset": "prefdata", "method": "dpo", "lora_r": 8, "from_model": path})
    assert RunStore.for_provider(provider).list() == []


def test_from_takes_the_trained_models_base_and_adapter_shape() -> None:
    from trainkit_core.training.start_from import apply_source

    card = {"base_model": "trainkit/tiny-gemma", "preset": "tiny", "config": {"lora_r": 4, "lora_alpha": 8}}
    config = apply_source(TrainConfig.parse(dataset="d", from_model="run-20261202-120000-abcdef"), card).resolve()
    assert (config.model_size, config.lora_r, config.lora_alpha) == ("tiny", 4, 8)
    card = {"base_model": "google/gemma-3-4b-it", "preset": "", "config": {}}
    config = apply_source(TrainConfig.parse(dataset="d", from_model="run-20261202-120000-abcdef"), card)
    assert config.base_model == "google/gemma-3-4b-it" and config.model_size is None


# ------------------------------------------------------------------ graders


@pytest.mark.ml  # the `regex` grader needs the `regex` package of trainkit-core[train]
def test_built_in_graders() -> None:
    assert builtin.exact_match(" cold late. ", EXAMPLE) == 1.0 and builtin.exact_match("cold late", EXAMPLE) == 0.0
    assert builtin.contains("it is cold late. yes", EXAMPLE) == 1.0 and builtin.contains("cold", EXAMPLE) == 0.0
    assert builtin.regex("abc 42", {"pattern": r"\d+$"}) == 1.0 and builtin.regex("abc", {"pattern": r"\d"}) == 0.0
    assert builtin.json_valid('{"a": [1]}', {}) == 1.0 and builtin.json_valid("{a: 1}", {}) == 0.0
    assert builtin.length_penalty("", {}) == 0.0 and builtin.length_penalty("x" * 50, {"max_chars": 100}) == -0.5
    assert builtin.length_penalty("x" * 500, {}) == -1.0
    with pytest.raises(KeyError, match="'reference'"):
        builtin.exact_match("x", {"messages": []})


def test_a_grader_that_raises_or_answers_nan_or_hangs_fails_naming_itself_and_the_example() -> None:
    def boom(completion: str, example: object) -> float:
        raise ValueError("bad input")

    def hangs(completion: str, example: object) -> float:
        time.sleep(30)
        return 1.0

    cases = [
        ("boom", boom, "grader 'boom' raised ValueError: bad input"),
        ("nan", lambda c, e: math.nan, "grader 'nan' returned nan, not a finite number"),
        ("inf", lambda c, e: -math.inf, "not a finite number"),
        ("text", lambda c, e: "1", "returned str '1', not a number"),
        ("none", lambda c, e: None, "returned NoneType None, not a number"),
        ("hangs", hangs, "grader 'hangs' ran past its timeout of 0.3 s"),
    ]
    for name, grader, words in cases:
        started = time.monotonic()
        with pytest.raises(GraderError) as err:
            call_grader(name, grader, "cold late.", EXAMPLE, timeout_s=0.3)
        assert words in err.value.message
        assert "Opposites: hot early" in err.value.message  # the example
        assert time.monotonic() - started < 5
    assert call_grader("exact_match", builtin.exact_match, "cold late.", EXAMPLE, timeout_s=5) == 1.0


def test_a_batch_of_calls_times_each_call_and_names_the_example_that_failed() -> None:
    examples = [{**EXAMPLE, "messages": [{"role": "user", "content": f"prompt number {i}"}]} for i in range(4)]

    def slow_on_the_third(completion: str, example: dict) -> float:
        if example is examples[2]:
            time.sleep(30)
        time.sleep(0.2)  # four calls take longer than one call's limit: the limit is per call
        return float(len(completion))

    calls = [("ab", examples[0]), ("abc", examples[1])]
    assert call_grader_batch("slow", slow_on_the_third, calls, timeout_s=0.35) == [2.0, 3.0]
    with pytest.raises(GraderError, match=r"ran past its timeout of 0\.35 s on example .*prompt number 2"):
        call_grader_batch("slow", slow_on_the_third, [("x", e) for e in examples], timeout_s=0.35)

    def fails_on_the_second(completion: str, example: dict) -> float:
        if example is examples[1]:
            return math.nan
        return 1.0

    with pytest.raises(GraderError, match=r"returned nan, not a finite number, on example .*prompt number 1"):
        call_grader_batch("nan", fails_on_the_second, [("x", e) for e in examples], timeout_s=5)


def test_a_user_grader_installed_as_a_plugin_is_found_by_name(grader_plugin: Path) -> None:
    assert check_reward_names(["full_stop=2", "exact_match"]) == [("full_stop", 2.0), ("exact_match", 1.0)]
    assert available_graders()[: len(builtin.BUILTIN_GRADERS)] == list(builtin.BUILTIN_GRADERS)
    assert "full_stop" in available_graders()
    grader = load_grader("full_stop")
    assert call_grader("full_stop", grader, "done.", EXAMPLE, timeout_s=5) == 1.0
    with pytest.raises(GraderError, match="grader 'boom' raised RuntimeError: the grader broke"):
        call_grader("boom", load_grader("boom"), "x", EXAMPLE, timeout_s=5)
    with pytest.raises(PluginLoadError, match=r"grader plugin 'missing_module' .*failed to import"):
        load_grader("missing_module")
    with pytest.raises(UsageError, match="no grader named 'nope'; available: exact_match, contains") as err:
        check_reward_names(["nope"])
    assert "full_stop" in err.value.message


def test_the_cli_refuses_a_grader_no_plugin_provides(provider, grader_plugin: Path) -> None:  # type: ignore[no-untyped-def]
    sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "cli"))
    from cli_helpers import run_main

    status, output = run_main(
        "train", "--dataset", "promptdata", "--method", "grpo", "--reward", "full_stop", "--reward", "polite=0.5"
    )
    assert status == 2, output
    assert "no grader named 'polite'" in output and "Traceback" not in output
    status, output = run_main("train", "--dataset", "prefdata", "--method", "sft")
    assert status == 2 and "--method dpo trains on preference data" in output, output


_CATASTROPHIC_GRADE = """
import json, sys
from trainkit_core.rewards.scoring import GraderError
from trainkit_core.training.config import TrainConfig
from trainkit_core.training.methods.grpo import RolloutKeeper, reward_functions

pattern, completion = sys.argv[1], sys.argv[2]
config = TrainConfig.parse({"dataset": "demo", "method": "grpo", "rewards": ["regex"], "reward_timeout_s": 2})
example = {"messages": [{"role": "user", "content": "Say it"}], "pattern": pattern}
(reward,), _ = reward_functions(config, {"<prompt>": example}, RolloutKeeper())
try:
    print(json.dumps({"scores": reward(["<prompt>"], [completion])}))
except GraderError as exc:
    print(json.dumps({"error": exc.message}))
"""


@pytest.mark.parametrize(
    ("pattern", "completion", "outcome"),
    [
        # A pattern from the data: `re` backtracks on it for ages while holding the GIL.
        ("(.|.)*(.|.)*(.|.)*QQQ", "a" * 60, {"scores": [0.0]}),
        # One that backtracks in the `regex` engine too: its time bound ends it.
        (r"(\w+\s?)*$", "a" * 5000 + "!", "ran past"),
    ],
)
@pytest.mark.ml  # the GRPO reward path (trl) and the `regex` package of trainkit-core[train]
def test_a_catastrophic_pattern_ends_on_the_grpo_grader_path(pattern: str, completion: str, outcome: object) -> None:
    """The run's `--reward-timeout` bounds the built-in regex grader's work; it once never fired
    (`re` held the GIL) and the job hung until Modal's 2-hour limit. Run in a child process: the old code
    would hang this test, so the only time asserted is a generous "it ends"."""
    import subprocess

    try:
        done = subprocess.run(
            [sys.executable, "-c", _CATASTROPHIC_GRADE, pattern, completion],
            capture_output=True,
            text=True,
            timeout=240,
        )
    except subprocess.TimeoutExpired:
        pytest.fail(f"grading with {pattern!r} did not end")
    assert done.returncode == 0, done.stderr
    answer = json.loads(done.stdout.strip().splitlines()[-1])
    if isinstance(outcome, dict):
        assert answer == outcome
    else:
        # The wait and the engine's own bound are both the timeout: either may say so first.
        assert "grader 'regex'" in answer["error"] and "ran past" in answer["error"] and "2 s" in answer["error"]
        assert "Say it" in answer["error"]  # the example is named


def test_a_plugin_grader_holding_the_gil_is_stopped_by_its_timeout_and_holds_up_nothing(
    grader_plugin: Path,
) -> None:
    """A plugin grader backtracking in `re` (which holds the GIL) runs in a process of its own on the
    GRPO path: the job's other threads (its writers, the stop flag's reader) go on meanwhile, and its
    timeout kills it. It once ran on a thread of the job, and this test hung."""
    import threading

    from trainkit_core.training.methods.grpo import RolloutKeeper, reward_functions

    config = TrainConfig.parse(
        {"dataset": "demo", "method": "grpo", "rewards": ["backtracks", "shouts", "boom"], "reward_timeout_s": 2}
    )
    example = {"messages": [{"role": "user", "content": "Say it"}], "pattern": "(.|.)*(.|.)*(.|.)*QQQ"}
    (backtracks, shouts, boom), weights = reward_functions(config, {"<p>": example}, RolloutKeeper())
    assert weights == [1.0, 1.0, 1.0]
    assert backtracks(["<p>"], ["short"]) == [0.0] and shouts(["<p>", "<p>"], ["ab", "abcd"]) == [2.0, 4.0]

    ticks = []
    stop = threading.Event()

    def other_thread() -> None:  # stands for the job's background writers and the stop flag's reader
        while not stop.is_set():
            ticks.append(time.monotonic())
            time.sleep(0.05)

    ticker = threading.Thread(target=other_thread, daemon=True)
    ticker.start()
    try:
        with pytest.raises(GraderError, match=r"grader 'backtracks' ran past its timeout of 2 s on example .*Say it"):
            backtracks(["<p>"], ["a" * 60])
    finally:
        stop.set()
        ticker.join()
    assert len(ticks) > 2  # the other thread kept running meanwhile
    # The next call starts a fresh process; a grader's error still names it and the example.
    assert backtracks(["<p>"], ["QQQ"]) == [1.0]
    with pytest.raises(GraderError, match="grader 'boom' raised RuntimeError: the grader broke on example"):
        boom(["<p>"], ["x"])


def test_a_grpo_run_whose_reward_did_not_rise_says_so_with_what_to_try() -> None:
    from trainkit_core.training.methods.grpo import reward_verdict

    def history(rewards: list[float], zero: float) -> list[dict[str, float]]:
        logged = [{"reward": r, "frac_reward_zero_std": zero, "loss": 0.1} for r in rewards]
        return [*logged, {"train_runtime": 12.0}]  # trl's last entry: the run's summary, no reward

    metrics, warnings = reward_verdict(history([0.2, 0.25, 0.4, 0.6, 0.7, 0.8], 0.2))
    assert warnings == [] and metrics["reward_rise"] > 0.3 and metrics["zero_advantage_share"] == 0.2
    assert (metrics["reward_first"], metrics["reward_last"]) == (0.225, 0.75)  # two logged steps at each end

    metrics, [warning] = reward_verdict(history([0.2, 0.2, 0.2, 0.16, 0.18, 0.16], 0.9))
    assert metrics["reward_rise"] < 0 and "did not rise: 0.200 over the first" in warning
    assert "in 90% of the groups every completion scored the same" in warning and "temperature" in warning
    [warning] = reward_verdict(history([0.5, 0.5, 0.5], 0.1))[1]
    assert "learning rate" in warning and "90%" not in warning
    assert reward_verdict([{"loss": 1.0}]) == ({}, [])  # nothing logged: nothing to say

"""What a job needs (`trainkit_core.plugins.placement`): public data any provider reads, and hands to a runner."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import pytest

from trainkit_core.models.presets import PRESETS
from trainkit_core.plugins.placement import Placement, placement_for, placement_of, split_gpu
from trainkit_core.settings import Settings


@pytest.fixture
def settings(monkeypatch: pytest.MonkeyPatch, tmp_path: Any) -> Settings:
    for key in ("TRAINKIT_GPU", "TRAINKIT_TRAIN_TIMEOUT_S"):
        monkeypatch.delenv(key, raising=False)
    monkeypatch.setenv("TRAINKIT_HOME", str(tmp_path))
    return Settings.from_env()


def test_a_31b_run_needs_the_31b_presets_gpu_without_the_provider_knowing_presets(settings: Settings) -> None:
    placed = placement_for("train", {"model_size": "31b"}, settings)
    kind, count = split_gpu(PRESETS["31b"].gpu)
    assert (placed.gpu, placed.gpu_count) == (kind, count) and kind is not None
    assert placed.timeout_s == settings.compute.train_timeout_s
    assert (
        placed.memory_gb is not None
        and placed.memory_gb > placement_for("train", {"model_size": "4b"}, settings).memory_gb
    )  # type: ignore[operator]


def test_gpu_choice_order_run_then_setting_then_preset(monkeypatch: pytest.MonkeyPatch, settings: Settings) -> None:
    assert placement_for("eval", {"model_size": "4b", "gpu": "h100:2"}, settings).gpu == "H100"
    assert placement_for("eval", {"model_size": "4b", "gpu": "h100:2"}, settings).gpu_count == 2
    monkeypatch.setenv("TRAINKIT_GPU", "L40S")
    assert placement_for("eval", {"model_size": "4b"}, Settings.from_env()).gpu == "L40S"


def test_light_jobs_run_on_cpu(settings: Settings) -> None:
    assert placement_for("ping", {}, settings) == Placement()
    assert placement_for("train", {"model_size": "tiny"}, settings).gpu is None


def test_placement_round_trips_as_json_data() -> None:
    placed = Placement(gpu="A100-80GB", gpu_count=1, memory_gb=64, timeout_s=7200)
    assert Placement.from_dict(placed.as_dict()) == placed


class _Recording:
    """A runner that takes `placement`: the facade hands it the job's."""

    def __init__(self) -> None:
        self.calls: list[tuple[str, dict[str, Any], Placement | None]] = []

    def spawn(self, function: str, kwargs: Mapping[str, Any], placement: Placement | None = None) -> Any:
        self.calls.append((function, dict(kwargs), placement))
        raise LookupError("recorded")


def test_the_facade_hands_a_train_calls_placement_read_from_its_run(
    settings: Settings, monkeypatch: pytest.MonkeyPatch
) -> None:
    """`spawn("train", run_id=…)` says nothing of the GPU; the placement comes from the run's config."""
    from trainkit_core.plugins.provider import get_provider
    from trainkit_core.runs.training_run import RUNS_NAMESPACE

    provider = get_provider("local", settings)
    provider.kv(RUNS_NAMESPACE).put("run-1", {"config": {"model_size": "12b", "dataset": "demo"}})
    assert placement_of(provider, "train", {"run_id": "run-1"}).gpu == split_gpu(PRESETS["12b"].gpu)[0]
    runner = _Recording()
    monkeypatch.setattr(provider, "runner", lambda: runner)
    with pytest.raises(LookupError):
        provider.spawn("train", run_id="run-1")
    [(function, kwargs, placement)] = runner.calls
    assert (function, kwargs) == ("train", {"run_id": "run-1"})
    assert placement == placement_for("train", {"model_size": "12b"}, settings)


def test_a_trained_model_runs_where_its_run_trained(settings: Settings) -> None:
    """Inference or eval of ``trained/<run id>…`` names no size: the run's config gives it (tiny: on CPU)."""
    from trainkit_core.plugins.provider import get_provider
    from trainkit_core.runs.training_run import RUNS_NAMESPACE

    provider = get_provider("local", settings)
    runs = provider.kv(RUNS_NAMESPACE)
    runs.put("run-20261202-140107-0b630e", {"config": {"model_size": "tiny", "dataset": "demo"}})
    runs.put("run-20261202-140107-aaaaaa", {"config": {"model_size": "12b", "gpu": "H100"}})
    tiny = placement_for("infer", {"model_size": "tiny"}, settings)
    for job, path in [
        ("infer", "trained/run-20261202-140107-0b630e"),
        ("eval", "trained/run-20261202-140107-0b630e/checkpoints/00000015"),
    ]:
        placed = placement_of(provider, job, {"model_path": path, "model_size": None})
        assert (placed.gpu, placed.gpu_count, placed.memory_gb) == (tiny.gpu, 0, tiny.memory_gb), job
    # The run's own GPU choice carries over; a call's explicit size or GPU wins over the run's.
    big = placement_of(provider, "infer", {"model_path": "trained/run-20261202-140107-aaaaaa"})
    assert (big.gpu, big.memory_gb) == ("H100", placement_for("infer", {"model_size": "12b"}, settings).memory_gb)
    own = placement_of(provider, "infer", {"model_path": "trained/run-20261202-140107-aaaaaa", "gpu": "L4"})
    assert own.gpu == "L4"
    sized = placement_of(provider, "infer", {"model_path": "trained/run-20261202-140107-0b630e", "model_size": "4b"})
    assert sized == placement_for("infer", {"model_size": "4b"}, settings)
    # A model path of no known run, or not a trained one, keeps the default size's hardware.
    unknown = placement_of(provider, "infer", {"model_path": "trained/run-20991231-000000-ffffff"})
    assert unknown == placement_for("infer", {}, settings) == placement_of(provider, "infer", {"model_path": "x/y"})


def test_a_trained_model_whose_record_is_forgotten_is_placed_by_its_card(settings: Settings) -> None:
    """A key-value store may forget a run (Modal's Dict, a week idle): the model's card still sizes it."""
    import json

    from trainkit_core.models.trained.paths import CARD_FILE
    from trainkit_core.plugins.provider import get_provider

    provider = get_provider("local", settings)
    run_id = "run-20261101-120000-abc123"
    card = {"run_id": run_id, "base_model": "google/gemma-3-12b-it", "preset": "12b", "chat_format": "gemma3"}
    provider.volume("models").write_bytes(f"trained/{run_id}/{CARD_FILE}", json.dumps(card).encode())
    placed = placement_of(provider, "eval", {"model_path": f"trained/{run_id}/checkpoints/00000010"})
    assert placed == placement_for("eval", {"model_size": "12b"}, settings) != placement_for("eval", {}, settings)


def test_a_train_call_for_a_run_with_no_record_is_refused_before_anything_starts(
    settings: Settings, monkeypatch: pytest.MonkeyPatch
) -> None:
    from trainkit_core.errors import NotFoundError
    from trainkit_core.plugins.provider import get_provider

    provider = get_provider("local", settings)
    runner = _Recording()
    monkeypatch.setattr(provider, "runner", lambda: runner)
    with pytest.raises(NotFoundError, match="no run 'run-20261101-120000-ffffff' to train"):
        provider.spawn("train", run_id="run-20261101-120000-ffffff")
    assert runner.calls == []


def test_the_runs_namespace_is_the_runs_modules() -> None:
    from trainkit_core.plugins import placement
    from trainkit_core.runs import training_run as runs

    assert placement.RUNS_NAMESPACE == runs.RUNS_NAMESPACE

"""The GPU check (`scripts/gpu_check.py`): its CPU dry run end to end, so it cannot rot between lent devices.

The `ml` tests run the script as a user would (`--dry-run-cpu`: the tiny preset through
the real `train` job with the hf backend, the adapter gate, inference's loading, stop
and resume, each in its own process) and check the real configurations' sizes on the
meta device. The others check its torch-free logic: what runs when Unsloth or
bitsandbytes is missing, the fit against a GPU, the 31b estimate, the dataset.
"""

from __future__ import annotations

import importlib.util
import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

REPO = Path(__file__).resolve().parents[2]
SCRIPT = REPO / "scripts" / "gpu_check.py"


def _load() -> Any:
    spec = importlib.util.spec_from_file_location("gpu_check", SCRIPT)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


gpu_check = _load()
ALL = {"unsloth": True, "bitsandbytes": True}


def test_both_backends_run_in_4bit_when_everything_is_installed() -> None:
    assert gpu_check.plan(ALL, ["unsloth", "hf"], dry_run_cpu=False) == (["unsloth", "hf"], True, [])


def test_without_unsloth_the_hf_backend_still_runs_and_the_report_says_why() -> None:
    runnable, quantized, skipped = gpu_check.plan({"bitsandbytes": True}, ["unsloth", "hf"], dry_run_cpu=False)
    assert runnable == ["hf"] and quantized
    assert skipped == ["unsloth backend: unsloth is not installed"]


def test_without_bitsandbytes_unsloth_is_skipped_and_hf_trains_in_bf16() -> None:
    runnable, quantized, skipped = gpu_check.plan({"unsloth": True}, ["unsloth", "hf"], dry_run_cpu=False)
    assert runnable == ["hf"] and not quantized
    assert "bitsandbytes is not installed" in skipped[0] and skipped[0].startswith("unsloth backend")
    assert "bf16" in skipped[1]


def test_the_dry_run_never_quantizes() -> None:
    assert gpu_check.plan(ALL, ["hf"], dry_run_cpu=True) == (["hf"], False, [])


def test_a_peak_fits_a_gpu_only_with_ten_percent_free() -> None:
    a10g = 23_028 * 2**20
    assert gpu_check.fit("A10G", 0.85 * a10g)["fits"] is True
    tight = gpu_check.fit("A10G", 0.95 * a10g)
    assert tight["fits"] is False and tight["headroom_gib"] == pytest.approx(0.05 * a10g / 2**30, abs=0.01)
    assert gpu_check.fit("A100-80GB", 90 * 2**30)["headroom_gib"] < 0
    assert gpu_check.fit("no-such-gpu", 1)["fits"] is None


def test_the_31b_estimate_scales_the_largest_measured_4bit_peak() -> None:
    def part(params: int, peak: float, quantized: bool = True) -> dict[str, Any]:
        return {"status": "ok", "quantized": quantized, "params": params, "memory": {"device_peak_bytes": peak}}

    report = {
        "sizes": {
            "4b": {"train_unsloth": part(4_300_000_000, 8 * 2**30)},
            "12b": {"train_hf": part(12_200_000_000, 18 * 2**30), "train_unsloth": part(12_200_000_000, 9e20, False)},
        }
    }
    est = gpu_check.estimate_31b(report)
    assert est["from"] == "12b hf"
    assert est["estimated_peak_gib"] == pytest.approx(18 * 31e9 / 12.2e9, abs=0.1)
    assert est["gpu"] == "A100-80GB" and est["fits"] is True
    assert gpu_check.estimate_31b({"sizes": {"4b": {"train_hf": {"status": "failed"}}}}) is None


def test_the_check_dataset_passes_validation_with_every_row_at_the_limit(tmp_path: Path) -> None:
    from trainkit_core.datasets.validate import LengthCheck

    folder = gpu_check.write_dataset(tmp_path, "gpu-check-4b", examples=5, max_seq_length=2048)
    rows = [json.loads(line) for line in (folder / "train.jsonl").read_text().splitlines()]
    assert len(rows) == 5 and len({r["messages"][1]["content"] for r in rows}) == 5
    limit = LengthCheck.estimate(2048)

    class Example:
        def __init__(self, messages: list[dict[str, str]]) -> None:
            self.messages = [(m["role"], m["content"]) for m in messages]
            self.chars = sum(len(m["content"]) for m in messages)

    counts = [limit.count(Example(r["messages"])) for r in rows]  # type: ignore[arg-type]
    assert all(1800 < c <= 2048 for c in counts), counts


def test_sizes_it_cannot_build_are_refused() -> None:
    with pytest.raises(SystemExit) as exc:
        gpu_check.parse_args(["--sizes", "31b"])
    assert exc.value.code == 2
    with pytest.raises(SystemExit):
        gpu_check.parse_args(["--sizes", "tiny"])  # tiny is the dry run's
    assert gpu_check.parse_args(["--dry-run-cpu"]).sizes == ["tiny"]


def _script(tmp_path: Path, *args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, str(SCRIPT), "--work", str(tmp_path / "work"), *args],
        capture_output=True,
        text=True,
        timeout=900,
        env={**os.environ, **(env or {})},
    )


@pytest.mark.ml
def test_the_dry_run_trains_gates_serves_stops_and_resumes_through_the_train_job(tmp_path: Path) -> None:
    done = _script(tmp_path, "--dry-run-cpu", "--json-out", str(tmp_path / "report.json"))
    assert done.returncode == 0, done.stderr[-4000:] + done.stdout[-4000:]
    report = json.loads(done.stdout)
    assert report == json.loads((tmp_path / "report.json").read_text())
    assert report["verdict"] == "passed" and report["machine"]["cuda"] is False
    tiny = report["sizes"]["tiny"]
    train = tiny["train_hf"]
    assert train["run_status"] == "succeeded" and train["framework"] == "hf" and train["step"] == 4
    assert train["timing"]["tokens_per_step"] == 4 * 64  # every row is a full max_seq_length
    assert train["timing"]["tokens_per_s"] > 0 and train["memory"]["device"] == "cpu"
    assert train["metrics"]["gate_effect_max_abs_diff"] > 1e-3  # the run's own gate passed
    inference = train["inference"]
    assert inference["passed"] and inference["tolerance"] == 1e-4 and "ModelCache" in inference["loaded"]
    assert inference["max_abs_diff"] <= 1e-4 and inference["argmax_agreement"] == 1.0
    stop, resume = tiny["stop_resume"]["stop"], tiny["stop_resume"]["resume"]
    # Asked at the end of step 1, the stop lands at the end of a step soon after (the flag is
    # read off the step's path), well before the run's end; the resume finishes the run from there.
    target = stop["target_steps"]
    assert stop["run_status"] == "stopped" and stop["checkpoint_step"] == stop["step"]
    assert 1 <= stop["step"] < target
    assert resume["run_id"] == stop["run_id"] and resume["run_status"] == "succeeded"
    assert resume["resumed_from_step"] == stop["step"] and resume["step"] == target
    assert "verdict: passed" in done.stderr and "train_hf" in done.stderr  # the table


@pytest.mark.ml
def test_without_a_gpu_it_says_so_and_exits_2_without_a_traceback(tmp_path: Path) -> None:
    done = _script(tmp_path, env={"CUDA_VISIBLE_DEVICES": ""})
    assert done.returncode == 2
    report = json.loads(done.stdout)
    assert report["verdict"] == "no-gpu" and "no CUDA GPU" in report["skipped"][0]
    assert "Traceback" not in done.stderr


@pytest.mark.ml
@pytest.mark.parametrize("size", ["4b", "12b"])
def test_the_built_models_have_the_real_checkpoints_sizes(size: str) -> None:
    import torch
    from transformers import Gemma3ForConditionalGeneration

    with torch.device("meta"):
        model = Gemma3ForConditionalGeneration(gpu_check.gemma3_config(size))
    text = sum(p.numel() for n, p in model.named_parameters() if "language_model" in n)
    vision = sum(p.numel() for n, p in model.named_parameters() if "vision_tower" in n)
    assert text == gpu_check.TEXT_PARAMS[size]
    assert vision == 416_866_032  # SigLIP-So400m without its head, as in Gemma 3
    assert model.config.text_config.layer_types[:6] == ["sliding_attention"] * 5 + ["full_attention"]

#!/usr/bin/env python3
"""The GPU check: the real-size presets trained through trainkit's own `train` job on one CUDA GPU.

Why: every test trains the `tiny` model on a CPU, so Unsloth's 4-bit training,
bitsandbytes' 4-bit inference and the preset -> GPU table had never executed. This
script, run once on a lent GPU machine (no network, no Gemma weights), proves them:

1. **build**: a randomly initialised model with the real architecture and size of a
   preset (`Gemma3ForConditionalGeneration` with Gemma 3 4B's / 12B's real text and
   vision configurations, from transformers' ``convert_gemma3_weights.py``), saved in
   the Hugging Face cache layout of the local provider's hf-cache volume under the
   preset's own id (``google/gemma-3-4b-it``, and Unsloth's 4-bit id as an alias), with
   a tokenizer built locally (trainkit's tiny-tokenizer builder, Gemma's special tokens).
   The job then loads "the preset" offline, exactly as it would load the real one.
2. **train**: `trainkit_core.training.submit.start_run` (config checks, dataset sync,
   the run record), then the `train` job function that providers call
   (`trainkit_core.jobs.resolve("train")`), in this process instead of a detached
   worker, with each backend (Unsloth in 4-bit, hf) at the preset's batch,
   accumulation and sequence length (every row is a full `max_seq_length`).
   Measured: tokens/s and step time (first step left out: warm-up), peak GPU memory
   (allocated, reserved, and the device's own use with the CUDA context), and whether
   that fits the preset's default GPU with 10 % headroom. The 31b row is an estimate:
   the measured bytes per parameter times 31e9.
3. **gate + inference**: the run's own adapter gate (`training.post`) must pass; then
   the saved adapter is loaded the way inference loads it (`ModelCache`: base in
   4-bit with bitsandbytes on CUDA, fp32 on a CPU) and its logits on the gate's fixed
   prompts are compared with the trained model's (captured in the job, just before
   the gate). Tolerance: the gate's own, 5e-2 max abs diff in 4-bit or bf16
   (`QUANTIZED_TOL`), 1e-4 in fp32 (`ROUND_TRIP_TOL`).
4. **stop / resume**: a run is stopped through its stop flag after its first step
   (as `trainkit runs stop` does), ends `stopped` with a checkpoint, and is resumed by
   `resume_run` in a new process to its last step.

Each part runs in its own process (this script started again with ``--child``):
Unsloth patches transformers and trl when imported, and a process keeps its cached
GPU memory, so neither backend's patches nor its memory may leak into the other's
figures. The parent imports nothing heavy. A missing optional part (Unsloth,
bitsandbytes, or time) is reported as skipped with the reason, never as a traceback;
a part that fails reports its error and the end of its log.

Output: a table on stderr, then one JSON document on stdout (also written to
``--json-out``). Exit 0 when every part that ran passed, 1 when one failed, 2 when
there is no CUDA GPU (use ``--dry-run-cpu``: `tiny`, hf backend, CPU; the test suite
runs it so the script cannot rot). Procedure and wheel list: docs/developer/records/gpu-check.md.
"""

from __future__ import annotations

import argparse
import importlib.util
import itertools
import json
import os
import platform
import random
import resource
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
CORE_SRC = REPO / "packages" / "trainkit-core" / "src"

# ---------------------------------------------------------------------- the real models

#: Gemma 3's text configuration shared by 4B and 12B (transformers'
#: ``models/gemma3/convert_gemma3_weights.py``, ``_VARIANTS``; Google's config.json).
TEXT_COMMON: dict[str, Any] = {
    "vocab_size": 262_208,
    "head_dim": 256,
    "sliding_window": 1024,
    "query_pre_attn_scalar": 256,
    "max_position_embeddings": 131_072,
    "attn_logit_softcapping": None,
    "final_logit_softcapping": None,
    "rms_norm_eps": 1e-6,
    "hidden_activation": "gelu_pytorch_tanh",
}
#: RoPE: linear scaling x8 on the global layers (theta 1e6), theta 1e4 on the local ones.
ROPE_PARAMETERS = {
    "full_attention": {"rope_type": "linear", "factor": 8.0, "rope_theta": 1_000_000.0},
    "sliding_attention": {"rope_type": "default", "rope_theta": 10_000.0},
}
ROPE_LEGACY = {
    "rope_scaling": {"rope_type": "linear", "factor": 8.0},
    "rope_theta": 1_000_000.0,
    "rope_local_base_freq": 10_000.0,
}
TEXT_SIZES: dict[str, dict[str, int]] = {
    "4b": {
        "hidden_size": 2560,
        "intermediate_size": 10240,
        "num_hidden_layers": 34,
        "num_attention_heads": 8,
        "num_key_value_heads": 4,
    },
    "12b": {
        "hidden_size": 3840,
        "intermediate_size": 15360,
        "num_hidden_layers": 48,
        "num_attention_heads": 16,
        "num_key_value_heads": 8,
    },
}
#: Text parameters of the real checkpoints: keras-hub's gemma3 presets (3,880,099,328 and
#: 11,765,788,416 for 262,144 tokens) plus the 64 extra embedding rows of the HF vocabulary.
TEXT_PARAMS = {"4b": 3_880_099_328 + 64 * 2560, "12b": 11_765_788_416 + 64 * 3840}
#: SigLIP vision tower of Gemma 3 4B/12B/27B (same source).
VISION: dict[str, Any] = {
    "model_type": "siglip_vision_model",
    "hidden_size": 1152,
    "intermediate_size": 4304,
    "num_hidden_layers": 27,
    "num_attention_heads": 16,
    "num_channels": 3,
    "image_size": 896,
    "patch_size": 14,
    "hidden_act": "gelu_pytorch_tanh",
    "layer_norm_eps": 1e-6,
    "attention_dropout": 0.0,
    "vision_use_head": False,
}
MULTIMODAL = {
    "mm_tokens_per_image": 256,
    "boi_token_index": 255_999,
    "eoi_token_index": 256_000,
    "image_token_index": 262_144,
}

#: Memory of each provider GPU as nvidia-smi reports it (MiB). The presets' defaults:
#: 4b A10G (24 GB), 12b A100 (40 GB), 31b A100-80GB.
GPU_MIB = {
    "A10G": 23_028,
    "A10": 23_028,
    "L4": 23_034,
    "A100": 40_960,
    "A100-40GB": 40_960,
    "A100-80GB": 81_920,
    "L40S": 46_068,
    "H100": 81_559,
    "H200": 143_771,
}
#: A peak fits a GPU when it leaves at least this share of the card free.
HEADROOM = 0.10
#: Parameters of the 31b preset's model (Gemma 4 31B, as named) for the estimate.
PARAMS_31B = 31e9
#: The logits comparison's tolerances (the gate's own, `trainkit_core.training.post`).
QUANTIZED_TOL = 5e-2
FP32_TOL = 1e-4

BACKENDS = ("unsloth", "hf")
DATASET = "gpu-check"
#: Characters per example as a share of max_seq_length x 4 (the dataset validator's
#: estimate is 4 characters a token): under the validator's limit, while the tokenizer
#: (about 2 characters a token on this text) fills every row to max_seq_length.
FILL = 0.92


#: ``--dry-run-cpu --sizes 4b``: the same classes and configuration structure, tiny dimensions.
MINI_TEXT = {
    "hidden_size": 64,
    "intermediate_size": 128,
    "num_hidden_layers": 2,
    "num_attention_heads": 2,
    "num_key_value_heads": 1,
    "head_dim": 32,
    "vocab_size": 1024,
    "sliding_window": 32,
    "query_pre_attn_scalar": 32,
    "initializer_range": 0.1,
}
MINI_VISION = {
    "hidden_size": 32,
    "intermediate_size": 64,
    "num_hidden_layers": 1,
    "num_attention_heads": 2,
    "image_size": 28,
}
MINI_MULTIMODAL = {
    "mm_tokens_per_image": 4,
    "boi_token_index": 1021,
    "eoi_token_index": 1022,
    "image_token_index": 1023,
}


def gemma3_config(size: str, *, dtype: str = "bfloat16", mini: bool = False) -> Any:
    """The real `Gemma3Config` of a preset (text + vision), for this transformers version.

    `mini` shrinks every dimension (the CPU dry run of the build and load path).
    """
    import inspect

    from transformers import Gemma3Config, Gemma3TextConfig

    text: dict[str, Any] = {**TEXT_COMMON, **TEXT_SIZES[size], "pad_token_id": 0, "eos_token_id": 1, "bos_token_id": 2}
    vision, multimodal = dict(VISION), dict(MULTIMODAL)
    if mini:
        text.update(MINI_TEXT)
        vision.update(MINI_VISION)
        multimodal.update(MINI_MULTIMODAL)
    if "rope_parameters" in inspect.signature(Gemma3TextConfig.__init__).parameters:
        text["rope_parameters"] = json.loads(json.dumps(ROPE_PARAMETERS))
    else:
        text.update(ROPE_LEGACY)
    config = Gemma3Config(text_config=Gemma3TextConfig(**text).to_dict(), vision_config=vision, **multimodal)
    config.architectures = ["Gemma3ForConditionalGeneration"]
    config.dtype = dtype
    return config


# ---------------------------------------------------------------------- the dataset


def _pseudo_text(rng: random.Random, chars: int) -> str:
    """Words of random syllables: text a small BPE cannot compress much (about 2 characters a token)."""
    onsets = [*"bcdfghjklmnprstvwz", "br", "cr", "dr", "fr", "gr", "pl", "st", "tr", "sk"]
    vowels = [*"aeiou", "ai", "ea", "ou"]
    out: list[str] = []
    size = 0
    while size < chars:
        word = "".join(rng.choice(onsets) + rng.choice(vowels) for _ in range(rng.randint(1, 4)))
        if rng.random() < 0.08:
            word += rng.choice(".,;")
        out.append(word)
        size += len(word) + 1
    return " ".join(out)[:chars]


def write_dataset(datasets_dir: Path, name: str, *, examples: int, max_seq_length: int, seed: int = 0) -> Path:
    """A chat dataset whose rows all reach `max_seq_length` (long assistant answers)."""
    rng = random.Random(seed)
    folder = datasets_dir / name
    folder.mkdir(parents=True, exist_ok=True)
    chars = int(max_seq_length * 4 * FILL) - 40
    with (folder / "train.jsonl").open("w") as f:
        for i in range(examples):
            messages = [
                {"role": "user", "content": f"Write log {i}."},
                {"role": "assistant", "content": _pseudo_text(rng, chars)},
            ]
            f.write(json.dumps({"messages": messages}) + "\n")
    (folder / "dataset.toml").write_text(
        f'name = "{name}"\ndescription = "GPU check: rows as long as max_seq_length ({max_seq_length})."\n'
        'format = "chat"\ntrain = ["train.jsonl"]\n'
    )
    return folder


# ---------------------------------------------------------------------- the parent


def _now_utc() -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())


class Parent:
    """Runs the parts as child processes within the time budget and collects their results."""

    def __init__(self, args: argparse.Namespace) -> None:
        self.args = args
        self.work = Path(args.work or tempfile.mkdtemp(prefix="trainkit-gpu-check-")).resolve()
        self.work.mkdir(parents=True, exist_ok=True)
        (self.work / "logs").mkdir(exist_ok=True)
        self.started = time.monotonic()
        self.deadline = self.started + args.budget_s
        self.env = {
            **os.environ,
            "TRAINKIT_HOME": str(self.work / "home"),
            "TRAINKIT_DATASETS_DIR": str(self.work / "datasets"),
            "TRAINKIT_PROVIDER": "local",
            "HF_HUB_OFFLINE": "1",
            "TRANSFORMERS_OFFLINE": "1",
            "HF_HUB_DISABLE_TELEMETRY": "1",
            "PYTHONUNBUFFERED": "1",
            "TOKENIZERS_PARALLELISM": "false",
        }
        self.env.pop("TRAINKIT_GPU", None)  # the check compares with each preset's own GPU
        if args.dry_run_cpu:
            self.env["CUDA_VISIBLE_DEVICES"] = ""
            self.env.setdefault("OMP_NUM_THREADS", "1")  # a tiny model: threads cost more than they give
        self.count = 0

    def left(self) -> float:
        return self.deadline - time.monotonic()

    def child(self, kind: str, spec: dict[str, Any], *, need_s: float = 0.0) -> dict[str, Any]:
        """Run one part in a new process; its result, or why it was skipped or failed."""
        if self.left() < need_s:
            return {
                "status": "skipped",
                "reason": f"time budget: {self.left():.0f} s left, this part needs about {need_s:.0f} s",
            }
        self.count += 1
        name = f"{self.count:02d}-{kind}-{spec.get('size', '')}-{spec.get('backend', '')}".rstrip("-")
        spec = {
            **spec,
            "kind": kind,
            "result": str(self.work / "logs" / f"{name}.json"),
            "dry_run_cpu": self.args.dry_run_cpu,
        }
        spec_file = self.work / "logs" / f"{name}.spec.json"
        spec_file.write_text(json.dumps(spec))
        log_file = self.work / "logs" / f"{name}.log"
        started = time.monotonic()
        timeout = max(1.0, self.left())
        with log_file.open("w") as log:
            proc = subprocess.Popen(
                [sys.executable, str(Path(__file__).resolve()), "--child", str(spec_file)],
                stdout=log,
                stderr=subprocess.STDOUT,
                env=self.env,
                cwd=self.work,
                start_new_session=True,
            )
            try:
                code = proc.wait(timeout=timeout)
            except subprocess.TimeoutExpired:
                os.killpg(proc.pid, signal.SIGKILL)
                proc.wait()
                code = None
        seconds = round(time.monotonic() - started, 1)
        result_file = Path(spec["result"])
        if result_file.is_file():
            result: dict[str, Any] = json.loads(result_file.read_text())
        elif code is None:
            result = {"status": "failed", "error": f"stopped by the time budget after {seconds} s"}
        else:
            result = {"status": "failed", "error": f"the {kind} process exited {code} without a result"}
        if result.get("status") == "failed":
            result["log_tail"] = log_file.read_text(errors="replace").splitlines()[-30:]
        result["seconds"] = seconds
        result["log"] = str(log_file)
        return result

    def run(self) -> dict[str, Any]:
        args = self.args
        report: dict[str, Any] = {
            "check": "trainkit GPU check (scripts/gpu_check.py)",
            "date": _now_utc(),
            "host": platform.node(),
            "dry_run_cpu": bool(args.dry_run_cpu),
            "options": {"sizes": args.sizes, "backends": args.backends, "steps": args.steps, "budget_s": args.budget_s},
            "work": str(self.work),
            "skipped": [],
        }
        probe = self.child("probe", {})
        report["machine"] = probe
        if probe.get("status") != "ok":
            report["verdict"] = "failed"
            return report
        if not probe["cuda"] and not args.dry_run_cpu:
            report["verdict"] = "no-gpu"
            report["skipped"].append(
                "everything: no CUDA GPU here (torch.cuda.is_available() is False); --dry-run-cpu runs the CPU path"
            )
            return report
        runnable, quantized, skipped = plan(probe["modules"], args.backends, dry_run_cpu=args.dry_run_cpu)
        report["skipped"] += skipped
        report["sizes"] = {}
        for size in args.sizes:
            report["sizes"][size] = self.run_size(size, runnable, quantized=quantized)
        for size, parts in report["sizes"].items():
            for key, part in parts.items():
                if part.get("status") == "skipped":
                    report["skipped"].append(f"{size} {key}: {part.get('reason') or 'see its entry'}")
        report["estimate_31b"] = estimate_31b(report)
        report["elapsed_s"] = round(time.monotonic() - self.started, 1)
        report["verdict"] = verdict(report)
        return report

    def run_size(self, size: str, backends: list[str], *, quantized: bool) -> dict[str, Any]:
        args = self.args
        out: dict[str, Any] = {}
        # the CPU dry run shortens rows and batches (CI time); a GPU run keeps the preset's
        overrides: dict[str, Any] = {}
        if args.dry_run_cpu:
            overrides = (
                {"max_seq_length": 64, "batch_size": 4}
                if size == "tiny"
                else {"max_seq_length": 64, "batch_size": 2, "grad_accum": 1}
            )
        if size != "tiny":
            # Random weights, a few steps: the presets' 2e-4 after a linear warm-up of 5 steps (0 at
            # step 1) can leave the adapter under the gate's effect minimum, which would fail the
            # run for the wrong reason. Speed and memory do not depend on the learning rate.
            overrides.update({"learning_rate": 1e-3, "warmup_steps": 0})
        mini = args.dry_run_cpu and size != "tiny"
        spec = {"size": size, "steps": args.steps, "quantized": quantized, "overrides": overrides, "mini": mini}
        shape = _shape(spec)
        # the dataset: enough rows for every step without repeating one
        examples = shape["batch_size"] * shape["grad_accum"] * max(args.steps, 2) + 8
        write_dataset(
            self.work / "datasets", f"{DATASET}-{size}", examples=examples, max_seq_length=shape["max_seq_length"]
        )
        if size != "tiny":
            out["build"] = self.child("build", spec, need_s=60)
            if out["build"].get("status") != "ok":
                return out
            spec["params"] = out["build"]["params"]
        trained: list[str] = []
        need = 45.0
        for backend in backends:
            result = self.child("train", {**spec, "backend": backend}, need_s=need)
            out[f"train_{backend}"] = result
            if result.get("status") == "ok":
                trained.append(backend)
                need = max(need, 0.8 * result["seconds"])
        if args.no_resume:
            out["stop_resume"] = {"status": "skipped", "reason": "--no-resume"}
            return out
        backend = trained[0] if trained else (backends[0] if backends else "")
        if not backend:
            out["stop_resume"] = {"status": "skipped", "reason": "no backend to run"}
            return out
        # The stop flag is read off the step's path (every 0.2 s, trainkit_core.training.background),
        # so a stop asked at the end of step 1 lands at the end of a later step: a real-size step
        # takes seconds (it lands at step 2 of 4). The tiny and mini models' steps take
        # milliseconds, so they get 30 steps and the observer paces the steps after the request
        # (`Observer.PACE_S`): the stop lands within a step or two on any machine.
        steps = 30 if spec.get("mini") or size == "tiny" else 4
        stop = self.child("stop", {**spec, "backend": backend, "steps": steps}, need_s=need)
        resume: dict[str, Any] = {"status": "skipped", "reason": "the stop part did not end stopped"}
        if stop.get("status") == "ok":
            resume = self.child(
                "resume", {**spec, "backend": backend, "steps": steps, "run_id": stop["run_id"]}, need_s=need
            )
        statuses = (stop.get("status"), resume.get("status"))
        status = "ok" if statuses == ("ok", "ok") else ("failed" if "failed" in statuses else "skipped")
        reason = next((p["reason"] for p in (stop, resume) if p.get("status") == "skipped"), None)
        out["stop_resume"] = {"status": status, "backend": backend, "stop": stop, "resume": resume}
        if status == "skipped":
            out["stop_resume"]["reason"] = reason
        return out


def plan(modules: dict[str, bool], backends: list[str], *, dry_run_cpu: bool) -> tuple[list[str], bool, list[str]]:
    """(backends to run, whether to train and load in 4-bit, what is skipped and why), from what is installed."""
    runnable: list[str] = []
    skipped: list[str] = []
    for backend in backends:
        if backend == "unsloth" and not modules.get("unsloth"):
            skipped.append("unsloth backend: unsloth is not installed")
        elif backend == "unsloth" and not modules.get("bitsandbytes") and not dry_run_cpu:
            skipped.append("unsloth backend: bitsandbytes is not installed (Unsloth's 4-bit loading needs it)")
        else:
            runnable.append(backend)
    quantized = bool(modules.get("bitsandbytes")) and not dry_run_cpu
    if not quantized and not dry_run_cpu:
        skipped.append(
            "4-bit for the hf backend and inference: bitsandbytes is not installed; hf trains in bf16 and inference "
            "loads the base in bf16 (not the presets' recipe: the memory figures are bf16's)"
        )
    return runnable, quantized, skipped


def estimate_31b(report: dict[str, Any]) -> dict[str, Any] | None:
    """The 31b preset's peak, from the largest measured 4-bit run's bytes per parameter."""
    best: tuple[int, str, str, dict[str, Any]] | None = None
    for size, parts in (report.get("sizes") or {}).items():
        for key, part in parts.items():
            measured = key.startswith("train_") and part.get("status") == "ok" and part.get("quantized")
            if measured and part.get("params") and (best is None or part["params"] > best[0]):
                best = (part["params"], size, key, part)
    if best is None:
        return None
    params, size, key, part = best
    per_param = part["memory"]["device_peak_bytes"] / params
    peak = per_param * PARAMS_31B
    return {
        "from": f"{size} {key.removeprefix('train_')}",
        "bytes_per_param": round(per_param, 3),
        "params": PARAMS_31B,
        "estimated_peak_gib": round(peak / 2**30, 1),
        **fit("A100-80GB", peak),
        "note": "scales the whole measured peak (weights, optimizer, activations, CUDA context) with the parameter "
        "count; the 31b preset's rows are 8192 tokens at batch 1 (4b/12b: 2048 at batch 2), so its activations "
        "may be larger than this",
    }


def fit(gpu: str, peak_bytes: float) -> dict[str, Any]:
    total = GPU_MIB.get(gpu)
    if total is None:
        return {"gpu": gpu, "fits": None}
    total_bytes = total * 2**20
    free = total_bytes - peak_bytes
    return {
        "gpu": gpu,
        "gpu_gib": round(total_bytes / 2**30, 1),
        "headroom_gib": round(free / 2**30, 2),
        "fits": bool(free >= HEADROOM * total_bytes),
    }


def verdict(report: dict[str, Any]) -> str:
    statuses = []
    for parts in (report.get("sizes") or {}).values():
        for key, part in parts.items():
            statuses.append(part.get("status"))
            if key.startswith("train_") and part.get("status") == "ok":
                statuses.append("ok" if part.get("inference", {}).get("passed") else "failed")
    if "failed" in statuses:
        return "failed"
    return "passed" if "ok" in statuses else "nothing-ran"


# ---------------------------------------------------------------------- the children


def _write(spec: dict[str, Any], result: dict[str, Any]) -> None:
    Path(spec["result"]).write_text(json.dumps(result, indent=2, default=str))


def _env_setup() -> tuple[Any, Any]:
    """Settings and the local provider's job context; HF_HOME on its hf-cache volume (before transformers)."""
    from trainkit_core.local.plugin import job_context
    from trainkit_core.settings import Settings

    settings = Settings.from_env()
    # A call id of its own per child, as a provider gives each spawned call: the train job
    # counts a second start of the same call as a retry of it (TRAINKIT_TRAIN_MAX_ATTEMPTS).
    ctx = job_context(settings, f"gpu-check-{os.getpid()}")
    os.environ["HF_HOME"] = str(ctx.path("hf-cache"))
    return settings, ctx


def child_probe(spec: dict[str, Any]) -> dict[str, Any]:
    from importlib import metadata

    import torch

    cuda = bool(torch.cuda.is_available())
    names = (
        "torch",
        "transformers",
        "peft",
        "trl",
        "datasets",
        "accelerate",
        "tokenizers",
        "bitsandbytes",
        "unsloth",
        "unsloth_zoo",
        "xformers",
        "triton",
    )
    versions: dict[str, str | None] = {}
    for name in names:
        try:
            versions[name] = metadata.version(name)
        except metadata.PackageNotFoundError:
            versions[name] = None
    result: dict[str, Any] = {
        "status": "ok",
        "python": platform.python_version(),
        "cuda": cuda,
        "torch_cuda": torch.version.cuda,
        "versions": versions,
        "modules": {
            m: importlib.util.find_spec(m) is not None for m in ("unsloth", "bitsandbytes", "trl", "datasets", "peft")
        },
    }
    if cuda:
        props = torch.cuda.get_device_properties(0)
        result.update(
            {
                "gpu": props.name,
                "gpu_gib": round(props.total_memory / 2**30, 1),
                "capability": f"{props.major}.{props.minor}",
                "bf16": bool(torch.cuda.is_bf16_supported()),
            }
        )
    return result


def _shape(spec: dict[str, Any]) -> dict[str, Any]:
    """Batch, accumulation and row length of the runs: the preset's, unless the spec overrides them."""
    from trainkit_core.models.presets import get_preset

    preset = get_preset(spec["size"])
    shape = {"batch_size": preset.batch_size, "grad_accum": preset.grad_accum, "max_seq_length": preset.max_seq_length}
    shape.update({k: v for k, v in (spec.get("overrides") or {}).items() if k in shape})
    return shape


def child_build(spec: dict[str, Any]) -> dict[str, Any]:
    """The preset's model, randomly initialised on the GPU, in the hf-cache volume's hub layout."""
    settings, ctx = _env_setup()
    size = spec["size"]
    import hashlib

    import torch
    from transformers import Gemma3ForConditionalGeneration

    from trainkit_core.models.chat_format import GEMMA3, render
    from trainkit_core.models.presets import get_preset
    from trainkit_core.models.tiny_model import build_tokenizer

    preset = get_preset(size)
    started = time.monotonic()
    rows = (Path(settings.datasets.datasets_dir) / f"{DATASET}-{size}" / "train.jsonl").read_text().splitlines()
    texts = [render(json.loads(row)["messages"], GEMMA3) for row in rows if row.strip()]
    tokenizer = build_tokenizer(texts, "gemma3")
    eot = tokenizer.convert_tokens_to_ids(GEMMA3.end_of_turn)
    config = gemma3_config(size, mini=bool(spec.get("mini")), dtype="float32" if spec.get("mini") else "bfloat16")
    config.text_config.eos_token_id = [tokenizer.eos_token_id, eot]
    device = "cuda" if torch.cuda.is_available() else "cpu"
    torch.manual_seed(0)
    default = torch.get_default_dtype()
    torch.set_default_dtype(torch.float32 if spec.get("mini") else torch.bfloat16)
    try:
        with torch.device(device):
            model = Gemma3ForConditionalGeneration(config)
    finally:
        torch.set_default_dtype(default)
    model.generation_config.eos_token_id = [tokenizer.eos_token_id, eot]
    model.generation_config.pad_token_id = tokenizer.pad_token_id
    params = sum(p.numel() for p in model.parameters())
    text_params = sum(p.numel() for n, p in model.named_parameters() if "language_model" in n)
    built_s = time.monotonic() - started
    revision = hashlib.sha1(f"trainkit-gpu-check-{size}".encode()).hexdigest()
    hub = ctx.path("hf-cache") / "hub"
    repo = hub / ("models--" + preset.base_model.replace("/", "--"))
    snapshot = repo / "snapshots" / revision
    snapshot.mkdir(parents=True, exist_ok=True)
    model.save_pretrained(snapshot, max_shard_size="5GB")
    processor = save_processor(tokenizer, snapshot, image_seq_length=config.mm_tokens_per_image)
    (repo / "refs").mkdir(exist_ok=True)
    (repo / "refs" / "main").write_text(revision)
    aliases = []
    if preset.unsloth_model:  # Unsloth maps the Google id to its own 4-bit id when loading in 4-bit
        alias = hub / ("models--" + preset.unsloth_model.replace("/", "--"))
        (alias / "snapshots").mkdir(parents=True, exist_ok=True)
        (alias / "refs").mkdir(exist_ok=True)
        (alias / "refs" / "main").write_text(revision)
        link = alias / "snapshots" / revision
        if not link.exists():
            link.symlink_to(snapshot, target_is_directory=True)
        aliases.append(preset.unsloth_model)
    size_bytes = sum(f.stat().st_size for f in snapshot.iterdir() if f.is_file())
    saved_s = time.monotonic() - started - built_s
    return {
        "status": "ok",
        "model_class": type(model).__name__,
        "params": params,
        "text_params": text_params,
        **(
            {}
            if spec.get("mini")
            else {"text_params_real": TEXT_PARAMS[size], "text_params_match": TEXT_PARAMS[size] == text_params}
        ),
        "hub_id": preset.base_model,
        "aliases": aliases,
        "disk_gib": round(size_bytes / 2**30, 2),
        "build_s": round(built_s, 1),
        "save_s": round(saved_s, 1),
        "tokenizer_tokens": len(tokenizer),
        "processor": processor,
    }


def save_processor(tokenizer: Any, folder: Path, *, image_seq_length: int) -> str:
    """Save a `Gemma3Processor` (image processor + tokenizer) as the real checkpoint has; else the tokenizer alone.

    Why: Unsloth's `FastModel` loads a multimodal checkpoint's processor. The tokenizer
    gains Gemma's three image tokens (named, as the processor needs them); the job and
    inference still load the tokenizer alone (`AutoTokenizer`). Returns what was saved.
    """
    from transformers import Gemma3ImageProcessor, Gemma3Processor, PreTrainedTokenizerFast

    try:
        named = PreTrainedTokenizerFast(
            tokenizer_object=tokenizer.backend_tokenizer,
            bos_token=tokenizer.bos_token,
            eos_token=tokenizer.eos_token,
            pad_token=tokenizer.pad_token,
            unk_token=tokenizer.unk_token,
            extra_special_tokens={
                "boi_token": "<start_of_image>",
                "eoi_token": "<end_of_image>",
                "image_token": "<image_soft_token>",
            },
            chat_template=tokenizer.chat_template,
            padding_side="right",
        )
        processor = Gemma3Processor(
            image_processor=Gemma3ImageProcessor(),
            tokenizer=named,
            chat_template=tokenizer.chat_template,
            image_seq_length=image_seq_length,
        )
        processor.save_pretrained(folder)
        return "Gemma3Processor"
    except Exception as exc:  # an older or newer transformers: the tokenizer alone still trains
        tokenizer.save_pretrained(folder)
        return f"tokenizer only (no processor: {type(exc).__name__}: {exc})"


class InProcessProvider:
    """The local provider, except that `spawn` records the job instead of starting a worker.

    The check then calls the same job function the local worker calls
    (`trainkit_core.jobs.resolve(name)(ctx, **kwargs)`), in this process, so that it
    can measure it. Everything else (settings, volumes, records) is the local provider's.
    """

    def __init__(self, provider: Any) -> None:
        self._provider = provider
        self.spawned: list[tuple[str, dict[str, Any]]] = []

    def __getattr__(self, name: str) -> Any:
        return getattr(self._provider, name)

    def spawn(self, function: str, **kwargs: Any) -> Any:
        from types import SimpleNamespace

        self.spawned.append((function, kwargs))
        return SimpleNamespace(call_id=f"gpu-check-{len(self.spawned)}")


def _provider(settings: Any) -> InProcessProvider:
    import trainkit_core.local.plugin as local_plugin
    from trainkit_core.plugins.manager import build_plugin_manager, register
    from trainkit_core.plugins.provider import get_provider

    pm = build_plugin_manager(load_entry_points=False)  # the checkout's own local provider, installed or not
    register(pm, local_plugin, name="local", module="trainkit_core.local.plugin")
    return InProcessProvider(get_provider("local", settings, pm=pm))


class Observer:
    """What the check records inside the job, without changing what the job does.

    - a trainer callback around the job's own (`progress.make_callback`): time, step and
      tokens at each optimizer step, memory after the model is loaded, and (for the stop
      part) the run's stop flag set after a given step, as `trainkit runs stop` does;
    - around the adapter gate (`post.adapter_gate`): the peak memory of loading and
      training (read before the gate loads anything), and the trained model's logits on
      the gate's prompts, for the comparison with inference afterwards.
    """

    #: After the stop request, each step lasts at least this long (the flag is polled every 0.2 s).
    PACE_S = 0.25

    def __init__(self, ctx: Any, *, stop_after: int | None = None) -> None:
        self.ctx = ctx
        self.stop_after = stop_after
        self.steps: list[tuple[float, int, int]] = []
        self.loaded_bytes: int | None = None
        self.peak: dict[str, Any] = {}
        self.trained_logits: list[Any] | None = None
        self.error: str | None = None
        self.prompts: list[str] = []

    def install(self) -> None:
        import trainkit_core.training.post as post
        import trainkit_core.training.progress as progress

        make_callback = progress.make_callback
        gate = post.adapter_gate
        observer = self

        def observed_callback(reporter: Any) -> Any:
            from transformers import TrainerCallback

            inner = make_callback(reporter)

            class Observed(TrainerCallback):  # type: ignore[misc]
                def on_train_begin(self, args: Any, state: Any, control: Any, **kw: Any) -> Any:
                    observer.loaded_bytes = _allocated()
                    observer.steps.append((time.perf_counter(), state.global_step, _tokens(state)))
                    return inner.on_train_begin(args, state, control, **kw)

                def on_log(self, args: Any, state: Any, control: Any, **kw: Any) -> Any:
                    return inner.on_log(args, state, control, **kw)

                def on_step_end(self, args: Any, state: Any, control: Any, **kw: Any) -> Any:
                    observer.steps.append((time.perf_counter(), state.global_step, _tokens(state)))
                    if observer.stop_after is not None and state.global_step >= observer.stop_after:
                        if state.global_step == observer.stop_after:
                            reporter.run.store.stop_flag(reporter.run.id).request("gpu check: stop after step 1")
                        else:
                            time.sleep(observer.PACE_S)  # a step as long as a real-size one, at least
                    return inner.on_step_end(args, state, control, **kw)

                def on_save(self, args: Any, state: Any, control: Any, **kw: Any) -> Any:
                    return inner.on_save(args, state, control, **kw)

                def on_train_end(self, args: Any, state: Any, control: Any, **kw: Any) -> Any:
                    return inner.on_train_end(args, state, control, **kw)

            return Observed()

        def observed_gate(ctx: Any, run: Any, model: Any, tokenizer: Any, out_dir: Path, **options: Any) -> Any:
            from trainkit_core.models.chat_format import get_format, render_prompt

            observer.peak = _peak_memory()
            fmt = get_format(str(run.config.get("chat_format") or "gemma3"))
            observer.prompts = [render_prompt(p, fmt) for p in post.FIXED_PROMPTS]
            device = "cuda" if str(next(model.parameters()).device).startswith("cuda") else "cpu"
            model.eval()
            try:
                observer.trained_logits = post._logits(model, tokenizer, observer.prompts, device)
            except Exception as exc:  # the check's own observation: the gate below still runs
                observer.error = f"the trained model's logits: {type(exc).__name__}: {exc}"
            return gate(ctx, run, model, tokenizer, out_dir, **options)

        progress.make_callback = observed_callback
        post.adapter_gate = observed_gate

    def timing(self) -> dict[str, Any]:
        """Step time and tokens/s over the optimizer steps after the first (warm-up) one."""
        marks = list(self.steps)
        if len(marks) < 2:
            return {}
        times = [b[0] - a[0] for a, b in itertools.pairwise(marks)]
        result: dict[str, Any] = {"steps_timed": len(times), "first_step_s": round(times[0], 3)}
        later = marks[1:] if len(marks) >= 3 else marks
        span = later[-1][0] - later[0][0]
        tokens = later[-1][2] - later[0][2]
        steps = later[-1][1] - later[0][1]
        if steps > 0 and span > 0:
            result["step_s"] = round(span / steps, 3)
            result["tokens_per_s"] = round(tokens / span, 1) if tokens else None
            result["tokens_per_step"] = round(tokens / steps) if tokens else None
        return result


def _tokens(state: Any) -> int:
    return int(getattr(state, "num_input_tokens_seen", 0) or 0)


def _allocated() -> int | None:
    import torch

    return int(torch.cuda.memory_allocated()) if torch.cuda.is_available() else None


def _peak_memory() -> dict[str, Any]:
    """Peak memory so far: the allocator's peaks and the device's own use (CUDA context included)."""
    import torch

    if not torch.cuda.is_available():
        rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024
        return {"device": "cpu", "peak_rss_bytes": rss, "device_peak_bytes": rss}
    torch.cuda.synchronize()
    free, total = torch.cuda.mem_get_info()
    reserved_now = torch.cuda.memory_reserved()
    context = max(0, (total - free) - reserved_now)  # what the process holds beyond the allocator
    peak_reserved = torch.cuda.max_memory_reserved()
    result = {
        "device": "cuda",
        "peak_allocated_bytes": int(torch.cuda.max_memory_allocated()),
        "peak_reserved_bytes": int(peak_reserved),
        "context_bytes": int(context),
        "device_peak_bytes": int(peak_reserved + context),
    }
    torch.cuda.reset_peak_memory_stats()
    return result


def _start(provider: InProcessProvider, ctx: Any, spec: dict[str, Any], *, steps: int, save_every: int) -> Any:
    from trainkit_core.training.submit import start_run

    config: dict[str, Any] = {
        "dataset": f"{DATASET}-{spec['size']}",
        "model_size": spec["size"],
        "steps": steps,
        "backend": spec["backend"],
        "save_every": save_every,
        **(spec.get("overrides") or {}),
    }
    if not spec["quantized"]:
        config["load_in_4bit"] = False
    return start_run(provider, config, metadata={"gpu_check": True})


def _call_job(provider: InProcessProvider, ctx: Any) -> dict[str, Any]:
    from trainkit_core.plugins.jobs import resolve

    function, kwargs = provider.spawned[-1]
    try:
        return {"result": resolve(function)(ctx, **kwargs)}
    except Exception as exc:  # the job recorded it on the run; the check reports it
        return {"error": f"{type(exc).__name__}: {exc}"}


def _import_backend(backend: str) -> str | None:
    """Import Unsloth first, as the job does, so its patches apply; the reason it cannot be, else None."""
    if backend != "unsloth":
        return None
    try:
        import unsloth  # noqa: F401
    except Exception as exc:  # an optional part: reported, never a traceback
        return f"import unsloth failed: {type(exc).__name__}: {exc}"
    return None


#: What the report repeats of each run's resolved config.
CONFIG_KEYS: tuple[str, ...] = (
    *("batch_size", "grad_accum", "max_seq_length", "learning_rate", "warmup_steps", "lr_scheduler"),
    *("lora_r", "lora_alpha", "load_in_4bit", "gpu"),
)


def _run_summary(run: Any) -> dict[str, Any]:
    run = run.reload()
    keys = (
        "first_loss",
        "final_loss",
        "steps",
        "train_runtime_s",
        "gate_round_trip_max_abs_diff",
        "gate_round_trip_tolerance",
        "gate_effect_max_abs_diff",
        "gate_reloaded",
    )
    return {
        "run_id": run.id,
        "run_status": run.status,
        "error": run.error_message,
        "framework": run.framework,
        "step": run.step,
        "metrics": {k: run.metrics.get(k) for k in keys if k in run.metrics},
        "config": {k: run.config.get(k) for k in CONFIG_KEYS},
    }


def child_train(spec: dict[str, Any]) -> dict[str, Any]:
    settings, ctx = _env_setup()
    why = _import_backend(spec["backend"])
    if why:
        return {"status": "skipped", "reason": why}
    import torch

    from trainkit_core.models.presets import get_preset

    preset = get_preset(spec["size"])
    shape = _shape(spec)
    provider = _provider(settings)
    observer = Observer(ctx)
    observer.install()
    steps = spec["steps"]
    run = _start(provider, ctx, spec, steps=steps, save_every=steps)
    outcome = _call_job(provider, ctx)
    if not observer.peak:  # the gate was never reached (e.g. out of memory): the peak so far
        observer.peak = _peak_memory()
    summary = _run_summary(run)
    result: dict[str, Any] = {
        "status": "ok" if summary["run_status"] == "succeeded" else "failed",
        **summary,
        "backend": spec["backend"],
        "quantized": bool(spec["quantized"] and torch.cuda.is_available()),
        "batch": f"{shape['batch_size']} x {shape['grad_accum']}",
        "max_seq_length": shape["max_seq_length"],
        "timing": observer.timing(),
        "memory": observer.peak,
        "loaded_bytes": observer.loaded_bytes,
    }
    if "error" in outcome:
        result["error"] = outcome["error"]
    if spec.get("params"):
        result["params"] = spec["params"]
    if observer.peak.get("device") == "cuda":
        result["fit"] = fit(preset.gpu, observer.peak["device_peak_bytes"])
    if result["status"] == "ok" and observer.trained_logits is not None:
        result["inference"] = compare_inference(ctx, run.id, observer, quantized=result["quantized"])
    elif result["status"] == "ok":
        result["inference"] = {"passed": False, "error": observer.error or "the gate was never reached"}
    return result


def compare_inference(ctx: Any, run_id: str, observer: Observer, *, quantized: bool) -> dict[str, Any]:
    """The saved adapter loaded as inference loads it (`ModelCache`), against the trained model's logits."""
    import gc

    import torch

    from trainkit_core.inference.loading import ModelCache
    from trainkit_core.models.trained.paths import trained_dir
    from trainkit_core.training.post import _logits

    gc.collect()
    if torch.cuda.is_available():
        torch.cuda.empty_cache()
        torch.cuda.reset_peak_memory_stats()
    started = time.monotonic()
    try:
        cache = ModelCache(ctx.path("models"), ctx.path("hf-cache"))
        # inference's own choice (4-bit on CUDA), unless bitsandbytes is missing: then bf16
        loaded = cache.get(trained_dir(run_id), quantize=None if quantized else False)
        served = _logits(loaded.model, loaded.tokenizer, observer.prompts, loaded.device)
    except Exception as exc:
        return {"passed": False, "error": f"{type(exc).__name__}: {exc}"}
    trained = observer.trained_logits or []
    diffs = [float((a - b).abs().max()) for a, b in zip(trained, served, strict=True)]
    rel = [float((a - b).norm() / b.norm().clamp_min(1e-12)) for a, b in zip(trained, served, strict=True)]
    agree = [float((a.argmax(-1) == b.argmax(-1)).float().mean()) for a, b in zip(trained, served, strict=True)]
    four_bit = bool(
        getattr(loaded.model, "is_loaded_in_4bit", False)
        or getattr(getattr(loaded.model, "base_model", None), "is_loaded_in_4bit", False)
    )
    fp32 = loaded.device == "cpu"
    tol = FP32_TOL if fp32 else QUANTIZED_TOL
    return {
        "passed": max(diffs) <= tol,
        "loaded": f"{'4-bit' if four_bit else ('fp32' if fp32 else 'bf16')} base + adapter on {loaded.device} (ModelCache)",
        "max_abs_diff": round(max(diffs), 6),
        "tolerance": tol,
        "relative_l2": round(max(rel), 6),
        "argmax_agreement": round(min(agree), 4),
        "prompts": len(served),
        "load_s": round(time.monotonic() - started, 1),
        "memory": _peak_memory(),
    }


def child_stop(spec: dict[str, Any]) -> dict[str, Any]:
    """Train, set the stop flag after step 1: the run must end `stopped` with a checkpoint."""
    settings, ctx = _env_setup()
    why = _import_backend(spec["backend"])
    if why:
        return {"status": "skipped", "reason": why}
    provider = _provider(settings)
    observer = Observer(ctx, stop_after=1)
    observer.install()
    run = _start(provider, ctx, spec, steps=spec["steps"], save_every=spec["steps"])
    outcome = _call_job(provider, ctx)
    summary = _run_summary(run)
    latest = run.reload().latest_checkpoint()
    ok = summary["run_status"] == "stopped" and latest is not None and latest.step == summary["step"] < spec["steps"]
    return {
        "status": "ok" if ok else "failed",
        **summary,
        **({"error": outcome["error"]} if "error" in outcome else {}),
        "checkpoint_step": latest.step if latest else None,
        "target_steps": spec["steps"],
    }


def child_resume(spec: dict[str, Any]) -> dict[str, Any]:
    """`resume_run` in a new process: from the checkpoint to the run's last step."""
    settings, ctx = _env_setup()
    why = _import_backend(spec["backend"])
    if why:
        return {"status": "skipped", "reason": why}
    from trainkit_core.runs.training_run import RunStore
    from trainkit_core.training.submit import resume_run

    provider = _provider(settings)
    Observer(ctx).install()
    run = resume_run(provider, spec["run_id"])
    outcome = _call_job(provider, ctx)
    summary = _run_summary(run)
    record = RunStore.for_job(ctx).get(spec["run_id"])
    resumed_from = record.metadata.get("resumed_from_step")
    ok = summary["run_status"] == "succeeded" and resumed_from is not None and summary["step"] == spec["steps"]
    return {
        "status": "ok" if ok else "failed",
        **summary,
        **({"error": outcome["error"]} if "error" in outcome else {}),
        "resumed_from_step": resumed_from,
        "attempt": record.attempt,
    }


CHILDREN = {
    "probe": child_probe,
    "build": child_build,
    "train": child_train,
    "stop": child_stop,
    "resume": child_resume,
}


def child_main(spec_file: str) -> int:
    spec = json.loads(Path(spec_file).read_text())
    try:
        result = CHILDREN[spec["kind"]](spec)
    except Exception as exc:
        import traceback

        traceback.print_exc()  # into the part's log; the report carries its end
        result = {"status": "failed", "error": f"{type(exc).__name__}: {exc}"}
    _write(spec, result)
    return 0


# ---------------------------------------------------------------------- the table


def table(report: dict[str, Any]) -> str:
    machine = report.get("machine") or {}
    lines = [
        f"trainkit GPU check {report['date']}  machine: {machine.get('gpu', 'CPU')} "
        f"({machine.get('gpu_gib', '-')} GiB)  torch {(machine.get('versions') or {}).get('torch')} "
        f"cuda {machine.get('torch_cuda')}  verdict: {report.get('verdict')}",
    ]
    header = f"{'size':5} {'part':14} {'status':8} {'tok/s':>9} {'step s':>7} {'peak GiB':>9} {'fits':>14} {'logits Δ (tol)':>18}"
    lines += [header, "-" * len(header)]
    for size, parts in (report.get("sizes") or {}).items():
        for key, part in parts.items():
            timing = part.get("timing") or {}
            memory = part.get("memory") or {}
            peak = memory.get("device_peak_bytes")
            f = part.get("fit") or {}
            inf = part.get("inference") or {}
            delta = f"{inf['max_abs_diff']:.2g} ({inf['tolerance']:g})" if "max_abs_diff" in inf else ""
            lines.append(
                f"{size:5} {key:14} {part.get('status', ''):8} {timing.get('tokens_per_s') or '':>9} "
                f"{timing.get('step_s') or '':>7} {round(peak / 2**30, 2) if peak else '':>9} "
                f"{(f.get('gpu', '') + (' yes' if f.get('fits') else ' NO' if f.get('fits') is False else '')):>14} {delta:>18}"
            )
    est = report.get("estimate_31b")
    if est:
        lines.append(
            f"31b   estimate       {est['estimated_peak_gib']} GiB on {est['gpu']}: fits={est['fits']} ({est['from']}, {est['bytes_per_param']} B/param)"
        )
    for item in report.get("skipped") or []:
        lines.append(f"skipped: {item}")
    return "\n".join(lines)


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        description=__doc__.split("\n\n")[0], formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--sizes", default=None, help="comma-separated presets to check (4b, 12b); default 4b")
    parser.add_argument("--backends", default=None, help="comma-separated backends (unsloth, hf); default both")
    parser.add_argument("--steps", type=int, default=6, help="optimizer steps of each measured run (default 6)")
    parser.add_argument(
        "--budget-s", type=float, default=480, help="stop starting parts after this many seconds (default 480)"
    )
    parser.add_argument("--work", default="", help="working folder (default: a new temporary folder)")
    parser.add_argument("--json-out", default="", help="also write the JSON document here")
    parser.add_argument("--no-resume", action="store_true", help="leave out the stop / resume part")
    parser.add_argument(
        "--dry-run-cpu",
        action="store_true",
        help="the CPU path, no GPU used: by default the tiny preset with the hf backend and short rows; "
        "--sizes 4b builds the 4b preset's classes with tiny dimensions instead of its real size",
    )
    parser.add_argument("--child", default="", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    sizes = args.sizes or ("tiny" if args.dry_run_cpu else "4b")
    backends = args.backends or ("hf" if args.dry_run_cpu else "unsloth,hf")
    args.sizes = [s.strip() for s in sizes.split(",") if s.strip()]
    args.backends = [b.strip() for b in backends.split(",") if b.strip()]
    if "tiny" in args.sizes and not args.dry_run_cpu:
        parser.error("--sizes: tiny is the CPU dry run's size (--dry-run-cpu)")
    if args.dry_run_cpu and args.steps == 6:
        args.steps = 4
    for size in args.sizes:
        if size not in ("tiny", *TEXT_SIZES):
            parser.error(f"--sizes: {size!r} is not a size this check builds (tiny with --dry-run-cpu, 4b, 12b)")
    for backend in args.backends:
        if backend not in BACKENDS:
            parser.error(f"--backends: {backend!r} is not one of {', '.join(BACKENDS)}")
    if args.steps < 2:
        parser.error("--steps must be at least 2 (the first step is warm-up)")
    return args


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    sys.path.insert(0, str(CORE_SRC))  # this checkout's trainkit, installed or not
    if args.child:
        return child_main(args.child)
    report = Parent(args).run()
    document = json.dumps(report, indent=2, default=str)
    if args.json_out:
        Path(args.json_out).write_text(document + "\n")
    print(table(report), file=sys.stderr, flush=True)
    print(document, flush=True)
    return {"passed": 0, "no-gpu": 2}.get(report.get("verdict", ""), 1)


if __name__ == "__main__":
    sys.exit(main())

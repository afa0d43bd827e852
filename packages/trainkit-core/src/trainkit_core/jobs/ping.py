"""Tiny job functions: health checks (light, and on a model size's GPU), and two used by the provider conformance suite."""

from __future__ import annotations

import os
import platform
import sys
import time
from typing import Any

from trainkit_core.plugins.job_context import JobContext


def _gpu() -> dict[str, Any] | None:
    """Describe the GPU without importing torch when none is likely (no NVIDIA device node)."""
    if not os.path.exists("/dev/nvidiactl") and not os.environ.get("CUDA_VISIBLE_DEVICES"):
        return None
    try:
        import torch
    except ImportError:
        return None
    if not torch.cuda.is_available():
        return None
    props = torch.cuda.get_device_properties(0)
    return {"name": props.name, "memory_gb": round(props.total_memory / 2**30, 1), "count": torch.cuda.device_count()}


def ping(ctx: JobContext, echo: Any = None) -> dict[str, Any]:
    """Where the job runs: python, volumes, GPU, whether HF_TOKEN is set (never its value)."""
    volumes = {}
    for kind, path in sorted(ctx.volume_paths.items()):
        volumes[kind] = {"path": str(path), "exists": path.is_dir()}
    return {
        "ok": True,
        "provider": ctx.provider,
        "call_id": ctx.call_id,
        "python": sys.version.split()[0],
        "platform": platform.platform(),
        "volumes": volumes,
        "gpu": _gpu(),
        "hf_token_set": bool(os.environ.get("HF_TOKEN")),
        "echo": echo,
    }


def _import_check(module: str) -> dict[str, Any]:
    """Whether `module` imports here, with its version or the error (a broken GPU stack shows up here)."""
    import importlib

    try:
        imported = importlib.import_module(module)
    except ImportError as exc:
        return {"ok": False, "error": f"not installed: {exc}"}
    except Exception as exc:  # unsloth raises plain errors without a usable GPU
        return {"ok": False, "error": f"{type(exc).__name__}: {exc}"[:500]}
    return {"ok": True, "version": str(getattr(imported, "__version__", ""))}


def gpu_ping(ctx: JobContext, model_size: str = "", echo: Any = None) -> dict[str, Any]:
    """The check to run before a long job, in the image and on the GPU a model size trains on.

    Reports the CUDA device and its memory, the torch and CUDA versions, whether
    bitsandbytes and Unsloth import, and whether HF_TOKEN is set (never its value).
    Where there is no GPU (the local provider on a laptop) it says so: `gpu` is None.
    """
    report: dict[str, Any] = {
        "ok": True,
        "provider": ctx.provider,
        "call_id": ctx.call_id,
        "model_size": model_size,
        "python": sys.version.split()[0],
        "platform": platform.platform(),
        "hf_token_set": bool(os.environ.get("HF_TOKEN")),
        "torch": None,
        "cuda": None,
        "cuda_available": False,
        "gpu": None,
        "echo": echo,
    }
    try:
        import torch
    except ImportError:
        report["packages"] = {"torch": {"ok": False, "error": "not installed"}}
        return report
    report["torch"] = torch.__version__
    report["cuda"] = torch.version.cuda
    report["cuda_available"] = bool(torch.cuda.is_available())
    if report["cuda_available"]:
        props = torch.cuda.get_device_properties(0)
        free, total = torch.cuda.mem_get_info(0)
        report["gpu"] = {
            "name": props.name,
            "count": torch.cuda.device_count(),
            "memory_gb": round(total / 2**30, 1),
            "memory_free_gb": round(free / 2**30, 1),
            "capability": f"{props.major}.{props.minor}",
        }
    # bitsandbytes before unsloth: unsloth imports it too, and a failure is clearer alone.
    report["packages"] = {name: _import_check(name) for name in ("bitsandbytes", "unsloth")}
    return report


def sleep(
    ctx: JobContext,
    seconds: float = 1.0,
    result: Any = None,
    ignore_sigterm: bool = False,
    until_file: str | None = None,
    say: str | None = None,
    beat: str | None = None,
) -> Any:
    """Sleep, then return `result`: lets tests see a call running and cancel it.

    With `ignore_sigterm` the job shrugs off SIGTERM, so a test can see a cancel
    fall back to SIGKILL after its grace period. With `until_file` it returns as soon
    as that file exists, so a test decides when the call ends, however slow the
    machine. `say` is printed first (the conformance suite finds it in `logs()`).
    With `beat`, the job counts its heartbeats under that key of the ``beats``
    store while it sleeps, so a test can see that a cancelled job really stopped.
    """
    if say is not None:
        print(say, flush=True)
    beats = ctx.kv("beats") if beat else None
    if ignore_sigterm:
        import signal

        signal.signal(signal.SIGTERM, signal.SIG_IGN)
    deadline = time.monotonic() + float(seconds)
    count = 0
    while time.monotonic() < deadline:
        if until_file and os.path.exists(until_file):
            break
        if beats is not None and beat:
            count += 1
            beats.put(beat, count)
        time.sleep(min(0.05, max(0.0, deadline - time.monotonic())))
    return result


def fail(ctx: JobContext, message: str = "job failed on purpose") -> None:
    """Raise, so tests see a failing job's error text come back."""
    raise RuntimeError(message)

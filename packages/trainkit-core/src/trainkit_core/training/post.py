"""After training: the adapter-effect gate and the eval metrics of the saved model.

The `train` job calls `after_training` once the adapter and tokenizer are saved in
``trained/<id>`` (before `trained_model.json`, which is written last). Two checks, on
the adapter *as saved*, loaded the way inference loads it (`load_adapter_model`):

1. **Round trip**: on fixed prompts, its logits match the trainer's in-memory model
   (max abs diff <= `ROUND_TRIP_TOL` = 1e-4 in fp32). A saved adapter that does not
   reproduce the trained one means serving is not what was trained.
2. **Effect**: its logits differ from the base model's (max abs diff >
   `EFFECT_MIN`). Peers have shipped adapters that silently do nothing once saved or
   served (unsloth #2142, vllm #41754).

Either failing raises `JobError` with the figures, which fails the run. Then, when
the dataset has an eval split, the saved model and its base are scored on it (loss,
perplexity, exact match, token F1): ``eval_*`` and ``base_eval_*`` metrics.

On CPU (and for fp32 models) the saved adapter is loaded on a fresh base, exactly as
inference does. A quantized (4-bit GPU) model is not reloaded a second time: the
saved adapter is loaded onto the in-memory base under another name, and the
round-trip tolerance is that of 4-bit arithmetic (`QUANTIZED_TOL`); so is a base
trained in bf16 (reloaded in the trainer's dtype).
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from trainkit_core.errors import JobError
from trainkit_core.plugins.job_context import JobContext
from trainkit_core.runs.training_run import TrainingRun

log = logging.getLogger(__name__)

ROUND_TRIP_TOL = 1e-4
QUANTIZED_TOL = 5e-2
EFFECT_MIN = 1e-3
#: Examples of the eval split scored after training (all of a small split).
MAX_EVAL_EXAMPLES = 200

FIXED_PROMPTS = (
    [{"role": "user", "content": "Hello! Who are you?"}],
    [{"role": "user", "content": "Uppercase: snow blue"}],
    [{"role": "system", "content": "Answer briefly."}, {"role": "user", "content": "What is two plus two?"}],
)


def _card(run: TrainingRun) -> Any:
    from trainkit_core.models.trained.card import TrainedModelCard
    from trainkit_core.models.trained.layout import base_model_path

    config = run.config
    base = run.base_model or str(config.get("base_model") or "")
    return TrainedModelCard.model_validate(
        {
            "run_id": run.id,
            "base_model": base,
            "base_model_path": base_model_path(base),
            "preset": str(config.get("model_size") or config.get("preset") or ""),
            "chat_format": str(config.get("chat_format") or "gemma3"),
            "dataset_id": str(config.get("dataset") or ""),
            "config": config,
        }
    )


def _logits(model: Any, tokenizer: Any, prompts: list[str], device: str) -> list[Any]:
    import torch

    found = []
    with torch.no_grad():  # not inference_mode: a sharded model gathers its weights into tensors it keeps
        for text in prompts:
            ids = tokenizer(text, add_special_tokens=False, return_tensors="pt")["input_ids"].to(device)
            found.append(model(input_ids=ids).logits.float().cpu())
    return found


def _max_diff(a: list[Any], b: list[Any]) -> float:
    return max(float((x - y).abs().max()) for x, y in zip(a, b, strict=True))


def _is_quantized(model: Any) -> bool:
    return bool(getattr(model, "is_loaded_in_4bit", False) or getattr(model, "is_loaded_in_8bit", False)) or bool(
        getattr(getattr(model, "base_model", None), "is_loaded_in_4bit", False)
    )


def _prompts(run: TrainingRun) -> tuple[Any, Any, list[str]]:
    from trainkit_core.models.chat_format import get_format, render_prompt

    card = _card(run)
    fmt = get_format(card.chat_format)
    return card, fmt, [render_prompt(p, fmt) for p in FIXED_PROMPTS]


def _device(model: Any) -> str:
    return "cuda" if str(next(model.parameters()).device).startswith("cuda") else "cpu"


def trained_logits(run: TrainingRun, model: Any, tokenizer: Any) -> list[Any]:
    """The trained model's logits on the fixed prompts; of a sharded model, every rank calls it together."""
    _, _, prompts = _prompts(run)
    model.eval()
    return _logits(model, tokenizer, prompts, _device(model))


def adapter_gate(
    ctx: JobContext,
    run: TrainingRun,
    model: Any,
    tokenizer: Any,
    out_dir: Path,
    *,
    require_effect: bool = True,
    trained: list[Any] | None = None,
    why: Sequence[str] = (),
) -> tuple[dict[str, Any], Any]:
    """Check round trip and effect; returns (figures, (reloaded model, tokenizer, format, device, adapter)).

    `require_effect=False` for a run that was stopped: stopped in its warm-up (learning
    rate 0 at the first step) its adapter rightly does nothing yet, and it can be resumed;
    the round trip still holds it to what was trained. `trained`: the trained model's
    logits, computed already (`trained_logits`: by all the ranks of a sharded model).
    `why`: what the run itself found wrong (a GRPO reward that never rose), said with a
    failed effect check, since that is what the user must change, not the adapter.
    """
    import torch

    from trainkit_core.inference.loading import check_fit, load_adapter_model

    card, fmt, prompts = _prompts(run)
    device = _device(model)
    quantized = _is_quantized(model)
    # A sharded model (its logits given) runs only with all its ranks: the saved adapter is
    # loaded on a fresh base here, quantized as it trained.
    sharded = trained is not None
    if trained is None:
        trained = trained_logits(run, model, tokenizer)
    if not quantized or sharded:
        dtype = model.get_input_embeddings().weight.dtype  # the base weights' dtype, as trained
        reloaded, tok, fmt = load_adapter_model(
            out_dir, card, ctx.path("hf-cache"), device=device, quantize=quantized, dtype=dtype
        )
        adapter = "default"
        tol = ROUND_TRIP_TOL if dtype == torch.float32 and not quantized else QUANTIZED_TOL
    else:
        check_fit(card, out_dir, tokenizer)
        model.load_adapter(str(out_dir), adapter_name="saved", is_trainable=False)
        reloaded, tok, adapter, tol = model, tokenizer, "saved", QUANTIZED_TOL
    reloaded.set_adapter(adapter)
    served = _logits(reloaded, tok, prompts, device)
    with reloaded.disable_adapter():
        base = _logits(reloaded, tok, prompts, device)
    round_trip, effect = _max_diff(trained, served), _max_diff(served, base)
    figures = {
        "gate_round_trip_max_abs_diff": round(round_trip, 8),
        "gate_round_trip_tolerance": tol,
        "gate_effect_max_abs_diff": round(effect, 6),
        "gate_effect_minimum": EFFECT_MIN,
        "gate_prompts": len(prompts),
        "gate_reloaded": "fresh base" if not quantized or sharded else "in-memory base",
    }
    if not round_trip <= tol:
        raise JobError(
            f"adapter gate failed: the saved adapter, loaded as inference loads it, gives logits up to {round_trip:.3g} "
            f"away from the trained model's (tolerance {tol:g}) on {len(prompts)} fixed prompts"
        )
    if not effect > EFFECT_MIN and require_effect:
        raise JobError(
            f"adapter gate failed: the saved adapter changes the base model's logits by at most {effect:.3g} "
            f"(minimum {EFFECT_MIN:g}) on {len(prompts)} fixed prompts: it does nothing"
            + "".join(f"; {reason}" for reason in why)
        )
    if torch.cuda.is_available():
        torch.cuda.empty_cache()
    return figures, (reloaded, tok, fmt, device, adapter)


def after_training(
    ctx: JobContext,
    run: TrainingRun,
    model: Any,
    tokenizer: Any,
    out_dir: Path,
    *,
    stopped: bool = False,
    processor: Any = None,
    trained: list[Any] | None = None,
    why: Sequence[str] = (),
) -> dict[str, Any]:
    """Gate figures and eval metrics of the saved model in `out_dir`, merged into the run's metrics."""
    with run.substep("saving", "adapter_gate"):
        figures, (reloaded, tok, fmt, device, adapter) = adapter_gate(
            ctx, run, model, tokenizer, out_dir, require_effect=not stopped, trained=trained, why=why
        )
    if figures["gate_effect_max_abs_diff"] > EFFECT_MIN:
        run.events.append(
            "log", message="adapter gate passed: the saved adapter is what was trained, and it has an effect", **figures
        )
    else:
        run.events.append(
            "warning",
            message=f"the run stopped at step {run.step}, before its adapter learned anything: it has no effect on "
            f"the base model yet (logits change by at most {figures['gate_effect_max_abs_diff']:.3g}); "
            "resume the run to train it further",
            **figures,
        )
    metrics: dict[str, Any] = dict(figures)
    dataset = str(run.config.get("dataset") or "")
    if not dataset:
        return metrics
    from trainkit_core.datasets.reader import read_synced
    from trainkit_core.evals.scoring import evaluate

    synced = read_synced(ctx.path("data"), dataset)
    from trainkit_core.evals.preference import preference_accuracy, with_answer

    pairs = [e for e in synced.eval if "chosen" in e][:MAX_EVAL_EXAMPLES]
    if pairs:
        with run.substep("saving", "preference_accuracy", pairs=len(pairs)):
            accuracy = preference_accuracy(reloaded, tok, fmt, pairs, device=device, adapter=adapter)
        metrics["eval_preference_accuracy"] = accuracy["tuned"]
        metrics["base_eval_preference_accuracy"] = accuracy["base"]
        run.events.append("eval", preference_accuracy=accuracy, pairs=len(pairs))
    # The usual metrics too, with a pair's preferred answer as the reference (prompt data has none).
    conversations = (
        [{"messages": with_answer(e, "chosen"), **({"tools": e["tools"]} if e.get("tools") else {})} for e in pairs]
        if pairs
        else synced.eval
    )
    examples = [e for e in conversations if e.get("messages") and e["messages"][-1]["role"] == "assistant"]
    if not examples:
        return metrics
    run.enter_phase("evaluating")  # ends `saving` in step_times
    with run.substep("evaluating", "eval", examples=len(examples[:MAX_EVAL_EXAMPLES])):
        result = evaluate(
            reloaded, tok, fmt, examples[:MAX_EVAL_EXAMPLES], device=device, adapter=adapter, processor=processor
        )
    for label, prefix in (("tuned", "eval_"), ("base", "base_eval_")):
        for key, value in (result[label] or {}).items():
            metrics[f"{prefix}{key}"] = value
    metrics["eval_s"] = result["eval_s"]
    run.events.append("eval", tuned=result["tuned"], base=result["base"], examples=len(examples[:MAX_EVAL_EXAMPLES]))
    return metrics

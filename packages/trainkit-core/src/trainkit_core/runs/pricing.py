"""What a run costs: a price per GPU-hour, by provider and GPU, kept as data.

trainkit's table is ``data/gpu_prices.toml`` (dated, with its sources); a user's own
table (``TRAINKIT_PRICES_FILE``, same shape) overrides any entry of it. `price_for`
is called when a run is started, and its answer is stored in the run's record
(`TrainingRun.price`): the job computes nothing from tables (a container holds only
the package's ``.py`` files), and a later change of the table never rewrites what a
finished run cost. `TrainingRun.cost_at` turns the stored price and the run's job
time into dollars.

Runs of the `local` provider cost 0 unless the user prices them. A GPU the table
does not know on another provider is unpriced: its cost is unknown (None), never a
guess. No heavy imports.
"""

from __future__ import annotations

import sys
from importlib import resources
from pathlib import Path
from typing import Any

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover - Python 3.10
    import tomli as tomllib

from trainkit_core.errors import UsageError

#: A provider whose runs cost nothing unless the user's table prices them.
FREE_PROVIDERS = ("local",)

#: Other spellings of a GPU name, as providers accept them.
ALIASES = {"A10": "A10G", "A100": "A100-40GB"}


def split_gpu(gpu: str) -> tuple[str, int]:
    """``"H100:2"`` -> ("H100", 2); "" is the CPU, ("cpu", 0)."""
    name, _, count = (gpu or "").strip().partition(":")
    if not name or name.lower() == "cpu":
        return "cpu", 0
    try:
        gpus = int(count) if count else 1
    except ValueError:
        raise UsageError(f"GPU {gpu!r}: the count after ':' must be a whole number") from None
    if gpus < 1:
        raise UsageError(f"GPU {gpu!r}: the count must be at least 1")
    name = name.upper()
    return ALIASES.get(name, name), gpus


def _read(path: Path) -> dict[str, Any]:
    try:
        data = tomllib.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise UsageError(f"price table {str(path)!r} does not exist", hint="check TRAINKIT_PRICES_FILE") from None
    except (ValueError, RecursionError) as exc:  # TOMLDecodeError, or an integer of thousands of digits
        raise UsageError(f"price table {str(path)!r} is not valid TOML: {exc or 'nested too deeply'}") from None
    for provider, entry in data.items():
        if provider in ("date", "source"):
            continue
        gpus = entry.get("gpus", {}) if isinstance(entry, dict) else None
        if not isinstance(gpus, dict):
            raise UsageError(f"price table {str(path)!r}: [{provider}] needs a [{provider}.gpus] table")
        for gpu, price in gpus.items():
            if isinstance(price, bool) or not isinstance(price, (int, float)) or price < 0:
                raise UsageError(f"price table {str(path)!r}: {provider}.gpus.{gpu} must be a number >= 0")
    return data


def load_table(prices_file: Path | None = None) -> dict[str, Any]:
    """trainkit's table, with the entries of `prices_file` (the user's) over it."""
    packaged = resources.files("trainkit_core").joinpath("data/gpu_prices.toml")
    with resources.as_file(packaged) as path:
        table = _read(path)
    if prices_file is None:
        return table
    user = _read(Path(prices_file))
    for provider, entry in user.items():
        if provider in ("date", "source"):
            continue
        mine = table.setdefault(provider, {"gpus": {}})
        mine["gpus"] = {**mine.get("gpus", {}), **{k.upper() if k != "cpu" else k: v for k, v in entry["gpus"].items()}}
        mine["user_gpus"] = sorted(entry["gpus"])
        mine["user_file"] = str(prices_file)
        if "source" in entry:
            mine["source"] = entry["source"]
        if "date" in user:
            mine["date"] = user["date"]
    return table


def price_for(provider: str, gpu: str, *, table: dict[str, Any] | None = None) -> dict[str, Any]:
    """The price of one hour of `gpu` on `provider`, as a run records it (`TrainingRun.price`).

    ``usd_per_hour`` is per GPU (or for the machine when ``gpus`` is 0), None when the
    table has no price for it (a provider other than `local`).
    """
    table = load_table() if table is None else table
    name, gpus = split_gpu(gpu)
    entry = table.get(provider) or {}
    prices = {(k if k == "cpu" else ALIASES.get(k.upper(), k.upper())): v for k, v in (entry.get("gpus") or {}).items()}
    rate = prices.get(name)
    if rate is None and provider in FREE_PROVIDERS:
        rate = 0.0
    user = name in {(k if k == "cpu" else ALIASES.get(k.upper(), k.upper())) for k in entry.get("user_gpus", [])}
    return {
        "provider": provider,
        "gpu": name,
        "gpus": gpus,
        "usd_per_hour": None if rate is None else float(rate),
        "source": entry.get("user_file") if user else entry.get("source", ""),
        "table_date": entry.get("date") if user and entry.get("date") else table.get("date", ""),
    }


def price_for_run(provider: Any, gpu: str) -> dict[str, Any]:
    """`price_for` with the provider's settings (its user table) on the client side."""
    return price_for(provider.name, gpu, table=load_table(provider.settings.compute.prices_file))


def group_totals(runs: list[Any]) -> dict[str, Any]:
    """A sweep's (or any list's) totals: runs, GPU-seconds, cost (None when a run is unpriced)."""
    costs = [r.cost_usd for r in runs]
    return {
        "runs": len(runs),
        "gpu_seconds": round(sum(r.gpu_seconds or 0.0 for r in runs), 3),
        "job_seconds": round(sum(r.job_seconds() or 0.0 for r in runs), 3),
        "cost_usd": None if any(c is None for c in costs) else round(sum(costs), 6),
        "unpriced_runs": sum(c is None for c in costs),
    }


def format_cost(value: float | None) -> str:
    """Dollars as a person reads them: "$0.0123", "$1.23", "-" when unknown."""
    if value is None:
        return "-"
    return f"${value:.4f}" if value < 1 else f"${value:,.2f}"

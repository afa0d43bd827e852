"""Training methods: what `--method NAME` means, one module each (`sft`, `dpo`, `grpo`).

A method (`base.Method`) says which data formats it trains on, its defaults per preset,
the options that are its own, how its trainer is built, what it removes before saving and
what the plan counts. The train job, the plan and the submission ask it; nothing outside
this package compares a method's name. A new method is one module defining a `Method` and
its line in `METHODS`, plus its tests; or, outside trainkit, a package whose entry point in
the ``trainkit.methods`` group names its `Method` instance (found in every process that looks
a method up, the train job's included).

A `TrainConfig` value the user leaves unset comes from the method's defaults for the preset
first, then from the preset itself (`TrainConfig.resolve`), so SFT keeps the preset's values
exactly and the stored config of a run says what was trained. The sources of each method's
defaults are in its module's docstring (and docs/tutorials/preference-and-reward.md).
"""

from __future__ import annotations

from trainkit_core.errors import UsageError
from trainkit_core.training.methods import dpo, grpo, sft
from trainkit_core.training.methods.base import Method, MethodDefaults, TrainerInputs
from trainkit_core.training.methods.grpo import grpo_batch

#: The methods by name, in the order `--method` lists them.
METHODS: dict[str, Method] = {m.name: m for m in (sft.METHOD, dpo.METHOD, grpo.METHOD)}


#: The entry-point group of methods from other packages.
METHODS_GROUP = "trainkit.methods"
_plugins_loaded = False


def register(method: Method) -> None:
    """Add a method defined outside this package (its name must be new)."""
    if not isinstance(method, Method) or not method.name or method.name in METHODS:
        raise ValueError(f"a method needs a name of its own; {getattr(method, 'name', method)!r} is taken or empty")
    METHODS[method.name] = method


def load_plugins() -> dict[str, Method]:
    """Every method: the built-in ones and, once per process, those of the ``trainkit.methods`` entry points.

    Read only when a name is not a built-in method, so a run of sft, dpo or grpo never scans them.
    """
    global _plugins_loaded
    if not _plugins_loaded:
        _plugins_loaded = True
        from importlib.metadata import entry_points

        for entry in entry_points(group=METHODS_GROUP):
            if entry.name in METHODS:
                continue
            try:
                method = entry.load()
            except Exception as exc:
                raise UsageError(f"method plugin {entry.name!r} ({entry.value}) failed to import: {exc}") from None
            if not isinstance(method, Method) or method.name != entry.name:
                raise UsageError(
                    f"method plugin {entry.name!r} ({entry.value}) is not a Method named {entry.name!r}",
                    hint="the entry point must name an instance of trainkit_core.training.methods.Method",
                )
            register(method)
    return METHODS


def find_method(name: str) -> Method | None:
    """The method named `name`, or None (plugins are loaded for a name that is not built in)."""
    return METHODS.get(name) or load_plugins().get(name)


def get_method(name: str) -> Method:
    """The method `--method NAME` means; `UsageError` naming the known ones."""
    method = find_method(name)
    if method is None:
        raise UsageError(f"unknown method {name!r}; expected {', '.join(METHODS)}")
    return method


def method_defaults(method: str, preset_name: str) -> MethodDefaults:
    """The defaults of `method` for a preset (a twin takes its real preset's: tiny's on CPU)."""
    return get_method(method).defaults_for(preset_name)


def check_format(method: str, dataset_format: str, dataset: str) -> None:
    """`UsageError` when `dataset`'s format is not one `method` trains on (before anything starts)."""
    formats = get_method(method).formats
    if dataset_format in formats:
        return
    wanted = " or ".join(f'"{f}"' for f in formats)
    for other in METHODS.values():
        if dataset_format in other.formats:
            hint = f"--method {other.name} trains on {dataset_format} data"
            break
    else:
        hint = f"set format = {wanted} in its dataset.toml"
    raise UsageError(
        f"dataset {dataset!r} has format {dataset_format!r}, but --method {method} trains on {wanted} data", hint=hint
    )


__all__ = [
    "METHODS",
    "Method",
    "MethodDefaults",
    "TrainerInputs",
    "check_format",
    "find_method",
    "get_method",
    "grpo_batch",
    "load_plugins",
    "method_defaults",
    "register",
]

"""Validation: every problem of a dataset, with file and line, before anything uses it.

Two entry points check the same rules:

- `validate_local(folder, length=...) -> Report`: the local copy (``trainkit validate
  --local``, and `sync` before it writes anything).
- `validate_synced(volume, name, length=...) -> Report`: the current version on the
  data volume, which is what training reads (client side, through the `Volume`
  protocol). Training calls it and refuses to start when ``report.ok()`` is false,
  putting ``report.error_text()`` into the run's error.

Errors: unreadable spec, missing or empty files, not UTF-8, a BOM, invalid JSON, lines
that are not objects, missing/empty/non-list ``messages``, unknown roles, a system
message anywhere but first, turns that do not start with user, alternate and end with
assistant, empty or non-string content, an eval split that is empty or overlaps
train. Warnings: duplicate examples, examples longer than the model's maximum
sequence length (`LengthCheck`: the preset's tokenizer when one is at hand, else
an estimate of 4 characters per token).
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from trainkit_core.datasets.examples import Example, parse_jsonl, split_eval
from trainkit_core.datasets.images import ImageLimits, audio_media, check_images, check_media, text_of
from trainkit_core.datasets.layout import Manifest, blob_path, current_path, manifest_path, parse_current
from trainkit_core.datasets.local import DatasetFileError, dataset_file
from trainkit_core.datasets.problems import Problem, Report
from trainkit_core.datasets.spec import SPEC_FILE, DatasetSpec, check_name, parse_spec
from trainkit_core.errors import NotFoundError, UsageError, hint_word
from trainkit_core.plugins.hookspecs import Volume

#: Used when no model preset says otherwise.
DEFAULT_MAX_TOKENS = 2048
#: The stated estimate when no tokenizer is available.
CHARS_PER_TOKEN = 4
#: Tokens the turn markers add per message (``<start_of_turn>user\n`` ... ``<end_of_turn>\n``).
TOKENS_PER_TURN = 5


@dataclass(frozen=True)
class LengthCheck:
    """How long an example may be, and how its length is counted."""

    max_tokens: int
    count: Callable[[Example], int]
    description: str

    @classmethod
    def estimate(cls, max_tokens: int = DEFAULT_MAX_TOKENS) -> LengthCheck:
        """Characters / 4 plus the turn markers: no tokenizer needed, stated as an estimate."""

        def count(example: Example) -> int:
            return math.ceil(example.chars / CHARS_PER_TOKEN) + TOKENS_PER_TURN * len(example.messages) + 1

        return cls(max_tokens, count, f"estimate: {CHARS_PER_TOKEN} characters per token, max {max_tokens} tokens")


@dataclass
class Checked:
    """A report and what passed: the job-side reader uses the same result."""

    report: Report
    spec: DatasetSpec | None = None
    train: list[Example] = field(default_factory=list)
    eval: list[Example] = field(default_factory=list)


Reader = Callable[[str], "bytes | None"]


def check(
    name: str,
    read: Reader,
    *,
    source: str,
    folder_name: str | None = None,
    length: LengthCheck | None = None,
    image_limits: ImageLimits | None = None,
    size: Callable[[str], int | None] | None = None,
) -> Checked:
    """Check a dataset whose files `read(relative path)` returns (None when missing).

    Images the examples name are read through `read` too, so a local check and a check
    of the volume's version look at the same bytes; `size(relative path)`, where given,
    lets an image over the byte limit be refused before it is read.
    """
    report = Report(name=name, source=source)
    result = Checked(report)
    try:
        spec_bytes = read(SPEC_FILE)
    except DatasetFileError as exc:
        report.problems.append(Problem(SPEC_FILE, None, "error", "file-outside", exc.message.split(": ", 1)[-1]))
        return result
    if spec_bytes is None:
        report.problems.append(Problem(SPEC_FILE, None, "error", "spec-missing", f"no {SPEC_FILE}"))
        return result
    spec, problems = parse_spec(spec_bytes, folder_name=folder_name)
    report.problems.extend(problems)
    if spec is None:
        return result
    result.spec = spec
    parsed: dict[str, list[Example]] = {}
    for file in spec.files:
        try:
            data = read(file)
        except DatasetFileError as exc:
            report.problems.append(Problem(file, None, "error", "file-outside", exc.message.split(": ", 1)[-1]))
            continue
        if data is None:
            report.problems.append(Problem(file, None, "error", "file-missing", f"listed in {SPEC_FILE} but missing"))
            continue
        examples, file_problems = parse_jsonl(data, file, spec.format, allow_chat_markers=spec.allow_chat_markers)
        limits = image_limits or ImageLimits()
        bad, image_problems = check_images(examples, read, limits, DatasetFileError, size)
        bad_audio, audio_problems = check_media(examples, read, audio_media(limits.audio), DatasetFileError, size)
        examples = [ex for index, ex in enumerate(examples) if index not in bad | bad_audio]
        file_problems += image_problems + audio_problems
        report.images += len({url for ex in examples for url in ex.image_urls})
        report.audio += len({ref for ex in examples for ref in ex.audio_refs})
        report.problems.extend(file_problems)
        report.counts[file] = len(examples)
        parsed[file] = examples
        if not examples and not file_problems and file in spec.train:
            report.problems.append(Problem(file, None, "error", "file-empty", "no examples in this train file"))
    train = [ex for file in spec.train for ex in parsed.get(file, [])]
    held_out = [ex for file in spec.eval for ex in parsed.get(file, [])]
    if spec.eval_fraction is not None:
        train, held_out = split_eval(train, spec.eval_fraction, spec.eval_seed)
        if train and not held_out:
            report.problems.append(
                Problem(
                    SPEC_FILE,
                    None,
                    "error",
                    "eval-empty",
                    f"eval_fraction {spec.eval_fraction} of {len(train)} examples selects none; raise it",
                )
            )
    elif spec.eval and all(file in parsed for file in spec.eval) and not held_out:
        report.problems.append(Problem(spec.eval[0], None, "error", "eval-empty", "the eval files hold no examples"))
    if not train and all(file in parsed for file in spec.train) and any(parsed[f] for f in spec.train):
        report.problems.append(
            Problem(SPEC_FILE, None, "error", "train-empty", "the eval split leaves no train examples")
        )
    _duplicates(train, report)
    _duplicates(held_out, report)
    _overlap(train, held_out, report)
    if length is not None:
        report.length_check = length.description
        for example in train + held_out:
            tokens = length.count(example)
            if tokens > length.max_tokens:
                report.problems.append(
                    Problem(
                        example.file,
                        example.line,
                        "warning",
                        "too-long",
                        f"about {tokens} tokens, over the maximum of {length.max_tokens} ({length.description}); it will be truncated",
                    )
                )
    report.problems.sort(key=lambda p: (_file_order(spec, p.file), p.line or 0))
    report.train_examples, report.eval_examples = len(train), len(held_out)
    result.train, result.eval = train, held_out
    return result


def _file_order(spec: DatasetSpec, file: str) -> int:
    order = [SPEC_FILE, *spec.files]
    return order.index(file) if file in order else len(order)


def _duplicates(examples: list[Example], report: Report) -> None:
    """Warn on repeats within one side (train or eval); a train/eval pair is an overlap error."""
    first: dict[tuple[Any, ...], Example] = {}
    for example in examples:
        seen = first.setdefault(example.key, example)
        if seen is not example:
            report.problems.append(
                Problem(example.file, example.line, "warning", "duplicate", f"duplicate of {seen.where}")
            )


def _overlap(train: list[Example], held_out: list[Example], report: Report) -> None:
    seen = {ex.key: ex for ex in train}
    for example in held_out:
        twin = seen.get(example.key)
        if twin is not None:
            report.problems.append(
                Problem(
                    example.file,
                    example.line,
                    "error",
                    "eval-overlap",
                    f"eval example is also a train example ({twin.where})",
                )
            )


# --------------------------------------------------------------------------- sources


def validate_local(
    folder: Path, *, length: LengthCheck | None = None, image_limits: ImageLimits | None = None
) -> Report:
    """Check the dataset in `folder` as it is on this machine."""
    return check_local(folder, length=length, image_limits=image_limits).report


def check_local(folder: Path, *, length: LengthCheck | None = None, image_limits: ImageLimits | None = None) -> Checked:
    folder = Path(folder)
    if not (folder / SPEC_FILE).is_file():
        raise NotFoundError(f"no {SPEC_FILE} in {str(folder)!r}")

    def read(rel: str) -> bytes | None:
        path = dataset_file(folder, rel)  # DatasetFileError for a link out of the folder
        return path.read_bytes() if path is not None else None

    def size(rel: str) -> int | None:
        path = dataset_file(folder, rel)
        return path.stat().st_size if path is not None else None

    return check(
        folder.name, read, source="local", folder_name=folder.name, length=length, image_limits=image_limits, size=size
    )


def read_current_manifest(volume: Volume, name: str) -> Manifest:
    """The manifest of the version ``current.json`` names; `NotFoundError` when never synced."""

    check_name(name)
    if not volume.exists(current_path(name)):
        raise NotFoundError(
            f"dataset {name!r} was never synced to volume {volume.name!r}", hint=f"run `trainkit sync {name}`"
        )
    where = f"{current_path(name)} on volume {volume.name!r}"
    version = parse_current(volume.read_bytes(current_path(name)), where=where)["version"]
    where = f"{manifest_path(name, version)} on volume {volume.name!r}"
    return Manifest.from_json(volume.read_bytes(manifest_path(name, version)), where=where)


def validate_synced(
    volume: Volume, name: str, *, length: LengthCheck | None = None, image_limits: ImageLimits | None = None
) -> Report:
    """Check the current version of `name` on the data volume, as training will read it."""
    manifest = read_current_manifest(volume, name)

    def read(rel: str) -> bytes | None:
        info = manifest.files.get(rel)
        if info is None:
            return None
        path = blob_path(name, info.sha256)
        return volume.read_bytes(path) if volume.exists(path) else None

    def size(rel: str) -> int | None:
        info = manifest.files.get(rel)
        return info.size if info is not None else None

    report = check(
        name, read, source="volume", folder_name=name, length=length, image_limits=image_limits, size=size
    ).report
    report.version, report.hash = manifest.version, manifest.hash
    return report


class DatasetInvalidError(UsageError):
    """A dataset did not validate; `report` holds every problem."""

    def __init__(self, report: Report, *, strict: bool = False) -> None:
        what = "errors or warnings (strict)" if strict else "errors"
        super().__init__(
            f"dataset {report.name!r} has {what}:\n{report.error_text()}",
            hint=f"fix the files named above, then check with `trainkit validate {hint_word(report.name, 'NAME')} --local`",
        )
        self.report = report


def length_check_for(
    model_size: str | None = None, *, max_tokens: int | None = None, tokenizer: Any = None
) -> LengthCheck:
    """The length rule for a model preset (`trainkit_core.models.presets`).

    The maximum is `max_tokens`, else the preset's ``max_seq_length``, else
    `DEFAULT_MAX_TOKENS`. Lengths are counted with `tokenizer` when given, else with the
    preset's base-model tokenizer when it is already in the local Hugging Face cache
    (never downloaded), else estimated at `CHARS_PER_TOKEN` characters per token.
    """
    preset = None
    if model_size is not None:  # an empty --model-size is an unknown size, not "none given"
        from trainkit_core.models.presets import get_preset

        preset = get_preset(model_size)
    limit = max_tokens or (preset.max_seq_length if preset else DEFAULT_MAX_TOKENS)
    if tokenizer is None and preset is not None:
        tokenizer = _cached_tokenizer(preset.base_model)
    if tokenizer is None:
        return LengthCheck.estimate(limit)
    from trainkit_core.models.chat_format import get_format, render_example

    fmt = get_format(preset.chat_format if preset else "gemma3")

    def count(example: Example) -> int:
        record = example.as_record()  # tools and calls counted too; images as their text only
        for message, (_, content) in zip(record["messages"], example.messages, strict=True):
            message["content"] = text_of(content)
        text = render_example(record, fmt, keep_thinking=fmt.native_tools)
        return len(tokenizer.encode(text, add_special_tokens=False))

    label = f"{preset.base_model} tokenizer" if preset else "tokenizer"
    return LengthCheck(limit, count, f"{label}, max {limit} tokens")


def _cached_tokenizer(model_id: str) -> Any:
    """The tokenizer of `model_id` from the local cache only; None when absent or unloadable."""
    import importlib.util

    if "/" not in model_id or model_id.startswith("trainkit/") or importlib.util.find_spec("transformers") is None:
        return None
    if not _in_hf_cache(model_id):
        return None  # checked first: importing transformers alone takes seconds
    try:
        from transformers import AutoTokenizer

        return AutoTokenizer.from_pretrained(model_id, local_files_only=True)
    except Exception:  # not cached, or no tokenizer files: the estimate is stated instead
        return None


def _in_hf_cache(model_id: str) -> bool:
    import os

    hub = os.environ.get("HF_HUB_CACHE") or os.path.join(
        os.environ.get("HF_HOME") or os.path.join(os.path.expanduser("~"), ".cache", "huggingface"), "hub"
    )
    return Path(hub, "models--" + model_id.replace("/", "--")).is_dir()

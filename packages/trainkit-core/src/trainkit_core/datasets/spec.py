"""`dataset.toml`: what a dataset folder declares about itself.

A dataset is a folder ``<datasets dir>/<name>/`` holding ``dataset.toml`` and JSONL
files. The spec names the dataset, describes it, states its format and lists its train
files, and either eval files or an eval split (a fraction of the train examples, chosen
with a seed so every reader picks the same ones)::

    name = "demo"
    description = "Uppercase a few words."
    format = "chat"                # or "prompt_completion"; "preference" (DPO), "prompt" (GRPO)
    train = ["train.jsonl"]
    eval = ["eval.jsonl"]          # optional; or:
    # eval_fraction = 0.1
    # eval_seed = 0
    # allow_chat_markers = false   # true accepts "<end_of_turn>" and the like inside content

Parsing problems are `Problem`s of ``dataset.toml`` (with a line where TOML gives one),
so the validator reports them like any other; `load_spec` raises them as a `UsageError`
for callers that only want a spec.
"""

from __future__ import annotations

import re
import sys
from pathlib import PurePosixPath
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator, model_validator

from trainkit_core.datasets.problems import Problem
from trainkit_core.errors import UsageError
from trainkit_core.ids import NAME_PATTERN as _NAME_RE
from trainkit_core.ids import check_name as _check_name

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover - Python 3.10
    import tomli as tomllib

SPEC_FILE = "dataset.toml"
FORMATS = ("chat", "prompt_completion", "preference", "prompt")
#: Largest `eval_seed` (the range of a 32-bit unsigned seed, which every RNG takes).
MAX_SEED = 2**32 - 1
#: One naming rule for datasets everywhere (`dataset.toml`, the CLI, the API, the
#: volume): `trainkit_core.ids.NAME_PATTERN`, lower-case letters, digits, '-' and '_'.
NAME_PATTERN = _NAME_RE.pattern


class DatasetSpec(BaseModel):
    """The parsed ``dataset.toml``. File names are relative to the dataset folder."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    name: str
    description: str = ""
    format: Literal["chat", "prompt_completion", "preference", "prompt"] = "chat"
    train: list[str] = Field(min_length=1)
    eval: list[str] = Field(default_factory=list)
    eval_fraction: float | None = Field(None, gt=0.0, lt=1.0)
    #: Bounded like every number trainkit reads from a file: a seed of thousands of
    #: digits once crashed every command that listed datasets.
    eval_seed: int = Field(0, ge=0, le=MAX_SEED)
    #: Accept chat-format markers (``<end_of_turn>``...) inside content: off, since they let
    #: one example inject turns; on for data that discusses the formats themselves.
    allow_chat_markers: bool = False

    @field_validator("name")
    @classmethod
    def _name(cls, value: str) -> str:
        try:
            return check_name(value)
        except UsageError as exc:
            raise ValueError(exc.message) from None

    @field_validator("train", "eval")
    @classmethod
    def _relative_jsonl(cls, files: list[str]) -> list[str]:
        for file in files:
            path = PurePosixPath(file)
            if not file or file.startswith("/") or "\\" in file or ".." in path.parts:
                raise ValueError(f"{file!r} must be a path inside the dataset folder, with '/'")
            if path.suffix != ".jsonl":
                raise ValueError(f"{file!r} must be a .jsonl file")
            if file == SPEC_FILE:
                raise ValueError(f"{file!r} is the spec itself")
        if len(set(files)) != len(files):
            raise ValueError("lists a file twice")
        return files

    @model_validator(mode="after")
    def _one_eval_source(self) -> DatasetSpec:
        if self.eval and self.eval_fraction is not None:
            raise ValueError("give either eval files or eval_fraction, not both")
        overlap = set(self.train) & set(self.eval)
        if overlap:
            raise ValueError(f"{', '.join(sorted(overlap))} listed as both train and eval file")
        return self

    @property
    def files(self) -> list[str]:
        """Every data file the spec lists, train first."""
        return [*self.train, *self.eval]

    @property
    def has_eval(self) -> bool:
        return bool(self.eval) or self.eval_fraction is not None


_TOML_LINE = re.compile(r"line (\d+)")


def parse_spec(
    data: bytes, *, folder_name: str | None = None, file: str = SPEC_FILE
) -> tuple[DatasetSpec | None, list[Problem]]:
    """Parse ``dataset.toml`` bytes; (spec, []) or (None, problems naming file and line).

    `folder_name`, when given, must equal the spec's `name` (a dataset is found by its
    folder, and synced under its name; the two must not disagree).
    """
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as exc:
        return None, [Problem(file, None, "error", "not-utf8", f"not UTF-8 (byte {exc.start})")]
    if "\ufeff" in text:
        bom_line = text[: text.index("\ufeff")].count("\n") + 1
        return None, [
            Problem(
                file,
                bom_line,
                "error",
                "bom",
                "holds a byte order mark (U+FEFF) where TOML allows none; save the file as UTF-8 without BOM",
            )
        ]
    try:
        raw = tomllib.loads(text)
    except RecursionError:
        return None, [Problem(file, None, "error", "toml-invalid", "invalid TOML: nested too deeply")]
    except ValueError as exc:  # TOMLDecodeError, and Python's limit on integers of thousands of digits
        match = _TOML_LINE.search(str(exc))
        line = int(match.group(1)) if match else None
        if line is None and "end of document" in str(exc):
            line = max(len(text.splitlines()), 1)
        return None, [Problem(file, line, "error", "toml-invalid", f"invalid TOML: {exc}")]
    try:
        spec = DatasetSpec.model_validate(raw)
    except ValidationError as exc:
        problems = []
        for err in exc.errors():
            field = ".".join(str(part) for part in err["loc"]) or "(spec)"
            message = str(err["msg"]).removeprefix("Value error, ")
            problems.append(
                Problem(
                    file,
                    _key_line(text, str(err["loc"][0]) if err["loc"] else ""),
                    "error",
                    "spec-invalid",
                    f"{field}: {message}",
                )
            )
        return None, problems
    if folder_name is not None and spec.name != folder_name:
        return None, [
            Problem(
                file,
                _key_line(text, "name"),
                "error",
                "spec-invalid",
                f"name {spec.name!r} differs from the folder name {folder_name!r}",
            )
        ]
    return spec, []


def _key_line(text: str, key: str) -> int | None:
    """The line where top-level `key` is set, so a spec problem points at it."""
    if not key:
        return None
    pattern = re.compile(rf"^\s*{re.escape(key)}\s*=")
    for number, line in enumerate(text.splitlines(), start=1):
        if pattern.match(line):
            return number
    return None


def check_name(name: str) -> str:
    """`name` when it is a valid dataset name; `UsageError` otherwise (it becomes a volume path)."""
    return _check_name(name, what="dataset name")


def load_spec(data: bytes, *, folder_name: str | None = None, file: str = SPEC_FILE) -> DatasetSpec:
    """`parse_spec`, raising `UsageError` with every problem when the spec is not valid."""
    spec, problems = parse_spec(data, folder_name=folder_name, file=file)
    if spec is None:
        raise UsageError("; ".join(p.describe() for p in problems))
    return spec

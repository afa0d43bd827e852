"""A problem found in a dataset, and the report that collects them.

Every problem names its file (relative to the dataset folder) and, where there is
one, its 1-based line, so a user can open the file at the spot. Errors stop a sync
and a training run; warnings (duplicates, examples that may be too long) do not,
unless the caller is strict.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any, Literal

Severity = Literal["error", "warning"]


@dataclass(frozen=True)
class Problem:
    file: str
    line: int | None
    severity: Severity
    code: str
    message: str

    @property
    def where(self) -> str:
        return f"{self.file}:{self.line}" if self.line is not None else self.file

    def describe(self) -> str:
        """``file:line: severity [code] message`` (the compiler convention editors understand)."""
        return f"{self.where}: {self.severity} [{self.code}] {self.message}"

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)


@dataclass
class Report:
    """What validation found. `counts` is examples per file; `source` says what was checked."""

    name: str
    source: str  # "local" or "volume"
    problems: list[Problem] = field(default_factory=list)
    counts: dict[str, int] = field(default_factory=dict)
    train_examples: int = 0
    eval_examples: int = 0
    images: int = 0  # distinct images the accepted examples show, per file
    audio: int = 0  # distinct audio parts, likewise
    length_check: str = ""
    version: str | None = None
    hash: str | None = None

    @property
    def errors(self) -> list[Problem]:
        return [p for p in self.problems if p.severity == "error"]

    @property
    def warnings(self) -> list[Problem]:
        return [p for p in self.problems if p.severity == "warning"]

    def ok(self, *, strict: bool = False) -> bool:
        """No errors (and, when `strict`, no warnings either)."""
        return not self.errors and not (strict and self.warnings)

    def summary(self) -> str:
        return (
            f"dataset {self.name!r} ({self.source}): {len(self.errors)} error(s), {len(self.warnings)} warning(s); "
            f"{self.train_examples} train / {self.eval_examples} eval examples"
            + (f", {self.images} images" if self.images else "")
            + (f", {self.audio} audio parts" if self.audio else "")
        )

    def error_text(self, *, limit: int = 20) -> str:
        """The summary and the first problems, for an exception or a run's error text."""
        lines = [self.summary(), *(p.describe() for p in self.problems[:limit])]
        if len(self.problems) > limit:
            lines.append(f"... and {len(self.problems) - limit} more")
        return "\n".join(lines)

    def as_dict(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "source": self.source,
            "ok": self.ok(),
            "errors": len(self.errors),
            "warnings": len(self.warnings),
            "train_examples": self.train_examples,
            "eval_examples": self.eval_examples,
            "images": self.images,
            "audio": self.audio,
            "counts": dict(self.counts),
            "length_check": self.length_check,
            "version": self.version,
            "hash": self.hash,
            "problems": [p.as_dict() for p in self.problems],
        }

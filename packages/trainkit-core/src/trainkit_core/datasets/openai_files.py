"""OpenAI fine-tuning files as trainkit datasets: which format a file is, and importing one into the datasets dir.

trainkit's `chat`, `preference` and `prompt` formats read OpenAI's supervised, DPO and
reinforcement lines as they are, so an OpenAI file needs only a `dataset.toml` naming its
format. The format is read from the first line, as OpenAI tells its kinds apart: ``input``
with ``preferred_output`` is a DPO pair, ``messages`` ending with the user's turn a
reinforcement prompt, ``messages`` ending with the assistant a supervised conversation.

The web API's `/v1/files` and `trainkit datasets import-openai` both use it.
"""

from __future__ import annotations

import json
import re
import shutil
import tempfile
from pathlib import Path

from trainkit_core.datasets.problems import Problem, Report
from trainkit_core.datasets.validate import DatasetInvalidError, check_local
from trainkit_core.errors import UsageError
from trainkit_core.ids import check_name

#: OpenAI's smallest training file; trainkit itself trains on fewer.
MIN_EXAMPLES = 10
_UNSAFE = re.compile(r"[^A-Za-z0-9._-]+")


def detect_format(content: bytes) -> str:
    """The trainkit dataset format of an OpenAI fine-tuning file, read from its first line.

    A first line that is not a JSON object gives `chat`: the reader then reports what is
    wrong with it, at its line.
    """
    for raw in content.splitlines():
        if not raw.strip():
            continue
        try:
            first = json.loads(raw)
        except ValueError:
            return "chat"
        if not isinstance(first, dict):
            return "chat"
        if "input" in first or "preferred_output" in first:
            return "preference"
        if "prompt" in first and "messages" not in first:
            return "prompt_completion"
        messages = first.get("messages")
        last = messages[-1] if isinstance(messages, list) and messages else None
        if isinstance(last, dict) and last.get("role") in ("user", "developer", "system"):
            return "prompt"
        return "chat"
    return "chat"


def safe_filename(filename: str, default: str = "train.jsonl") -> str:
    """The name a file gets inside its dataset folder: its own where it is plain, always ending in .jsonl."""
    name = _UNSAFE.sub("_", Path(filename or "").name).strip("._")[:100]
    if not name:
        return default
    return name if name.endswith(".jsonl") else f"{name}.jsonl"


def spec_text(name: str, fmt: str, train: list[str], eval_files: list[str] | None = None) -> str:
    """A `dataset.toml` for files already in the folder."""
    text = f'name = "{name}"\nformat = "{fmt}"\ntrain = {json.dumps(train)}\n'
    if eval_files:
        text += f"eval = {json.dumps(eval_files)}\n"
    return text


def import_openai_file(source: Path, name: str, datasets_dir: Path, *, validation: Path | None = None) -> Report:
    """Make dataset `name` in `datasets_dir` from OpenAI file `source` (and its `validation` file).

    The folder appears only when the files pass, OpenAI's own rule included (at least
    `MIN_EXAMPLES` training examples); otherwise nothing is written and
    `DatasetInvalidError` names each problem at its file and line.
    """
    check_name(name, what="dataset name")
    target = datasets_dir / name
    if target.exists():
        raise UsageError(f"dataset {name!r} already exists in {datasets_dir}", hint="choose another name, or remove it")
    files: dict[str, bytes] = {}
    for path in (source, validation):
        if path is None:
            continue
        try:
            files[safe_filename(path.name)] = path.read_bytes()
        except OSError as exc:
            raise UsageError(f"cannot read {path}: {exc.strerror or exc}") from None
    train_name = safe_filename(source.name)
    eval_names = [safe_filename(validation.name)] if validation is not None else []
    if eval_names == [train_name]:
        raise UsageError("the training and validation files have the same name", hint="rename one of them")
    fmt = detect_format(files[train_name])
    datasets_dir.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix=f".{name}-", dir=datasets_dir) as tmp:
        folder = Path(tmp) / name
        folder.mkdir()
        for rel, data in files.items():
            (folder / rel).write_bytes(data)
        (folder / "dataset.toml").write_text(spec_text(name, fmt, [train_name], eval_names))
        report = check_local(folder).report
        if report.errors == [] and report.train_examples < MIN_EXAMPLES:
            report.problems.append(
                Problem(
                    train_name,
                    None,
                    "error",
                    "too-few-examples",
                    f"{report.train_examples} examples; OpenAI's fine-tuning needs at least {MIN_EXAMPLES}",
                )
            )
        if report.errors:
            raise DatasetInvalidError(report)
        shutil.move(str(folder), target)
    return report

"""The datasets on this machine: ``<datasets dir>/<name>/dataset.toml`` plus JSONL files.

`list_local` finds them; `build_manifest` hashes one (``dataset.toml`` and every file
it lists), which is what `trainkit datasets` shows and what sync compares with the
volume's current version.

A dataset's files must lie inside its folder: a file (``dataset.toml`` included) that
is a symbolic link leading out of the folder is refused (`dataset_file`), so a sync
never uploads, say, ``~/.ssh/id_rsa`` because a link pointed there. Links inside the
folder, and a dataset folder that is itself a link, are fine.

NAME, where a command takes one (`find_local`), is a dataset name (the naming rule of
`trainkit_core.ids`) looked up in the datasets folder, or a path to a dataset folder:
anything holding a path separator, or starting with '.', '~' is a path. The folder
of a path must itself be named by the rule, since that name is the dataset's name
on the volume.
"""

from __future__ import annotations

import hashlib
import os
import stat
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from trainkit_core.datasets.audio import format_of_path
from trainkit_core.datasets.images import referenced_files
from trainkit_core.datasets.layout import FileInfo, Manifest, dataset_hash
from trainkit_core.datasets.problems import Problem
from trainkit_core.datasets.spec import SPEC_FILE, DatasetSpec, check_name, parse_spec
from trainkit_core.errors import NotFoundError, UsageError
from trainkit_core.toolkit.volume_paths import check_folder_setting


@dataclass
class LocalDataset:
    """One dataset folder. `spec` is None when ``dataset.toml`` does not parse (see `problems`)."""

    name: str
    path: Path
    spec: DatasetSpec | None
    problems: list[Problem] = field(default_factory=list)

    def manifest(self) -> Manifest:
        return build_manifest(self.path, self.spec)

    def as_dict(self) -> dict[str, Any]:
        data: dict[str, Any] = {"name": self.name, "path": str(self.path)}
        if self.spec is None:
            data["problems"] = [p.as_dict() for p in self.problems]
            return data
        data.update(format=self.spec.format, description=self.spec.description)
        try:
            manifest = self.manifest()
        except DatasetFileError as exc:
            data["problems"] = [{"file": exc.file, "message": str(exc)}]
            return data
        referenced = set(manifest.files) - {SPEC_FILE, *self.spec.files}  # the files the JSONL names
        audio = {path for path in referenced if format_of_path(path) is not None}
        data.update(
            files={
                path: {"sha256": f.sha256, "size": f.size, "examples": f.examples} for path, f in manifest.files.items()
            },
            train_examples=sum(manifest.files[f].examples for f in self.spec.train),
            eval_examples=sum(manifest.files[f].examples for f in self.spec.eval),
            images=len(referenced - audio),
            audio=len(audio),
            size=manifest.size,
            hash=manifest.hash,
        )
        return data


class DatasetFileError(UsageError):
    """A file the spec lists is missing or unreadable.

    `kind` names what stands at the path when it is not a regular file ("a folder",
    "a named pipe (FIFO)"), so a caller reports that without parsing the message.
    """

    def __init__(self, message: str, *, file: str, kind: str | None = None) -> None:
        super().__init__(message)
        self.file = file
        self.kind = kind


def dataset_file(folder: Path, rel: str) -> Path | None:
    """The file `rel` of the dataset in `folder`; None when it is missing.

    `DatasetFileError` when it resolves (through a symbolic link) to a place outside
    the folder.
    """
    path = Path(folder) / rel
    kind = file_kind(path)
    if kind is None:
        return None
    if kind != "file":
        raise DatasetFileError(f"{rel}: is {kind}, not a regular file", file=rel, kind=kind)
    if not path.resolve().is_relative_to(Path(folder).resolve()):
        raise DatasetFileError(
            f"{rel}: a symbolic link leading out of the dataset folder; copy the file into the folder instead",
            file=rel,
        )
    return path


def file_kind(path: Path) -> str | None:
    """What `path` is, following links: "file", another kind in words, or None when nothing is there.

    A FIFO, a device or a folder where a data file belongs would block a read, read
    forever (``/dev/zero``) or fail: they are named, never opened.
    """
    try:
        mode = path.stat().st_mode
    except FileNotFoundError:
        return None
    except OSError as exc:  # a link loop, a name too long, no permission
        return f"unreadable ({exc.strerror or exc})"
    except ValueError:  # a NUL byte in the name: no file system holds one
        return "unreadable (a NUL byte in its name)"
    if stat.S_ISREG(mode):
        return "file"
    if stat.S_ISDIR(mode):
        return "a folder"
    if stat.S_ISFIFO(mode):
        return "a named pipe (FIFO)"
    if stat.S_ISCHR(mode) or stat.S_ISBLK(mode):
        return "a device" + (f" ({os.path.realpath(path)})" if path.is_symlink() else "")
    if stat.S_ISSOCK(mode):
        return "a socket"
    return "not a regular file"


def open_local(folder: Path) -> LocalDataset:
    """The dataset in `folder` (its spec parsed, problems kept); `NotFoundError` without ``dataset.toml``."""
    folder = Path(folder)
    spec_file = dataset_file(folder, SPEC_FILE)
    if spec_file is None:
        raise NotFoundError(
            f"no {SPEC_FILE} in {str(folder)!r}", hint="a dataset is a folder holding dataset.toml and JSONL files"
        )
    spec, problems = parse_spec(spec_file.read_bytes(), folder_name=folder.name)
    return LocalDataset(folder.name, folder, spec, problems)


def is_path(name: str) -> bool:
    """Whether a NAME argument is a path to a dataset folder rather than a dataset name."""
    return "/" in name or "\\" in name or name.startswith((".", "~"))


def list_local(datasets_dir: Path) -> list[LocalDataset]:
    """Every folder of `datasets_dir` that holds a ``dataset.toml``, sorted by name."""
    datasets_dir = check_folder_setting(Path(datasets_dir), "TRAINKIT_DATASETS_DIR")
    if not datasets_dir.is_dir():
        return []
    found = []
    for child in sorted(datasets_dir.iterdir()):
        if not child.is_dir() or file_kind(child / SPEC_FILE) is None:
            continue
        try:
            found.append(open_local(child))
        except (UsageError, OSError, ValueError) as exc:  # one broken dataset never hides the others
            file = exc.file if isinstance(exc, DatasetFileError) else SPEC_FILE
            message = exc.message if isinstance(exc, UsageError) else f"unreadable: {exc}"
            found.append(LocalDataset(child.name, child, None, [Problem(file, None, "error", "file-invalid", message)]))
    return found


#: Datasets shipped inside trainkit-core (the demo's), so that `trainkit demo` and a first
#: `train --dataset demo` work from any folder, not only from a clone of the repository.
SHIPPED_DATASETS = Path(__file__).resolve().parent.parent / "data" / "datasets"


def find_local(datasets_dir: Path, name: str) -> LocalDataset:
    """The dataset `name` (a folder of `datasets_dir`, else a shipped one), or the one at a path (see the module docstring)."""
    if is_path(name):
        folder = Path(os.path.abspath(Path(name).expanduser()))  # ".." folded, links kept
        check_name(folder.name)
        if folder.exists() and not folder.is_dir():
            raise UsageError(f"{name!r} is a file; a dataset is a folder holding dataset.toml and JSONL files")
        return open_local(folder)
    check_name(name)
    folder = check_folder_setting(Path(datasets_dir), "TRAINKIT_DATASETS_DIR") / name
    if folder.is_dir() and file_kind(folder / SPEC_FILE) is not None:
        return open_local(folder)
    if (SHIPPED_DATASETS / name / SPEC_FILE).is_file():
        return open_local(SHIPPED_DATASETS / name)
    # Once each: a folder of the datasets dir hides a shipped dataset of the same name (`demo`).
    known = (
        ", ".join(dict.fromkeys(d.name for d in [*list_local(datasets_dir), *list_local(SHIPPED_DATASETS)])) or "none"
    )
    raise NotFoundError(
        f"no dataset {name!r} in {str(datasets_dir)!r} (found: {known})",
        hint="create <datasets dir>/<name>/dataset.toml, or set TRAINKIT_DATASETS_DIR",
    )


def hash_file(path: Path, *, lines: bool = True) -> FileInfo:
    """sha256, size and non-blank line count of one file, read once, line by line.

    With `lines=False` (an image) it is read in blocks and no line is counted: a
    picture holds few newlines, and line by line a file of gigabytes without one would
    be read into memory whole.
    """
    digest = hashlib.sha256()
    size = examples = 0
    with open(path, "rb") as handle:
        for line in handle if lines else iter(lambda: handle.read(1024 * 1024), b""):
            digest.update(line)
            size += len(line)
            if lines and line.strip():
                examples += 1
    return FileInfo(digest.hexdigest(), size, examples)


def build_manifest(folder: Path, spec: DatasetSpec | None = None) -> Manifest:
    """Hash ``dataset.toml``, the files it lists and the images they name; `UsageError` when a listed one is missing.

    An image that is missing is left out here: validation names it at its line.
    """
    folder = Path(folder)
    if spec is None:
        dataset = open_local(folder)
        if dataset.spec is None:
            raise UsageError("; ".join(p.describe() for p in dataset.problems))
        spec = dataset.spec
    files: dict[str, FileInfo] = {}
    for rel in [SPEC_FILE, *spec.files]:
        path = dataset_file(folder, rel)
        if path is None:
            raise DatasetFileError(f"{rel}: listed in {SPEC_FILE} but missing from {str(folder)!r}", file=rel)
        info = hash_file(path)
        files[rel] = FileInfo(info.sha256, info.size, 0 if rel == SPEC_FILE else info.examples)
    for rel in [image for data_file in spec.files for image in referenced_files((folder / data_file).read_bytes())]:
        path = dataset_file(folder, rel)
        if path is not None and rel not in files:
            info = hash_file(path, lines=False)
            files[rel] = FileInfo(info.sha256, info.size, 0)
    digest = dataset_hash({path: info.sha256 for path, info in files.items()})
    return Manifest(name=spec.name, hash=digest, format=spec.format, files=files)

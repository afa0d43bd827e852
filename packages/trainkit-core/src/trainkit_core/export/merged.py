"""Merged exports of trained models: where they live, and starting and fetching them.

A trained model is a LoRA adapter that loads only through trainkit (or peft). An
export merges it into its base and saves full weights that plain
``transformers.AutoModelForCausalLM.from_pretrained`` (or the model's own class, for
the multimodal Gemma checkpoints) loads with no trainkit and no peft. The ``export``
job (`trainkit_core.export.job`) does the merging where the models volume is, so on
a cloud provider the weights never travel through the user's machine; `download`
then streams any trained model or export to a local folder.

::

    exports/<run id>/                       the merge of trained/<run id>
    exports/<run id>-step<8 digits>/        the merge of one of its checkpoints
        config.json, generation_config.json, model*.safetensors
        tokenizer files, chat_template.jinja
        model-<type>.gguf, Modelfile        with --gguf: llama.cpp's file and Ollama's recipe
        trainkit_export.json                how it was made (written last)

No heavy imports here: the CLI and the API use this module directly.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

from trainkit_core.errors import ConflictError, NotFoundError, UsageError
from trainkit_core.models.trained.paths import ModelPath, parse_model_path
from trainkit_core.plugins.hookspecs import RunHandle, Volume

EXPORTS_DIR = "exports"
EXPORT_INFO = "trainkit_export.json"
#: Folders an export job stages in, under `EXPORTS_DIR`: the merge being written, and the
#: export it replaces while the new one is renamed into place. One a job left behind (killed
#: mid-merge) is removed by `trainkit gc` (`trainkit_core.runs.retention.collect_garbage`). Not
#: ``.tmp-``: volumes hide those names (a file write in flight), and gc would never see them.
EXPORT_PARTIAL_PREFIX = ".partial-"
EXPORT_REPLACED_PREFIX = ".replaced-"
EXPORT_STAGING_PREFIXES = (EXPORT_PARTIAL_PREFIX, EXPORT_REPLACED_PREFIX)
EXPORT_PATH_PATTERN = re.compile(r"^exports/(?P<run_id>run-[0-9]{8}-[0-9]{6}-[0-9a-f]{6})(?:-step(?P<step>[0-9]{8}))?$")

#: The dtypes an export may be saved in; `auto` keeps the base checkpoint's own (16-bit for a 4-bit base).
EXPORT_DTYPES = ("auto", "float32", "bfloat16", "float16")


def export_path(ref: ModelPath) -> str:
    """Where the merge of a (checked) model path is written on the models volume."""
    suffix = f"-step{ref.step:08d}" if ref.step is not None else ""
    return f"{EXPORTS_DIR}/{ref.run_id}{suffix}"


def check_export_request(model_path: object, dtype: object = "auto") -> tuple[ModelPath, str]:
    """The checked model path and dtype of an export request (text only: touches no file)."""
    ref = parse_model_path(model_path)
    if dtype not in EXPORT_DTYPES:
        raise UsageError(f"unknown export dtype {dtype!r}; expected one of {', '.join(EXPORT_DTYPES)}")
    return ref, str(dtype)


#: A run's TensorBoard event files (`--report-to tensorboard`), which `models download` may fetch too.
TENSORBOARD_PATH_PATTERN = re.compile(r"^runs/run-[0-9]{8}-[0-9]{6}-[0-9a-f]{6}/tensorboard$")


def parse_stored_path(value: object) -> str:
    """A path `models download` may fetch: a model path (`trained/…`), an export (`exports/…`)
    or a run's TensorBoard logs (`runs/<run id>/tensorboard`)."""
    if isinstance(value, str) and TENSORBOARD_PATH_PATTERN.fullmatch(value.rstrip("/")):
        return value.rstrip("/")
    if isinstance(value, str) and value.startswith(f"{EXPORTS_DIR}/"):
        text = value.rstrip("/")
        if not EXPORT_PATH_PATTERN.fullmatch(text):
            raise UsageError(
                f"export path {value[:80]!r} is malformed; expected exports/<run id> or exports/<run id>-step<8 digits>"
            )
        return text
    return parse_model_path(value).path


def start_export(
    provider: Any, model_path: str, *, dtype: str = "auto", gguf: str | None = None, dataset: str | None = None
) -> tuple[str, RunHandle]:
    """Check the request, then start the ``export`` job; (export path, job handle).

    The model must exist and hold an adapter before a job is started (`check_model_path`),
    so a typo costs no container. `gguf` adds a GGUF file of that type and an Ollama
    Modelfile, checked in llama.cpp on `dataset`'s eval prompts (default: the run's).
    """
    from trainkit_core.models.trained import check_model_path

    ref, dtype = check_export_request(model_path, dtype)
    extra: dict[str, Any] = {}
    if gguf is not None:
        from trainkit_core.export.gguf.writer import check_gguf_type

        extra = {"gguf": check_gguf_type(gguf), "dataset": dataset}
    if dataset is not None:
        # Before the merge (minutes of GPU on a real model): a malformed name or a dataset never synced.
        from trainkit_core.datasets.validate import read_current_manifest

        read_current_manifest(provider.volume("data"), dataset)
    check_model_path(ref.path, provider.volume("models"))
    handle = provider.spawn("export", model_path=ref.path, dtype=dtype, **extra)
    return export_path(ref), handle


def read_export_info(volume: Volume, path: str) -> dict[str, Any]:
    """The `trainkit_export.json` of an export; `NotFoundError` while it is not complete."""
    import json

    info = f"{path}/{EXPORT_INFO}"
    if not volume.exists(info):
        raise NotFoundError(f"no finished export at {path!r} on volume {volume.name!r}")
    return json.loads(volume.read_bytes(info))  # type: ignore[no-any-return]


def check_download_dest(dest: Path) -> Path:
    """`dest` checked as a folder a download may create (or fill, when empty); `UsageError` naming what is wrong.

    Checked before anything runs (an export's merge takes minutes), so a dangling link,
    a path under a file, a name longer than the file system allows or a folder that
    cannot be made is a clear error at once, never a traceback after the work.
    """
    import os
    import tempfile

    dest = Path(dest)
    for part in dest.absolute().parts:
        if len(os.fsencode(part)) > 255:  # checked first: stat() of such a path raises
            raise UsageError(f"folder name {part[:40]!r}… in {str(dest)[:80]!r}… is longer than 255 bytes")
    if dest.is_symlink() and not dest.exists():
        raise UsageError(f"{dest} is a link to nothing ({os.readlink(dest)!r})", hint="give a new folder")
    if dest.exists() and (not dest.is_dir() or any(dest.iterdir())):
        raise ConflictError(f"{dest} exists and is not an empty folder", hint="give a new folder")
    existing = dest.absolute().parent
    while not existing.exists() and not existing.is_symlink():
        existing = existing.parent
    if not existing.is_dir():
        raise UsageError(f"{dest} is under {existing}, which is not a folder", hint="give a new folder")
    try:  # a folder can be made there (read-only, /proc, no permission): made and removed at once
        os.rmdir(tempfile.mkdtemp(prefix=".tmp-download-check-", dir=existing))
    except OSError as exc:
        raise UsageError(
            f"{dest} cannot be written: no folder can be made in {existing} ({exc.strerror or exc})",
            hint="give a new folder",
        ) from None
    return dest


def download(volume: Volume, path: str, dest: Path) -> int:
    """Stream a trained model or an export from the models volume into folder `dest`; bytes written.

    `dest` must not exist or be an empty folder, so nothing of the user's is overwritten.
    An export is fetched only once it is complete (its info file is written last).
    Everything is written into a staging folder beside `dest` (``.tmp-…``) that is renamed
    to `dest` only when whole: a download that fails, is interrupted (Ctrl-C) or killed
    leaves nothing under `dest`, so it can simply be rerun. A full disk is an `OutOfSpaceError`.
    """
    import os
    import secrets
    import shutil

    from trainkit_core.errors import out_of_space, out_of_space_error

    path = parse_stored_path(path)
    dest = check_download_dest(Path(dest))
    if path.startswith(f"{EXPORTS_DIR}/"):
        read_export_info(volume, path)
    elif path.startswith("runs/"):
        if not volume.exists(path):
            raise NotFoundError(f"no TensorBoard logs at {path!r} on volume {volume.name!r}")
    else:
        from trainkit_core.models.trained import check_model_path

        check_model_path(path, volume)
    staging = dest.absolute().parent / f".tmp-download-{secrets.token_hex(6)}"
    try:
        staging.parent.mkdir(parents=True, exist_ok=True)
        staging.mkdir()
        volume.get_directory(path, staging)
        written = sum(f.stat().st_size for f in staging.rglob("*") if f.is_file())
        os.replace(staging, dest)  # onto a missing or empty folder: whole, or not there at all
    except BaseException as exc:
        shutil.rmtree(staging, ignore_errors=True)
        if out_of_space(exc):
            raise out_of_space_error(f"the download of {path}", str(dest.absolute().parent)) from None
        if isinstance(exc, OSError):
            raise UsageError(
                f"cannot write {path} to {dest}: {exc.strerror or exc}", hint="give a new folder"
            ) from None
        raise
    return written

"""trainkit's exceptions.

Everything trainkit raises on purpose derives from `TrainkitError`, so the edges (the
CLI and the API) can turn it into a message and an exit status or an HTTP status
without knowing every failure. Messages say what is wrong, where, and what to do next;
they never contain a secret.
"""

from __future__ import annotations

import re


class TrainkitError(Exception):
    """Base class. `hint` is the next thing the user should do, when there is one."""

    #: HTTP status the API answers with; the CLI exits with `exit_code`.
    http_status = 500
    exit_code = 1

    def __init__(self, message: str, *, hint: str | None = None) -> None:
        super().__init__(message)
        self.message = message
        self.hint = hint

    def __str__(self) -> str:
        return f"{self.message}\n  hint: {self.hint}" if self.hint else self.message


class UsageError(TrainkitError):
    """The user asked for something malformed: a bad name, path, value or file."""

    http_status = 400
    exit_code = 2


class InputTooLargeError(UsageError):
    """An input is over one of trainkit's bounds (a prompt past the model's context, an image
    over its byte limit); the message names the input and the bound. HTTP 413."""

    http_status = 413


class NotFoundError(TrainkitError):
    """Something named by the user does not exist (a run, a dataset, a model)."""

    http_status = 404
    exit_code = 3


class ConflictError(TrainkitError):
    """The request is well-formed but the current state forbids it (e.g. resume a running run)."""

    http_status = 409
    exit_code = 4


class ProviderError(TrainkitError):
    """A provider is missing, failed to load, or its backend refused or failed a request."""

    http_status = 502
    exit_code = 5


class PluginLoadError(ProviderError):
    """A plugin found through the `trainkit` entry points could not be imported."""


class MissingExtraError(ProviderError):
    """A job needs packages that are not installed; the message names the pip extra."""

    http_status = 501


def web_api_missing(module: str) -> MissingExtraError:
    """The error for serving without the web API installed: one message and exit status wherever it happens."""
    return MissingExtraError(f"the web API is not installed ({module} is missing)", hint="pip install trainkit-api")


class JobError(TrainkitError):
    """A job function failed; the message carries the job's own error text."""


class JobTimeout(TrainkitError):
    """Waiting for a job (or a run) took longer than the caller allowed."""

    http_status = 504
    exit_code = 6


class OutOfSpaceError(TrainkitError):
    """A write failed because its file system is full (or over quota). The message says
    what was being written, where, and how much was needed and free."""

    http_status = 507
    exit_code = 7


def out_of_space(exc: BaseException) -> bool:
    """Whether `exc` is a full disk: ``ENOSPC``/``EDQUOT``, or SQLite's "database or disk is full"."""
    import errno

    if isinstance(exc, OSError) and exc.errno in (errno.ENOSPC, errno.EDQUOT):
        return True
    return type(exc).__name__ == "OperationalError" and "disk is full" in str(exc)


def out_of_space_error(what: str, where: str, *, needed: int | None = None) -> OutOfSpaceError:
    """The `OutOfSpaceError` for a failed write of `what` in the folder or file `where`."""
    import os
    import shutil

    folder = where
    while folder and not os.path.isdir(folder):
        folder = os.path.dirname(folder)
    try:
        free = f"{shutil.disk_usage(folder or '.').free:,} bytes free"
    except OSError:
        free = "free space unknown"
    need = f"{needed:,} bytes needed, " if needed is not None else ""
    return OutOfSpaceError(
        f"out of disk space writing {what} in {where} ({need}{free})",
        hint="free space on that file system (trainkit gc removes what trainkit no longer needs), then try again",
    )


_WORD = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._/:-]{0,127}$")


def hint_word(value: object, placeholder: str) -> str:
    """`value` for a command line in a hint, when it is a plain word; else `placeholder`.

    Hints suggest commands to copy into a shell. A value that came from the user (a
    name, a path, a setting) goes into one only when it is made of letters, digits and
    ``._/:-``; anything else (spaces, quotes, ``;``, ``$(...)``) is replaced by a
    placeholder such as ``NAME``, so no hint ever turns raw input into a command.
    """
    return value if isinstance(value, str) and _WORD.match(value) and ".." not in value else placeholder

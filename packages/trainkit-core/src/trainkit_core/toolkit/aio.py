"""Async counterparts in Modal's idiom: ``f(...)`` blocks, ``await f.aio(...)`` does not.

Modal's SDK gives every blocking call an ``.aio`` twin (``fn.remote.aio(...)``); a
user who scripts trainkit from asyncio code expects the same of `TrainingRun`:
``await run.result.aio(timeout=600)``, ``await TrainingRun.from_id.aio(run_id)``,
``await wait_all.aio(runs)``; `from_id` and `save` also take the seed's
``is_async=True``, which returns the awaitable (`in_thread`). The twin runs the blocking call in a worker thread
(`asyncio.to_thread`), so the event loop keeps going while a run is awaited; the
store objects underneath are blocking clients (SQLite, a Modal Dict), and one
implementation of each call keeps both spellings answering the same.

`aio_function` wraps a module-level function, `aio_method` a method or a
classmethod (put it above ``@classmethod``); a pydantic model that uses the latter
lists `BlockingAndAsync` in its ``ignored_types``. No heavy imports.
"""

from __future__ import annotations

import asyncio
import functools
from collections.abc import Awaitable, Callable
from typing import Any, Generic, ParamSpec, TypeVar

P = ParamSpec("P")
R = TypeVar("R")


class AsyncCallable(Generic[P, R]):
    """A blocking callable with an awaitable twin, `.aio`."""

    def __init__(self, func: Callable[P, R]) -> None:
        self._func = func
        functools.update_wrapper(self, func)

    def __call__(self, *args: P.args, **kwargs: P.kwargs) -> R:
        return self._func(*args, **kwargs)

    async def aio(self, *args: P.args, **kwargs: P.kwargs) -> R:
        """The same call, awaited: it runs in a worker thread."""
        return await asyncio.to_thread(self._func, *args, **kwargs)


class BlockingAndAsync:
    """A descriptor: on access, the bound method (or classmethod) as an `AsyncCallable`."""

    def __init__(self, func: Any) -> None:
        self._func = func
        functools.update_wrapper(self, getattr(func, "__func__", func))  # type: ignore[arg-type]

    def __get__(self, instance: Any, owner: type | None = None) -> AsyncCallable[..., Any]:
        return AsyncCallable(self._func.__get__(instance, owner))


def in_thread(func: Callable[P, R], *args: P.args, **kwargs: P.kwargs) -> Awaitable[R]:
    """The blocking call as an awaitable that runs it in a worker thread when awaited.

    For the seed's ``is_async=True`` spelling (``await TrainingRun.from_id(id, is_async=True)``).
    """
    return asyncio.to_thread(func, *args, **kwargs)


def aio_method(func: Any) -> Any:
    """Give a method or a classmethod (put this above ``@classmethod``) an ``.aio`` twin."""
    return BlockingAndAsync(func)


def aio_function(func: Callable[P, R]) -> AsyncCallable[P, R]:
    """Give a module-level function an ``.aio`` twin."""
    return AsyncCallable(func)

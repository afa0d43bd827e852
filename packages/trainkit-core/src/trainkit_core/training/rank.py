"""The entry point of one rank of a run on several processes (torchrun runs it N times).

See `trainkit_core.training.distributed`: rank 0 runs the ordinary train job and keeps the
run's record; the other ranks train with a muted store (`_MutedKV`) and write no file to the
models volume. Kept apart from `distributed` because it calls the train job, which imports that.
"""

from __future__ import annotations

import json
import os
import sys
import tempfile
from pathlib import Path
from typing import TYPE_CHECKING, Any

from trainkit_core.training.distributed import VOLUME_PATHS_ENV, rank

if TYPE_CHECKING:
    from trainkit_core.plugins.hookspecs import KVStore, Volume
    from trainkit_core.plugins.job_context import JobContext


class _MutedKV:
    """A KV namespace that reads through to the real one and keeps its own writes in memory.

    Ranks other than 0 run the same train code as rank 0; what they would write to the run's
    record and events stays here, so the run has one record and one event stream.
    """

    def __init__(self, real: KVStore) -> None:
        self._real = real
        self._mine: dict[str, Any] = {}
        self._deleted: set[str] = set()

    def get(self, key: str, default: Any = None) -> Any:
        if key in self._mine:
            return self._mine[key]
        if key in self._deleted:
            return default
        return self._real.get(key, default)

    def put(self, key: str, value: Any) -> None:
        self._mine[key] = json.loads(json.dumps(value))  # a copy, as a real store keeps
        self._deleted.discard(key)

    def put_if_absent(self, key: str, value: Any) -> bool:
        if self.get(key) is not None:
            return False
        self.put(key, value)
        return True

    def delete(self, key: str) -> bool:
        existed = self.get(key) is not None
        self._mine.pop(key, None)
        self._deleted.add(key)
        return existed

    def keys(self, prefix: str = "") -> list[str]:
        real = [k for k in self._real.keys(prefix) if k not in self._deleted]
        return sorted(set(real) | {k for k in self._mine if k.startswith(prefix)})

    def items(self, prefix: str = "") -> list[tuple[str, Any]]:
        return [(k, self.get(k)) for k in self.keys(prefix)]

    # No `put_many`/`get_many`: the optional batch calls (`trainkit_core.toolkit.kv_values`) then fall
    # back to `put`/`get` here, so an event batch of this rank stays in its memory as well.


class _ReadOnlyVolume:
    """The models volume as a rank above 0 sees it: every read is the real one, every write is dropped.

    Reads matter: the checkpoint a run resumes from is found there (a rank that could not see
    it would train from step 0 beside a rank 0 at step N, and the run would silently learn
    from the wrong examples). Writes are rank 0's.
    """

    def __init__(self, real: Volume) -> None:
        self._real = real
        self.name = getattr(real, "name", "models")

    def exists(self, path: str) -> bool:
        return self._real.exists(path)

    def listdir(self, path: str = "", *, recursive: bool = False) -> list[Any]:
        return self._real.listdir(path, recursive=recursive)

    def read_bytes(self, path: str) -> bytes:
        return self._real.read_bytes(path)

    def get_file(self, path: str, local_path: Path) -> None:
        self._real.get_file(path, local_path)

    def get_directory(self, path: str, local_dir: Path) -> None:
        self._real.get_directory(path, local_dir)

    def write_bytes(self, path: str, data: bytes) -> None:
        return None

    def put_file(self, local_path: Path, path: str) -> None:
        return None

    def put_directory(self, local_dir: Path, path: str) -> None:
        return None

    def remove(self, path: str, *, recursive: bool = False) -> None:
        return None


def _other_rank(ctx: JobContext, run_id: str) -> None:
    """A rank above 0: train with a muted store over a read-only view of the models volume."""
    from trainkit_core.runs.training_run import RunStore
    from trainkit_core.toolkit.folder_volume import FolderVolume
    from trainkit_core.training.job import _train

    muted: dict[str, _MutedKV] = {}

    def kv(namespace: str) -> Any:
        return muted.setdefault(namespace, _MutedKV(ctx.kv(namespace)))

    store = RunStore(kv, _ReadOnlyVolume(FolderVolume(ctx.path("models"))))
    run = store.get(run_id)
    os.environ["HF_HOME"] = str(ctx.path("hf-cache"))
    scratch = Path(tempfile.mkdtemp(prefix=f"trainkit-{run_id}-rank{rank()}-"))
    # Rank 0 decides whether the run resumes; the latest complete checkpoint is what it resumes
    # from, and a fresh run has none: resuming here follows rank 0 either way.
    _train(ctx, run, scratch, resume=True)


def run_rank(ctx: JobContext, run_id: str, resume: bool) -> None:
    """This process's part of run `run_id`: rank 0 runs the train job, the others train muted.

    Called by `main` under torchrun, and by a provider's own launcher (`JobContext.launch_ranks`)
    in each of its workers, once the rank's environment is set (`distributed.rank_environment`,
    and ``RANK``/``WORLD_SIZE`` from the launcher).
    """
    if rank() == 0:
        from trainkit_core.training.job import train

        train(ctx, run_id, resume=resume)
    else:
        _other_rank(ctx, run_id)


def main() -> None:
    """Entry point of one rank (torchrun runs it N times)."""
    from trainkit_core.settings import Settings
    from trainkit_core.toolkit.detached import import_object

    factory, call_id, run_id, mode = sys.argv[1:5]
    ctx = import_object(factory)(Settings.from_env(), call_id)
    # The volumes where the parent saw them (a provider may have put them elsewhere than its defaults).
    ctx.volume_paths = {kind: Path(path) for kind, path in json.loads(os.environ[VOLUME_PATHS_ENV]).items()}
    run_rank(ctx, run_id, resume=mode == "resume")


if __name__ == "__main__":
    main()

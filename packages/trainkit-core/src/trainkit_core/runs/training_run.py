"""The training-run record: `TrainingRun`, stored on the provider's key-value store.

Provider-neutral: `call_id` is whatever the provider's `run_function` gave,
`provider_app_id`/`provider_app_url` whatever its app is. The record lives in the
``runs`` namespace under its id; when a run ends, the job also writes the record and
its events to the models volume (``runs/<id>/record.json``, ``runs/<id>/events.jsonl``)
so the history outlives key-value expiry (a Modal Dict entry expires after 7 idle
days). No heavy imports here.
"""

from __future__ import annotations

import contextlib
import functools
import itertools
import json
import logging
import sys
import threading
import time
from collections.abc import Awaitable, Callable, Iterator, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, cast

from pydantic import BaseModel, ConfigDict, Field, PrivateAttr, ValidationError, computed_field

from trainkit_core.errors import ConflictError, JobTimeout, NotFoundError, TrainkitError, UsageError
from trainkit_core.ids import check_name, check_run_id
from trainkit_core.models.trained.paths import ModelPath, trained_dir
from trainkit_core.plugins.hookspecs import KVStore, Volume
from trainkit_core.runs.events import CONTROL_NAMESPACE, EVENTS_NAMESPACE, EventLog, StopFlag
from trainkit_core.runs.lifecycle import RunLifecycle
from trainkit_core.runs.paths import history_dir
from trainkit_core.runs.record_writes import RecordWrites
from trainkit_core.runs.seed_names import SeedNames
from trainkit_core.runs.statuses import TERMINAL_STATUSES, UNFINISHED, RunStatus
from trainkit_core.toolkit.aio import BlockingAndAsync, aio_function, aio_method, in_thread
from trainkit_core.toolkit.kv_values import get_many_text

if TYPE_CHECKING:
    from trainkit_core.runs.index import RunIndex

log = logging.getLogger(__name__)

RUNS_NAMESPACE = "runs"


#: A run's phases, in the only order they may advance.
PHASES = ("provisioning", "loading_model", "loading_dataset", "training", "saving", "evaluating", "done")


def _index_facts(data: dict[str, Any]) -> dict[str, Any]:
    """What the index and a listing's filters read of a record (`RunIndex.check`)."""
    group = (data.get("metadata") or {}).get("group_id")
    return {
        "id": data.get("id"),
        "status": data.get("status") or "pending",
        "metadata": {"group_id": str(group) if group else None},
        "updated_at": data.get("updated_at") or 0,
    }


class _ListingMemo:
    """Finished runs as a listing of this store last encoded them, by run id and stored text.

    A finished run's record rarely changes and a dashboard polls the same page, so
    `RunStore.page_json` keeps, for each record it read, the facts the index checks and
    the record as JSON, under the exact stored text: any change to a record (another
    process, a repair) changes its text, and the memo is not used. Profiled: decoding,
    validating and encoding the records were four fifths of a page's CPU. Bounded: the
    oldest entries go first. Shared by the threads of a server.
    """

    SIZE = 4096

    def __init__(self) -> None:
        self._entries: dict[str, tuple[str, tuple[dict[str, Any], str]]] = {}
        self._lock = threading.Lock()

    def get(self, run_id: str, text: str) -> tuple[dict[str, Any], str] | None:
        found = self._entries.get(run_id)
        return found[1] if found is not None and found[0] == text else None

    def put(self, run_id: str, text: str, listed: tuple[dict[str, Any], str]) -> None:
        with self._lock:
            self._entries.pop(run_id, None)
            while len(self._entries) >= self.SIZE:
                del self._entries[next(iter(self._entries))]
            self._entries[run_id] = (text, listed)


class RunStore:
    """Where records, events and stop flags live: a provider's KV plus its models volume.

    Built from a `Provider` on the client side (`RunStore.for_provider`) and from a
    `JobContext` inside a job (`RunStore.for_job`); both give the same view.
    """

    def __init__(self, kv: Callable[[str], KVStore], models: Volume, provider: Any = None) -> None:
        self._kv_factory = kv
        self._kvs: dict[str, KVStore] = {}
        self.models = models
        self.provider = provider  # a trainkit_core.Provider on the client side, else None
        self._index: RunIndex | None = None
        self._logs: dict[str, EventLog] = {}
        self._memo = _ListingMemo()

    @classmethod
    def for_provider(cls, provider: Any) -> RunStore:
        return cls(provider.kv, provider.volume("models"), provider)

    @classmethod
    def for_job(cls, ctx: Any) -> RunStore:
        from trainkit_core.toolkit.folder_volume import FolderVolume

        return cls(ctx.kv, FolderVolume(ctx.path("models")))

    def kv(self, namespace: str) -> KVStore:
        """One store object per namespace for the store's life (a local one holds a connection)."""
        kv = self._kvs.get(namespace)
        if kv is None:
            kv = self._kvs.setdefault(namespace, self._kv_factory(namespace))
        return kv

    @property
    def records(self) -> KVStore:
        return self.kv(RUNS_NAMESPACE)

    def events(self, run_id: str) -> EventLog:
        """The run's event log; one object per run and store, so a batcher attached to it
        (`trainkit_core.runs.event_batch`) sees every append of this process, in order."""
        log = self._logs.get(run_id)
        if log is None:
            history = functools.partial(_history_events, self, run_id)
            log = self._logs.setdefault(run_id, EventLog(self.kv(EVENTS_NAMESPACE), run_id, history=history))
        return log

    def stop_flag(self, run_id: str) -> StopFlag:
        return StopFlag(self.kv(CONTROL_NAMESPACE), run_id)

    @property
    def index(self) -> RunIndex:
        """The index of runs (created time, status, group): `trainkit_core.runs.index`."""
        if self._index is None:
            from trainkit_core.runs.index import INDEX_NAMESPACE, RunIndex

            self._index = RunIndex(self.kv(INDEX_NAMESPACE), lambda: self.records, history=self.history_records)
        return self._index

    def get(self, run_id: str) -> TrainingRun:
        return TrainingRun.from_id(run_id, store=self)

    def history_records(self, prefix: str = "run-") -> dict[str, dict[str, Any]]:
        """The records kept on the models volume (`write_history`) of the runs whose id starts with `prefix`.

        The volume is the durable record: a provider's KV may forget an entry (Modal drops
        a Dict entry after 7 days without a read or write), so the index is rebuilt from
        these too. A record.json that is not a whole JSON object (a write cut short) is skipped.
        """
        if not self.models.exists("runs"):
            return {}
        found: dict[str, dict[str, Any]] = {}
        for entry in self.models.listdir("runs"):
            run_id = entry.path.rstrip("/").rsplit("/", 1)[-1]
            if not entry.is_dir or not run_id.startswith(prefix):
                continue
            text = _history_text(self, run_id)
            data = None if text is None else _json_object(text)
            if data is not None and data.get("id", run_id) == run_id:
                found[run_id] = data
        return found

    def page(
        self,
        *,
        status: str | None = None,
        group_id: str | None = None,
        limit: int = 100,
        after: str | None = None,
        reconcile: bool = True,
    ) -> tuple[list[TrainingRun], bool]:
        """One page of runs, newest first (run ids sort by creation time), and whether more follow.

        Reads the index, then the records of the page only: the cost does not grow with
        the number of runs. Every record read is checked against its index entry (and
        the entry repaired). With `reconcile`, unfinished runs are reconciled first, so a
        run whose job died is listed (and filtered) as `failed`; that is why a status
        filter also looks at unfinished runs. `has_more` can be true for a last page
        that then comes back empty, when the only run left was reconciled out of the
        status filter.
        """
        found, more = self._page(status, group_id, limit, after, reconcile, as_json=False)
        return [cast(TrainingRun, run) for _, run in found], more

    def page_json(
        self,
        *,
        status: str | None = None,
        group_id: str | None = None,
        limit: int = 100,
        after: str | None = None,
        reconcile: bool = True,
    ) -> tuple[list[tuple[str, str]], bool]:
        """`page`, each run as (id, its record as `TrainingRun.model_dump_json` gives it).

        For a reader that sends the page on as JSON (the API): a finished run's record
        whose stored text is the same as at an earlier listing of this store is neither
        decoded, validated nor encoded again (`_ListingMemo`), the bulk of a page's CPU
        when a dashboard polls the listing.
        """
        found, more = self._page(status, group_id, limit, after, reconcile, as_json=True)
        return [(run_id, cast(str, text)) for run_id, text in found], more

    def _page(
        self, status: str | None, group_id: str | None, limit: int, after: str | None, reconcile: bool, *, as_json: bool
    ) -> tuple[list[tuple[str, TrainingRun | str]], bool]:
        wanted = None if status is None else {status, *UNFINISHED}
        found: list[tuple[str, TrainingRun | str]] = []
        candidates = self.index.candidates(statuses=wanted, group=group_id, after=after)
        while chunk := list(itertools.islice(candidates, max(1, min(limit + 1 - len(found), 500)))):
            texts = get_many_text(self.records, [run_id for run_id, _ in chunk])  # one query on SQLite
            for run_id, _ in chunk:
                if texts.get(run_id) is None and (text := _history_text(self, run_id)) and _json_object(text):
                    texts[run_id] = text  # the KV forgot the record: the volume keeps it
            for run_id, entry in chunk:
                facts, item = self._read_listed(run_id, texts.get(run_id), as_json=as_json)
                if not self.index.check(run_id, entry, facts, group=group_id) or facts is None:
                    continue
                if group_id is not None and (facts["metadata"].get("group_id") or "") != group_id:
                    continue
                unfinished = facts["status"] in UNFINISHED
                if status is not None and facts["status"] != status and not (unfinished and reconcile):
                    continue
                if len(found) == limit:
                    return found, True
                if item is None:  # a record that is not a valid run: raises as it always did
                    item = TrainingRun.from_stored_data(json.loads(texts[run_id]), store=self)
                if unfinished and reconcile:
                    from trainkit_core.runs.reconcile import reconcile_run

                    assert isinstance(item, TrainingRun)  # unfinished runs are never taken from the memo
                    reconcile_run(item)  # a run whose job died must not be listed as running
                    if status is not None and item.status != status:
                        continue
                if as_json and isinstance(item, TrainingRun):
                    item = item.model_dump_json()
                found.append((run_id, item))
        return found, False

    def _read_listed(
        self, run_id: str, text: str | None, *, as_json: bool
    ) -> tuple[dict[str, Any] | None, TrainingRun | str | None]:
        """(what the index checks of a record, the run or, for a finished run with `as_json`, its JSON).

        (None, None) when there is no record or it is not a JSON object; (facts, None)
        for an object that is not a valid run (the caller raises when it lists it).
        """
        if text is None:
            return None, None
        if as_json and (hit := self._memo.get(run_id, text)) is not None:
            return hit
        try:
            run = TrainingRun.model_validate_json(text)  # profiled: 1.7x faster than json.loads + model_validate
        except ValidationError:
            data = json.loads(text)
            if not isinstance(data, dict):
                return None, None
            return _index_facts(data), None
        run._store, run._indexed, run._metadata_seen = self, (run.status, run.group_id), dict(run.metadata)
        facts = {
            "id": run.id,
            "status": run.status,
            "metadata": {"group_id": run.group_id},
            "updated_at": run.updated_at,
        }
        if as_json and run.status not in UNFINISHED:  # unfinished runs are reconciled: an object each time
            listed = (facts, run.model_dump_json())
            self._memo.put(run_id, text, listed)
            return listed
        return facts, run

    def list(self, *, status: str | None = None, group_id: str | None = None) -> list[TrainingRun]:
        """Every run (of a status, of a group), newest first; not reconciled. See `page`."""
        return self.page(status=status, group_id=group_id, limit=sys.maxsize, reconcile=False)[0]


class Checkpoint(BaseModel):
    """A saved checkpoint of a run on the models volume."""

    step: int
    path: str  # relative to the models volume, e.g. trained/<id>/checkpoints/00000050


class TrainingRun(SeedNames, RecordWrites, RunLifecycle):
    """One fine-tuning run, as stored. Field names follow the seed's record.

    The seed's names are kept beside trainkit's (`trainkit_core.runs.seed_names`): ``training_run_id``
    is `id`, ``framework_status`` is `phase`, ``function_call_id`` is `call_id`, ``source_model``
    is `base_model` (both spellings stored; the API's schema marks the seed's deprecated), ``modal_app_id``
    and ``modal_app_url`` are `provider_app_id` and `provider_app_url`; each spelling
    is an attribute (read and write), and a record that has only the seed's name
    loads. The map of every rename is docs/concepts/seed-map.md. Accounting: `duration_seconds` is the wall time the run's jobs ran (every
    attempt, not the time between a stop and its resume), `gpu_seconds` and
    `cost_usd` follow from it and the price fixed at launch (`price`,
    `trainkit_core.runs.pricing`). Blocking calls have an awaitable twin in Modal's idiom:
    ``await run.result.aio(...)`` (`trainkit_core.toolkit.aio`).
    """

    model_config = ConfigDict(extra="ignore", ignored_types=(BlockingAndAsync,))

    id: str
    provider: str = ""
    framework: str = ""  # the training backend: "unsloth" or "hf"
    config: dict[str, Any] = Field(default_factory=dict)
    dataset_id: str = ""
    dataset_hash: str = ""
    status: RunStatus = "pending"
    phase: str = "provisioning"
    created_at: float = 0.0
    started_at: float | None = None
    ended_at: float | None = None
    completed_at: float | None = None
    updated_at: float = 0.0
    duration_seconds: float | None = None
    step: int = 0
    total_steps: int | None = None
    step_times: dict[str, dict[str, float | None]] = Field(default_factory=dict)
    substep_times: dict[str, dict[str, dict[str, float | int | bool | None]]] = Field(default_factory=dict)
    error_message: str | None = None
    metadata: dict[str, Any] = Field(default_factory=dict)
    #: The provider's id of the run's job call (`run_function`'s handle): noted by the
    #: submitter, or by the job itself should its submitter die first (the seed's `function_call_id`).
    call_id: str = ""
    app_name: str = ""
    provider_app_id: str = ""
    provider_app_url: str = ""
    deployment_id: str = ""
    #: The Hugging Face id of the model the run trains (the seed's `source_model`).
    base_model: str = ""
    metrics: dict[str, Any] = Field(default_factory=dict)
    attempt: int = 1
    #: The job call the attempts below belong to (set by the job; a new call starts a new count).
    attempt_call_id: str = ""
    #: Attempts the current job call has made (preemptions not counted), and how many its provider allows.
    call_attempts: int = 0
    max_attempts: int = 1
    latest_rollout: dict[str, Any] | None = None
    dashboard_components: list[dict[str, Any]] = Field(default_factory=list)
    #: When the attempt under way started its job (None between attempts); its time is
    #: added to `duration_seconds` when it ends (`end_attempt`).
    attempt_started_at: float | None = None
    #: The price fixed at launch: provider, gpu, gpus, usd_per_hour (per GPU, or for the
    #: machine when gpus is 0), source and table date (`trainkit_core.runs.pricing.price_for`).
    price: dict[str, Any] = Field(default_factory=dict)
    #: Limits that stop the run gracefully: max_cost_usd, max_duration_s, and for a sweep
    #: group_max_cost_usd (`trainkit_core.training.budget`).
    budget: dict[str, Any] = Field(default_factory=dict)
    #: Why a `stopped` run stopped (the stop request's reason: the CLI, the API, a budget).
    stop_reason: str | None = None

    _store: RunStore | None = PrivateAttr(default=None)

    @computed_field  # type: ignore[prop-decorator]
    @property
    def method(self) -> str:
        """How the run trains (sft, dpo, grpo: `trainkit_core.training.methods`); records before methods are sft."""
        return str(self.config.get("method") or "sft")

    # ------------------------------------------------------------------ accounting

    def job_seconds(self, now: float | None = None) -> float | None:
        """Wall time the run's jobs have run: the ended attempts plus the one under way."""
        if self.attempt_started_at is None:
            return self.duration_seconds
        now = time.time() if now is None else now
        return (self.duration_seconds or 0.0) + max(0.0, now - self.attempt_started_at)

    def gpu_seconds_at(self, now: float | None = None) -> float:
        return round((self.job_seconds(now) or 0.0) * int(self.price.get("gpus") or 0), 3)

    def cost_at(self, now: float | None = None) -> float | None:
        """What the run has cost so far, in US dollars; None when it has no price (`price`)."""
        rate = self.price.get("usd_per_hour")
        if isinstance(rate, bool) or not isinstance(rate, (int, float)):
            return None
        units = max(1, int(self.price.get("gpus") or 0))
        return round((self.job_seconds(now) or 0.0) / 3600 * units * float(rate), 6)

    def accounting(self, now: float | None = None) -> dict[str, Any]:
        """Time and money so far, as `trained_model.json` records them."""
        now = time.time() if now is None else now
        return {
            "job_seconds": self.job_seconds(now),
            "gpu_seconds": self.gpu_seconds_at(now),
            "cost_usd": self.cost_at(now),
            "price": dict(self.price),
            "as_of": now,
        }

    @computed_field  # type: ignore[prop-decorator]
    @property
    def gpu_seconds(self) -> float:
        """GPU-seconds so far (GPUs x job time); 0 for a CPU run."""
        return self.gpu_seconds_at()

    @computed_field  # type: ignore[prop-decorator]
    @property
    def cost_usd(self) -> float | None:
        """Cost so far at the price fixed at launch; None when unpriced."""
        return self.cost_at()

    def begin_attempt(self, now: float) -> None:
        """A job attempt starts. One that died without ending is counted to its last write."""
        if self.attempt_started_at is not None:
            self.end_attempt(max(self.updated_at, self.attempt_started_at))
        self.attempt_started_at = now

    def end_attempt(self, now: float) -> None:
        """The attempt under way ended at `now`: its time joins `duration_seconds`."""
        if self.attempt_started_at is not None:
            self.duration_seconds = (self.duration_seconds or 0.0) + max(0.0, now - self.attempt_started_at)
            self.attempt_started_at = None
        elif self.duration_seconds is None and self.started_at:
            self.duration_seconds = max(0.0, now - self.started_at)  # a record from before attempts were timed

    # ------------------------------------------------------------------ loading

    @classmethod
    def from_stored_data(cls, data: object, *, store: RunStore | None = None) -> TrainingRun:
        if isinstance(data, (str, bytes)):
            data = json.loads(data)
        if not isinstance(data, dict):
            raise UsageError("a stored run must be a JSON object")
        try:
            run = cls.model_validate(data)
        except ValueError as exc:
            raise UsageError(f"a stored run is not a valid record: {exc}") from None
        run._store = store
        run._indexed = (run.status, run.group_id)
        run._metadata_seen = run.model_dump(mode="json", include={"metadata"})["metadata"]
        return run

    @aio_method
    @classmethod
    def from_id(
        cls, run_id: str, *, store: RunStore | None = None, is_async: bool = False
    ) -> TrainingRun | Awaitable[TrainingRun]:
        """The run from the KV store, else from its history on the models volume.

        Without `store`, the configured provider's (``TRAINKIT_PROVIDER``, default
        `local`). From async code, ``await TrainingRun.from_id(run_id, is_async=True)``
        (the seed's spelling) or ``await TrainingRun.from_id.aio(run_id)`` (Modal's).
        """
        if is_async:
            return in_thread(cls.from_id, run_id, store=store)
        check_run_id(run_id)
        if store is None:
            store = default_store()
        return cls.from_stored_data(_stored(store, run_id), store=store)

    @property
    def store(self) -> RunStore:
        if self._store is None:
            raise UsageError(f"run {self.id} is not attached to a store")
        return self._store

    def attach(self, store: RunStore) -> TrainingRun:
        self._store = store
        return self

    def reload(self) -> TrainingRun:
        fresh = TrainingRun.from_stored_data(_stored(self.store, self.id), store=self.store)
        for name in type(self).model_fields:
            setattr(self, name, getattr(fresh, name))
        self._indexed = fresh._indexed
        self._metadata_seen = fresh._metadata_seen
        return self

    # ------------------------------------------------------------------ state

    @property
    def error(self) -> str | None:
        return self.error_message or None

    @property
    def group_id(self) -> str | None:
        value = self.metadata.get("group_id")
        return str(value) if value else None

    @property
    def events(self) -> EventLog:
        return self.store.events(self.id)

    @staticmethod
    @aio_function
    def wait_all(
        runs: Sequence[TrainingRun], *, poll_interval: float = 30, timeout: float | None = None
    ) -> list[TrainingRun]:
        """The module's `wait_all`, as a member: seed 002 calls it ``TrainingRun.wait_all(runs)``."""
        return wait_all(runs, poll_interval=poll_interval, timeout=timeout)

    def advance_phase(self, phase: str) -> str | None:
        """Advance the phase (not saved); None when the phase is unknown or would go back."""
        if phase not in PHASES:
            return None
        if self.phase in PHASES and PHASES.index(phase) < PHASES.index(self.phase):
            return None
        self.phase = phase
        return phase

    def start_phases(self) -> None:
        """A job attempt starts: the phase goes back to `provisioning`, timed from now (not saved)."""
        self.phase = PHASES[0]
        self.step_times[PHASES[0]] = {"start": time.time(), "end": None}

    def enter_phase(self, phase: str, *, save: bool = True) -> None:
        """Advance the phase, timing it in `step_times`, and say so in an event.

        The one way a job changes phase, so that every phase gets its start and the
        one before it its end (`end_phase` ends the last). `save=False` when the
        caller saves the record next. Phases are timed on this module's clock.
        """
        previous = self.phase
        if self.advance_phase(phase) is None:
            return
        self.end_phase(previous)
        self.step_times[phase] = {"start": time.time(), "end": None}
        if save:
            self.save()
        self.events.append("phase", phase=phase)

    def end_phase(self, phase: str | None = None) -> None:
        """Give the phase (default: the current one) its end in `step_times`, if it has none (not saved)."""
        entry = self.step_times.get(self.phase if phase is None else phase)
        if entry is not None and entry.get("end") is None:
            entry["end"] = time.time()

    @aio_method
    def record_substep(self, phase: str, name: str, start: float, end: float | None, **extra: Any) -> None:
        """Note a timed piece of work of `phase` in `substep_times[phase][name]` (not saved).

        `extra` figures are numbers or booleans, as the seed's type says.
        """
        seconds = None if end is None else round(max(0.0, end - start), 6)
        self.substep_times.setdefault(phase, {})[name] = {"start": start, "end": end, "seconds": seconds, **extra}

    @contextlib.contextmanager
    def substep(self, phase: str, name: str, **extra: Any) -> Iterator[dict[str, Any]]:
        """Time the block as substep `name` of `phase`; `ok` says whether it ended without raising.

        The yielded dict takes more figures (e.g. how many examples were tokenized).
        """
        start = time.time()
        figures: dict[str, Any] = dict(extra)
        ok = False
        try:
            yield figures
            ok = True
        finally:
            self.record_substep(phase, name, start, time.time(), ok=ok, **figures)

    # ------------------------------------------------------------------ results

    @property
    def checkpoint_dir(self) -> str:
        return f"{trained_dir(self.id)}/checkpoints"

    def checkpoints(self) -> list[Checkpoint]:
        """Complete checkpoints (those with a `done` marker), oldest first."""
        if not self.store.models.exists(self.checkpoint_dir):
            return []
        found = []
        for entry in self.store.models.listdir(self.checkpoint_dir):
            name = entry.path.rsplit("/", 1)[-1]
            if entry.is_dir and name.isdigit() and self.store.models.exists(f"{entry.path}/done"):
                found.append(Checkpoint(step=int(name), path=entry.path))
        return sorted(found, key=lambda c: c.step)

    def latest_checkpoint(self) -> Checkpoint | None:
        found = self.checkpoints()
        return found[-1] if found else None

    @property
    def model(self) -> ModelPath:
        """The final model when the run saved one, else its latest checkpoint."""
        final = trained_dir(self.id)
        if self.store.models.exists(f"{final}/trained_model.json"):
            return ModelPath(path=final, run_id=self.id)
        latest = self.latest_checkpoint()
        if latest is None:
            raise NotFoundError(f"run {self.id} has no saved model or checkpoint yet")
        return ModelPath(path=latest.path, run_id=self.id, step=latest.step)

    def record_latest_rollout(self, rollout: dict[str, Any]) -> None:
        """Keep the latest sample generations on fixed prompts (saved with the record)."""
        latest = {"time": time.time(), **rollout}

        def keep(run: TrainingRun) -> None:
            run.latest_rollout = latest

        self.update_shared(keep)
        self.events.append("rollout", **rollout)

    def add_dashboard_component(
        self, *, name: str, component_type: str, from_path: str | Path, replace: bool = False
    ) -> dict[str, Any]:
        """Attach a file, or a folder with its `index.<type>`, to the run for the dashboard.

        Each call stores a new immutable version (`trainkit_core.runs.components`) and
        points the record at it; `replace=True` moves the pointer of an existing name,
        leaving the old version whole for whoever still reads it until `trainkit gc`.
        Works while the run trains and after it ended.
        """
        from trainkit_core.runs import components

        check_name(name, what="component name")
        stored = self.store.records.get(self.id)
        present = (stored.get("dashboard_components") or []) if isinstance(stored, dict) else self.dashboard_components
        if any(c.get("name") == name for c in present) and not replace:
            raise ConflictError(f"run {self.id} already has a component {name!r}; pass replace=True")
        pointer = components.store_component(
            self.store.models, self.id, name=name, component_type=component_type, source=Path(from_path)
        )

        def attach(run: TrainingRun) -> None:
            earlier = [c for c in run.dashboard_components if c["name"] == name]
            if earlier and not replace:
                raise ConflictError(f"run {self.id} already has a component {name!r}; pass replace=True")
            pointer["version"] = max((int(c.get("version") or 1) for c in earlier), default=0) + 1
            run.dashboard_components = [c for c in run.dashboard_components if c["name"] != name] + [pointer]

        self.update_shared(attach)
        fresh = self.store.records.get(self.id)
        if isinstance(fresh, dict) and fresh.get("status") in TERMINAL_STATUSES:
            # The history is what outlives the key-value record, and an ended run's job no longer writes it.
            record = TrainingRun.from_stored_data(fresh, store=self.store)
            self.store.models.write_bytes(
                f"{history_dir(self.id)}/record.json", record.model_dump_json(indent=2).encode()
            )
        return pointer


def _history_text(store: RunStore, run_id: str) -> str | None:
    """A run's record.json on the models volume as text, or None when there is none."""
    path = f"{history_dir(run_id)}/record.json"
    try:
        return store.models.read_bytes(path).decode() if store.models.exists(path) else None
    except (OSError, UnicodeDecodeError, TrainkitError):
        return None


def _history_events(store: RunStore, run_id: str) -> list[dict[str, Any]]:
    """A run's events as `write_history` kept them on the models volume; a cut-short last line is left out."""
    path = f"{history_dir(run_id)}/events.jsonl"
    try:
        if not store.models.exists(path):
            return []
        lines = store.models.read_bytes(path).decode().splitlines()
    except (OSError, UnicodeDecodeError, TrainkitError):
        return []
    return [event for line in lines if line.strip() and (event := _json_object(line)) is not None]


def _json_object(text: str) -> dict[str, Any] | None:
    try:
        data = json.loads(text)
    except ValueError:
        return None
    return data if isinstance(data, dict) else None


def _stored(store: RunStore, run_id: str) -> Any:
    """A run's stored record: from the KV store, else its history on the models volume."""
    data = store.records.get(run_id)
    if data is None:
        path = f"{history_dir(run_id)}/record.json"
        if not store.models.exists(path):
            raise NotFoundError(f"no run {run_id!r}", hint="trainkit runs list shows the runs")
        data = json.loads(store.models.read_bytes(path))
    return data


def default_store() -> RunStore:
    """The run store of the configured provider (``TRAINKIT_PROVIDER``, default `local`)."""
    from trainkit_core.plugins.provider import get_provider

    return RunStore.for_provider(get_provider())


@aio_function
def wait_all(
    runs: Sequence[TrainingRun], *, poll_interval: float = 30, timeout: float | None = None
) -> list[TrainingRun]:
    """Wait for every run to end, looking at all of them every `poll_interval` seconds.

    Each run is released (`TrainingRun.release`) as soon as it is seen done, as the
    seed's ``wait_all`` closes each run. Returns the runs, reloaded. `JobTimeout` when
    `timeout` passes first. ``await wait_all.aio(runs)`` from async code.
    """
    deadline = None if timeout is None else time.monotonic() + timeout
    waiting = list(runs)
    while True:
        for run in list(waiting):
            run.reload()
            if run.done():
                run.release()
                waiting.remove(run)
        if not waiting:
            return list(runs)
        if deadline is not None and time.monotonic() >= deadline:
            left = ", ".join(r.id for r in waiting)
            raise JobTimeout(f"{len(waiting)} run(s) still unfinished after {timeout:g} s: {left}")
        time.sleep(poll_interval if deadline is None else max(0.0, min(poll_interval, deadline - time.monotonic())))

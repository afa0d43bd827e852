"""Event blocks, the background batcher, and a training callback that never waits for the store."""

from __future__ import annotations

import multiprocessing
import threading
import time
from pathlib import Path

import pytest

from trainkit_core import get_provider
from trainkit_core.runs.event_batch import EventBatcher
from trainkit_core.runs.events import HINT_LAG, EventLog
from trainkit_core.runs.training_run import RunStore, TrainingRun
from trainkit_core.testing.slow_kv import SlowKV, slow_factory
from trainkit_core.toolkit.sqlite_kv import LocalKV
from trainkit_core.training.background import RecordWriter
from trainkit_core.training.progress import Reporter


def test_a_block_is_numbered_in_order_and_read_from_anywhere(trainkit_home: Path) -> None:
    log = EventLog(LocalKV(trainkit_home, "events"), "run-x")
    assert log.append("log", message="one") == 1
    seqs = log.write([{"type": "progress", "time": 0.0, "step": s} for s in range(1, 6)])
    assert seqs == [2, 3, 4, 5, 6]
    assert log.append("log", message="after") == 7
    events = log.read()
    assert [e["seq"] for e in events] == list(range(1, 8))
    assert all("_span" not in e for e in events)
    assert [e["step"] for e in log.read(after=3, limit=2)] == [3, 4]  # from inside the block
    assert log.last_seq() == 7
    other = EventLog(LocalKV(trainkit_home, "events"), "run-x")  # another process: no cached number
    assert other.append("log", message="other") == 8


def test_a_block_costs_two_store_calls(trainkit_home: Path) -> None:
    slow = SlowKV(LocalKV(trainkit_home, "events"), delay_s=0)
    log = EventLog(slow, "run-x")
    log.append("log", message="first")  # learns the last number
    slow.calls.clear()
    log.write([{"type": "progress", "time": 0.0, "step": s} for s in range(100)])
    assert sum(slow.calls.values()) == 2
    slow.calls.clear()
    assert len(EventLog(slow, "run-x").read()) == 101
    assert sum(slow.calls.values()) == 3  # `last`, the events in one `get_many`, a look past `last`


@pytest.mark.slow
def test_with_a_lazy_hint_an_event_costs_one_call_and_readers_still_see_every_one(trainkit_home: Path) -> None:
    slow = SlowKV(LocalKV(trainkit_home, "events"), delay_s=0)
    log = EventLog(slow, "run-x")
    log.lazy_hint = True
    log.append("log", message="first")  # learns the last number
    slow.calls.clear()
    for n in range(HINT_LAG - 2):
        log.append("log", message=f"event {n}")
    assert sum(slow.calls.values()) == HINT_LAG - 2  # the claim is the write
    reader = EventLog(LocalKV(trainkit_home, "events"), "run-x")  # another process: the hint lags
    assert reader.last_seq() == HINT_LAG - 1 and len(reader.read()) == HINT_LAG - 1
    assert reader.append("log", message="other") == HINT_LAG
    log.append("log", message="after")  # past the other writer's event; the hint catches up
    assert int(LocalKV(trainkit_home, "events").get("run-x/last")) == HINT_LAG + 1
    assert [e["message"] for e in reader.read()][-2:] == ["other", "after"]


def test_two_writers_never_share_a_number(trainkit_home: Path) -> None:
    with multiprocessing.get_context("spawn").Pool(2) as pool:
        pool.starmap(_write_blocks, [(str(trainkit_home), w) for w in range(2)])
    events = EventLog(LocalKV(trainkit_home, "events"), "run-x").read()
    assert [e["seq"] for e in events] == list(range(1, len(events) + 1))
    written = sorted((e["writer"], e["n"]) for e in events)
    assert written == sorted((w, n) for w in range(2) for n in range(60))


def _write_blocks(home: str, writer: int) -> None:
    log = EventLog(LocalKV(Path(home), "events"), "run-x")
    for start in range(0, 60, 3):
        log.write([{"type": "log", "time": 0.0, "writer": writer, "n": n} for n in range(start, start + 3)])


def test_a_block_cut_short_by_a_crash_is_skipped_once_old(trainkit_home: Path) -> None:
    kv = LocalKV(trainkit_home, "events")
    log = EventLog(kv, "run-x")
    log.append("log", message="one")
    kv.put("run-x/0000000002", {"type": "log", "time": time.time(), "seq": 2, "_span": 3})  # its rest never came
    assert [e["seq"] for e in log.read()] == [1, 2]  # a young block: its rest may still come
    kv.put("run-x/0000000002", {"type": "log", "time": time.time() - 3600, "seq": 2, "_span": 3})
    EventLog(kv, "run-x").append("log", message="later")  # the next writer skips the claimed block
    assert [e["seq"] for e in log.read()] == [1, 2, 5]


def test_the_batcher_writes_in_the_background_and_on_close(trainkit_home: Path) -> None:
    slow = SlowKV(LocalKV(trainkit_home, "events"), delay_s=0)
    log = EventLog(slow, "run-x")
    with pytest.raises(RuntimeError), EventBatcher(log, interval_s=3600):
        for n in range(500):
            assert log.append("progress", step=n) == 0  # queued, not written
        assert slow.calls[threading.current_thread().name] == 0
        raise RuntimeError("the training crashed")
    assert log.batcher is None
    assert [e["step"] for e in log.read()] == list(range(500))  # written on the way out
    with EventBatcher(log, interval_s=0.01):
        log.append("log", message="soon")
        reader = EventLog(LocalKV(trainkit_home, "events"), "run-x")  # another process's view
        deadline = time.monotonic() + 30
        while not reader.read(after=500):
            assert time.monotonic() < deadline, "the batcher did not write in the background"
            time.sleep(0.01)
        assert reader.read(after=500)[0]["message"] == "soon"


def test_training_steps_never_wait_for_a_slow_store(trainkit_home: Path, tmp_path: Path) -> None:
    """The step (this thread) makes no store call; the stop still lands; nothing is lost."""
    provider = get_provider("local")
    kv = slow_factory(provider.kv, delay_s=0.05)
    store = RunStore(kv, provider.volume("models"), provider)
    run = TrainingRun(id="run-20261201-000000-abcdef", status="running").attach(store)
    run.save()
    reporter = Reporter(
        run,
        models_root=tmp_path,
        save_checkpoint_extras=lambda folder, step: None,
        commit=lambda: None,
        event_interval_s=0,
        save_interval_s=0,
    )
    reporter.train_begin(0, 10_000)
    me = threading.current_thread().name
    before = kv.calls[me]  # type: ignore[attr-defined]
    stopped_at = None
    for step in range(1, 10_001):
        reporter.log(step, 10_000, {"loss": 1.0 / step}, tokens=step)
        if step == 20:
            RunStore(provider.kv, provider.volume("models")).get(run.id).close("enough")  # another process asks
        if reporter.should_stop():
            stopped_at = step
            break
        time.sleep(0.005)  # a step
    assert kv.calls[me] == before, "a training step waited for the store"  # type: ignore[attr-defined]
    assert stopped_at is not None, "the stop request was never seen"
    reporter.close()
    fresh = RunStore(provider.kv, provider.volume("models")).get(run.id)
    progress = [e for e in fresh.events.read() if e["type"] == "progress"]
    assert [e["step"] for e in progress] == list(range(1, stopped_at + 1))  # every step's event, in order
    assert fresh.step == stopped_at  # the record as the last step left it


def test_the_record_writer_writes_the_newest_copy_and_never_an_older_one_after_it() -> None:
    written: list[int] = []
    first_write_started, release = threading.Event(), threading.Event()

    def write(data: dict[str, int]) -> None:
        if not written:
            first_write_started.set()
            assert release.wait(30)
        written.append(data["n"])

    writer = RecordWriter(write).start()
    writer.submit(lambda: {"n": 1})
    assert first_write_started.wait(30)  # copy 1 is being written (a slow store)
    for n in range(2, 6):
        writer.submit(lambda n=n: {"n": n})  # queued meanwhile: only the newest is kept
    release.set()
    writer.close()
    assert written == [1, 5]


def test_the_record_writer_tries_again_and_close_raises_while_the_store_refuses() -> None:
    written: list[int] = []
    refusing = {"on": True}

    def write(data: dict[str, int]) -> None:
        if refusing["on"]:
            raise ConnectionError("store unavailable")
        written.append(data["n"])

    writer = RecordWriter(write, retry_s=0.01).start()
    writer.submit(lambda: {"n": 1})
    time.sleep(0.05)  # a few failed tries in the background
    with pytest.raises(ConnectionError):
        writer.close()  # the copy is still not written: the caller hears of it
    refusing["on"] = False
    writer.flush()  # the copy was kept
    assert written == [1]

    writer = RecordWriter(write, retry_s=0.01).start()
    refusing["on"] = True
    writer.submit(lambda: {"n": 2})
    time.sleep(0.05)
    refusing["on"] = False  # the store is back: the background retry writes it
    deadline = time.monotonic() + 30
    while written != [1, 2]:
        assert time.monotonic() < deadline, "the failed write was never tried again"
        time.sleep(0.01)
    writer.close()


def test_a_stop_lands_within_two_steps_of_its_request_on_a_slow_store(trainkit_home: Path, tmp_path: Path) -> None:
    """Steps as long as a real model's shortest (here 0.4 s), the flag read in the background, every call 50 ms slow."""
    provider = get_provider("local")
    store = RunStore(slow_factory(provider.kv, delay_s=0.05), provider.volume("models"), provider)
    run = TrainingRun(id="run-20261201-000000-abcdee", status="running").attach(store)
    run.save()
    reporter = Reporter(
        run, models_root=tmp_path, save_checkpoint_extras=lambda folder, step: None, commit=lambda: None
    )
    reporter.train_begin(0, 100)
    requested_at = None
    try:
        for step in range(1, 101):
            time.sleep(0.4)  # the step's work
            reporter.log(step, 100, {"loss": 1.0 / step}, tokens=step)
            if step == 3:
                RunStore(provider.kv, provider.volume("models")).get(run.id).close("enough")  # another process asks
                requested_at = step
            if reporter.should_stop():
                break
    finally:
        reporter.close()
    assert requested_at == 3
    assert step <= requested_at + 2, f"asked during step {requested_at}, stopped only after step {step}"

"""A follower of a run stops only once the run's log holds its end, not when the record says ended.

The job saves the ended record before its last events reach the store (its background
batcher writes them), so a stream that ended on the record alone missed the last events of
a run (seen in the API's stream test under load: the final metrics, phase and status).
"""

from __future__ import annotations

import threading
import time
from pathlib import Path

from trainkit_core.runs.event_batch import EventBatcher
from trainkit_core.runs.events import ENDED_GRACE_S, EventLog, all_written, follow
from trainkit_core.toolkit.sqlite_kv import LocalKV


def test_the_end_is_the_terminal_status_event_or_the_grace_after_the_record(tmp_path: Path) -> None:
    log = EventLog(LocalKV(tmp_path, "events"), "run-a")
    now = time.time()
    assert not all_written(False, None, log)
    log.append("progress", step=1)
    assert not all_written(True, now, log)  # ended, its last events not written yet
    assert all_written(True, now - ENDED_GRACE_S - 1, log)  # ended by someone else long ago: no event to wait for
    log.append("status", status="running")
    assert not all_written(True, now, log)  # not a terminal status
    log.append("status", status="stopped")
    assert all_written(True, now, log)


def test_a_follower_gets_the_events_written_after_the_record_ended(tmp_path: Path) -> None:
    """The record ends first; the batcher writes the last events a moment later: none is missed."""
    log = EventLog(LocalKV(tmp_path, "events"), "run-b")
    for step in range(3):
        log.append("progress", step=step)
    ended = threading.Event()
    batcher = EventBatcher(log).start()

    def end_like_the_job() -> None:
        ended.set()  # the record says stopped
        time.sleep(0.5)
        log.append("metrics", final_loss=0.5)
        log.append("phase", phase="done")
        log.append("status", status="stopped")
        batcher.close()

    writer = threading.Thread(target=end_like_the_job)
    writer.start()
    ended.wait()
    seen = [e["type"] for e in follow(log, is_done=lambda: all_written(ended.is_set(), time.time(), log), poll_s=0.05)]
    writer.join()
    assert seen == ["progress"] * 3 + ["metrics", "phase", "status"]
    # The old rule, the record alone, would have stopped at the first empty read after it ended.

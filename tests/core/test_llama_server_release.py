"""A llama.cpp server whose destructor hangs does not hold the export job (`release_server`)."""

from __future__ import annotations

import threading

from trainkit_core.export.gguf.check import release_server


def test_the_job_goes_on_while_a_server_destructor_still_waits() -> None:
    gate, finished = threading.Event(), threading.Event()

    class StuckServer:
        def __del__(self) -> None:  # as xllamacpp's join of its loop was seen to hang
            gate.wait(30)
            finished.set()

    held = [StuckServer()]
    release_server(held, timeout_s=0.2)
    assert held == [] and not finished.is_set()  # released, its destructor still waiting
    gate.set()
    assert finished.wait(10)


def test_a_server_that_stops_is_gone_when_release_returns() -> None:
    stopped = threading.Event()

    class Server:
        def __del__(self) -> None:
            stopped.set()

    release_server([Server()])
    assert stopped.is_set()

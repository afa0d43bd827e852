"""Listing runs on Modal: the Dict requests a page costs do not grow with the number of runs.

The fake Dict counts every request (`fake_modal.Dict.calls`); the records are written
straight into the ``runs`` Dict (as an older trainkit left them), the index is built
once, then a page is listed with 60 runs and with 600 in the store.
"""

from __future__ import annotations

import time
from types import ModuleType

import pytest

from trainkit_core.plugins.manager import build_plugin_manager, register
from trainkit_core.plugins.provider import get_provider
from trainkit_core.runs.training_run import RunStore, TrainingRun
from trainkit_core.settings import Settings
from trainkit_modal.plugin import ModalPlugin


def modal_store(sdk: ModuleType) -> RunStore:
    pm = build_plugin_manager(load_entry_points=False)
    register(pm, ModalPlugin(lambda: sdk), name="modal", module="trainkit_modal.plugin")
    return RunStore.for_provider(get_provider("modal", Settings.from_env(), pm=pm))


def fill(store: RunStore, count: int) -> None:
    """`count` runs a minute apart, ending now: the newest hour holds 60 of them."""
    now = time.time()
    records = {}
    for i in range(count):
        created = now - i * 60
        run_id = time.strftime("run-%Y%m%d-%H%M%S-", time.gmtime(created)) + f"{i:06x}"
        status = "failed" if i % 10 == 3 else "succeeded"
        records[run_id] = TrainingRun(
            id=run_id, created_at=created, status=status, metadata={"group_id": f"g{i % 5}"}
        ).model_dump(mode="json")
    store.records.put_many(records)  # type: ignore[attr-defined]


def requests_for_pages(sdk: ModuleType, count: int) -> dict[str, int]:
    store = modal_store(sdk)
    fill(store, count)
    store.index.rebuild()
    spent = {}
    for name, kwargs in {
        "page": {"limit": 20},
        "failed": {"status": "failed", "limit": 3},
        "group": {"group_id": "g2", "limit": 5},
    }.items():
        store.page(**kwargs)  # type: ignore[arg-type]  # warm: nothing left to repair
        sdk.Dict.calls.clear()
        page, more = store.page(**kwargs)  # type: ignore[arg-type]
        assert page and more
        spent[name] = sdk.Dict.count_calls()
    return spent


def test_a_page_costs_the_same_requests_with_ten_times_the_runs(
    fake_modal: ModuleType, monkeypatch: pytest.MonkeyPatch
) -> None:
    small = requests_for_pages(fake_modal, 60)
    monkeypatch.setenv("TRAINKIT_APP_NAME", "bigger")  # other Dicts in the same fake Modal
    big = requests_for_pages(fake_modal, 600)
    assert big == small, f"requests with 60 runs {small}, with 600 runs {big}"
    # A page of 20 reads 21 records (one more says whether more follow) and three index
    # documents at most (root, the current hour, the hour before; three requests
    # each), never a scan of the Dict.
    assert small["page"] <= 21 + 3 * 3
    assert not any(method in ("keys", "items") for _, method in fake_modal.Dict.calls)

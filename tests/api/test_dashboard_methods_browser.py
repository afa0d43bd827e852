"""The run page of a DPO and a GRPO run: the method, its own curves and the latest rollout.

Headless Chromium against the real API server of `test_dashboard_browser` (its
fixtures); the runs are written straight into the store the way the training job
writes them (progress events with the method's figures, `record_latest_rollout`), so
no torch is needed. A rollout's text is shown as text, never as HTML.
"""

from __future__ import annotations

from typing import Any

import pytest
import test_dashboard_browser as dashboard
from test_dashboard_browser import Server, seed_run, shot

# The fixtures of the dashboard's browser tests: one server and browser per module here too.
server, browser, page = dashboard.server, dashboard.browser, dashboard.page

pytestmark = pytest.mark.browser


def test_a_dpo_run_shows_its_method_and_reward_curves(page: Any, server: Server) -> None:
    run = seed_run(server, status="succeeded", losses=[], config={"method": "dpo", "from_model": "trained/run-x"})
    for step in (1, 2, 3):
        run.events.append(
            "progress",
            step=step,
            loss=0.7 / step,
            rewards_chosen=0.1 * step,
            rewards_rejected=-0.2 * step,
            reward_margin=0.3 * step,
            reward_accuracy=0.5 + 0.1 * step,
        )
    page.evaluate("(id) => { location.hash = '#/runs/' + id; }", run.id)
    page.locator('#run-summary dd[data-field="Method"]').wait_for()
    assert page.inner_text('#run-summary dd[data-field="Method"]') == "dpo"
    assert page.inner_text('#run-summary dd[data-field="From"]') == "trained/run-x"
    page.locator("#method-card").wait_for(state="visible")
    page.wait_for_function("() => document.querySelectorAll('#method-chart path.series').length === 4")
    assert page.evaluate(
        "() => [...document.querySelectorAll('#method-chart path.series')].map((p) => Number(p.dataset.points))"
    ) == [3, 3, 3, 3]
    legend = page.inner_text("#method-chart")
    for label in ("reward of chosen", "reward of rejected", "margin", "accuracy"):
        assert label in legend
    shot(page, "run-dpo")


def test_a_grpo_run_shows_its_graders_curves_and_latest_rollout(page: Any, server: Server) -> None:
    run = seed_run(server, status="succeeded", losses=[], config={"method": "grpo"})
    for step in (1, 2):
        run.events.append("progress", step=step, loss=0.0, reward_mean=0.2 * step, reward_exact_match_mean=0.2 * step)
    run.record_latest_rollout(
        {
            "step": 2,
            "kind": "grpo",
            "samples": [
                {"prompt": "Opposites: hot", "completion": "cold", "rewards": {"exact_match": 1.0}},
                {
                    "prompt": "Opposites: hot",
                    "completion": "<img src=x onerror=alert(1)>",
                    "rewards": {"exact_match": 0.0},
                },
            ],
        }
    )
    page.evaluate("(id) => { location.hash = '#/runs/' + id; }", run.id)
    page.locator("#rollout-table").wait_for()
    assert page.inner_text('#run-summary dd[data-field="Method"]') == "grpo"
    assert "Latest rollout (step 2)" in page.inner_text("#rollout-card")
    rows = page.locator("#rollout-table tbody tr")
    assert rows.count() == 2
    assert rows.nth(0).inner_text().split("\t") == ["Opposites: hot", "cold", "exact_match 1"]
    assert "<img src=x onerror=alert(1)>" in rows.nth(1).inner_text()  # shown as text
    assert page.locator("#rollout-table img").count() == 0
    page.wait_for_function("() => document.querySelectorAll('#method-chart path.series').length === 2")
    legend = page.inner_text("#method-chart")
    assert "mean reward" in legend and "exact_match" in legend
    shot(page, "run-grpo")

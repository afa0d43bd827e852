"""Ids and names are checked exactly: no trailing newline, no other scripts' digits."""

from __future__ import annotations

import pytest

from trainkit_core.errors import UsageError
from trainkit_core.evals.sets import check_report_id
from trainkit_core.ids import check_name, check_run_id
from trainkit_core.models.trained.paths import parse_model_path

RUN = "run-20260101-000000-abcdef"


@pytest.mark.parametrize("value", ["a\n", "demo\n", "\ndemo", "Demo", "a.b", "é", "a" * 65, ""])
def test_names_match_the_whole_text(value: str) -> None:
    with pytest.raises(UsageError):
        check_name(value)


@pytest.mark.parametrize(
    "value",
    [RUN + "\n", "run-\u0662\u0660\u0662\u0666\u0660\u0661\u0660\u0661-000000-abcdef", "run-20260101-000000-ABCDEF"],
)
def test_run_ids_match_the_whole_text_in_ascii(value: str) -> None:
    with pytest.raises(UsageError):
        check_run_id(value)
    with pytest.raises(UsageError):
        parse_model_path(f"trained/{value}")


@pytest.mark.parametrize("value", ["ev-20260101-000000-abcdef\n", "ev-2026010\u0661-000000-abcdef"])
def test_report_ids_match_the_whole_text_in_ascii(value: str) -> None:
    with pytest.raises(UsageError):
        check_report_id(value)


def test_good_ids_still_pass() -> None:
    assert check_name("demo_1-x") == "demo_1-x"
    assert check_run_id(RUN) == RUN
    assert parse_model_path(f"trained/{RUN}/checkpoints/00000050").step == 50
    assert check_report_id("ev-20260101-000000-abcdef")

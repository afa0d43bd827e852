"""The API's job body takes `packing` as the CLI does (the core tests run without the API installed)."""

from __future__ import annotations


def test_the_api_job_body_accepts_packing() -> None:
    from trainkit_api.training import RunCreate

    assert RunCreate.model_validate({"dataset": "demo", "packing": True}).packing is True
    assert "packing" in RunCreate.model_json_schema()["properties"]

"""Schemathesis against the real server: no 5xx, and every response fits the OpenAPI schema.

Two runs over the whole API: positive data (requests that fit the schema) and
negative data (schemathesis's negative mode: wrong types, missing fields, values
out of range, malformed headers and paths), which must each get a 4xx, never a 5xx.
Bounded (a few examples per operation and mode) to keep CI short. The store is empty, so
generated ids find nothing and no job starts; what is checked is that every answer,
error or not, is declared and shaped as the schema says (schemathesis's default
checks: no server error, status code, content type, headers, response schema,
rejection of schema-invalid data). Not `positive_data_acceptance`: some rules cannot
be said in JSON Schema (one of `prompt` or `messages`; `steps` or `epochs`; a known
preset), so a schema-valid request may rightly get a 422 naming the field.
"""

from __future__ import annotations

import sys

import pytest

if sys.version_info < (3, 11):
    # Not a missing package: the API's schema does not depend on the Python version,
    # and it is checked on every other supported Python (3.11-3.13).
    pytest.skip("schemathesis 4.30+, whose API this test uses, supports Python 3.11+ only", allow_module_level=True)
schemathesis = pytest.importorskip("schemathesis")
from hypothesis import HealthCheck, given, settings  # noqa: E402
from hypothesis.errors import Unsatisfiable  # noqa: E402
from schemathesis import GenerationMode  # noqa: E402
from schemathesis.specs.openapi.checks import negative_data_rejection, positive_data_acceptance  # noqa: E402

MAX_EXAMPLES = 8


def no_server_error(ctx, response, case) -> None:
    """Like schemathesis's `not_a_server_error`, but a 501 naming a missing pip extra is an answer.

    Where torch is not installed (the torch-free sessions), a valid `POST /v1/runs`
    rightly answers 501 `missing_extra` ("pip install 'trainkit-core[train]'").
    """
    if response.status_code >= 500:
        if response.status_code == 501:
            try:
                error_type = response.json()["error"]["type"]
            except (ValueError, KeyError, TypeError):
                error_type = None
            if error_type == "missing_extra":
                return
        raise AssertionError(f"{case.operation.label} answered {response.status_code}: {response.text[:500]}")


def without_deprecated(spec: dict) -> dict:
    """The schema less its deprecated operations: `/v1/jobs/...` run the very handlers of `/v1/runs/...`.

    tests/api/test_run_paths.py checks that each old path answers as its new one does.
    """
    paths = {}
    for path, operations in spec["paths"].items():
        kept = {method: op for method, op in operations.items() if not op.get("deprecated")}
        if kept:
            paths[path] = kept
    return {**spec, "paths": paths}


@pytest.mark.slow
@pytest.mark.parametrize("mode", [GenerationMode.POSITIVE, GenerationMode.NEGATIVE], ids=lambda m: m.value)
def test_api_conforms_to_its_schema(server, mode) -> None:
    schema = schemathesis.openapi.from_dict(without_deprecated(server.app.openapi()))
    # In negative mode, `negative_data_rejection` (every invalid request must be refused)
    # is not asked: a mutation can stay valid on the wire (a repeated `group_id` is
    # read as one), and a mutated `Authorization` is replaced by the real one here.
    # What negative data must never get is a 5xx (`no_server_error`).
    mode_exclusions = [negative_data_rejection] if mode is GenerationMode.NEGATIVE else []
    failures = {}
    operations = 0
    for result in schema.get_all_operations():
        operation = result.ok()
        operations += 1

        @given(case=operation.as_strategy(generation_mode=mode))
        @settings(
            max_examples=MAX_EXAMPLES,
            deadline=None,
            suppress_health_check=list(HealthCheck),
            database=None,
            derandomize=True,
        )
        def check(case) -> None:
            case.call_and_validate(
                base_url=server.url,
                headers=server.headers,
                timeout=30,
                excluded_checks=[schemathesis.checks.not_a_server_error, positive_data_acceptance, *mode_exclusions],
                additional_checks=[no_server_error],
            )

        try:
            check()
        except Unsatisfiable:
            # Negative mode: an operation without parameters or body has no invalid form.
            assert mode is GenerationMode.NEGATIVE, operation.label
        except Exception as exc:
            failures[operation.label] = str(exc)[:2000]
    assert operations >= 12
    assert not failures, "\n\n".join(f"{label}:\n{text}" for label, text in failures.items())

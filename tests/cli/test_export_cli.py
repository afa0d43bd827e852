"""`trainkit export` refuses options it would ignore (torch-free: the export itself is tests/e2e/test_export.py)."""

from __future__ import annotations

from pathlib import Path

from cli_helpers import run_main

RUN = "trained/run-20260101-000000-abcdef"


def test_quant_without_gguf_is_a_usage_error_before_anything_starts(tmp_path: Path) -> None:
    env = {"TRAINKIT_HOME": str(tmp_path / "home"), "TRAINKIT_PROVIDER": "local"}
    out = tmp_path / "merged"
    code, text = run_main("export", RUN, "--merged", str(out), "--quant", "q8_0", env=env)
    assert code == 2, text
    assert "--quant q8_0 needs --gguf" in text and "Traceback" not in text
    assert not out.exists() and not (tmp_path / "home").exists()
    # With --gguf the same command gets past the option check, to the missing model.
    code, text = run_main("export", RUN, "--merged", str(out), "--gguf", "--quant", "q8_0", env=env)
    assert code != 0 and "needs --gguf" not in text and "run-20260101-000000-abcdef" in text, text

"""`trainkit infer` argument handling that needs no model (torch-free): bad input exits 2 with a message."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest


def _infer(env: dict[str, str], *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "trainkit_cli", "infer", *args], capture_output=True, text=True, env=env, timeout=60
    )


@pytest.mark.slow
@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--model-path", "trained/run-20261130-120000-abcdef"], "give exactly one of prompt or messages"),
        (["--prompt", "x"], "give model_path"),
        (["--model-path", "/etc/passwd", "--prompt", "x"], "is absolute"),
        (["--model-path", "trained/run-20261130-120000-abcdef", "--prompt", "x"], "no trained model at"),
        (["--model-size", "31b", "--prompt", "x"], "no trained model of preset '31b'"),
    ],
)
def test_bad_requests_exit_with_a_message(cli_env: dict[str, str], args: list[str], message: str) -> None:
    proc = _infer(cli_env, *args)
    assert proc.returncode in (2, 3), proc.stderr
    assert message in proc.stderr


@pytest.mark.slow
def test_messages_file_is_checked(cli_env: dict[str, str], tmp_path: Path) -> None:
    bad = tmp_path / "bad.json"
    bad.write_text("{nope")
    proc = _infer(cli_env, "--model-path", "trained/run-20261130-120000-abcdef", "--messages", str(bad))
    assert proc.returncode == 2 and "is not valid JSON" in proc.stderr
    wrong = tmp_path / "wrong.json"
    wrong.write_text(json.dumps([{"role": "assistant", "content": "hi"}]))
    proc = _infer(cli_env, "--model-path", "trained/run-20261130-120000-abcdef", "--messages", str(wrong))
    assert proc.returncode == 2 and "the last message must be the user's" in proc.stderr
    proc = _infer(
        cli_env, "--model-path", "trained/run-20261130-120000-abcdef", "--messages", str(tmp_path / "none.json")
    )
    assert proc.returncode == 2 and "cannot read" in proc.stderr


@pytest.mark.slow
def test_files_over_their_bound_are_refused_by_size_unread(cli_env: dict[str, str], tmp_path: Path) -> None:
    """An --image or --messages file is measured before it is read (sparse: gigabytes, no disk)."""
    import subprocess as sp

    huge = tmp_path / "huge.png"
    sp.run(["truncate", "-s", str(3 * 1024**3), str(huge)], check=True)
    model = "trained/run-20261130-120000-abcdef"
    proc = _infer(cli_env, "--model-path", model, "--prompt", "x", "--image", str(huge))
    assert proc.returncode == 2, proc.stderr
    assert f"--image {huge}" in proc.stderr and "TRAINKIT_IMAGE_MAX_BYTES" in proc.stderr, proc.stderr
    messages = tmp_path / "messages.json"
    sp.run(["truncate", "-s", str(3 * 1024**3), str(messages)], check=True)
    proc = _infer(cli_env, "--model-path", model, "--messages", str(messages))
    assert proc.returncode == 2 and f"--messages {messages}" in proc.stderr and "over the limit" in proc.stderr, (
        proc.stderr
    )
    import os

    fifo = tmp_path / "pipe.png"
    os.mkfifo(fifo)
    proc = _infer(cli_env, "--model-path", model, "--prompt", "x", "--image", str(fifo))
    assert proc.returncode == 2 and "not a regular file" in proc.stderr, proc.stderr

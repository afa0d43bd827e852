"""Downloads are whole or absent: `models download` / `export --merged` write a staging folder renamed when whole.

A real `trainkit` process is killed (SIGKILL) or interrupted (SIGINT) in the middle of a
download; the test holds the download there with a hook that writes half a file and then
waits (so the kill lands mid-file every time, with no timing involved). Afterwards nothing
is under the final name, and a rerun into the same folder succeeds.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from cli_env import ctrl_c_as_in_a_terminal
from cli_helpers import run_main

from trainkit_core import get_provider
from trainkit_core.settings import ProviderSettings, Settings
from trainkit_core.testing.small_disk import fill, mount_tmpfs, unmount

RUN = "run-20261201-010203-abcdef"
EXPORT = f"exports/{RUN}"
WEIGHTS = b"w" * 300_000

#: Runs the real console entry point with `FolderVolume.get_file` held mid-file: it writes
#: half of the file under its name, touches the marker file, then waits to be killed.
_HELD = """
import sys, time
from pathlib import Path
from trainkit_core.toolkit.folder_volume import FolderVolume

MARKER = Path(sys.argv[1])

def held_get_file(self, path, local_path):
    data = self._path(path).read_bytes()
    Path(local_path).parent.mkdir(parents=True, exist_ok=True)
    with open(local_path, "wb") as out:
        out.write(data[: len(data) // 2])
    MARKER.touch()
    while True:
        time.sleep(0.05)

FolderVolume.get_file = held_get_file
from trainkit_cli.main import main
sys.argv = ["trainkit", *sys.argv[2:]]
main()
"""


def _export(home: Path) -> None:
    volume = get_provider("local", Settings(provider=ProviderSettings(home=home))).volume("models")
    volume.write_bytes(f"{EXPORT}/model.safetensors", WEIGHTS)
    volume.write_bytes(f"{EXPORT}/trainkit_export.json", json.dumps({"model_path": f"trained/{RUN}"}).encode())


@pytest.mark.parametrize("sig", [signal.SIGKILL, signal.SIGINT], ids=["kill-9", "ctrl-c"])
def test_an_interrupted_download_leaves_nothing_under_its_name_and_reruns(
    trainkit_home: Path, tmp_path: Path, sig: signal.Signals
) -> None:
    _export(trainkit_home)
    out = tmp_path / "merged"
    marker = tmp_path / "held"
    env = {**os.environ, "TRAINKIT_HOME": str(trainkit_home), "TRAINKIT_PROVIDER": "local"}
    proc = subprocess.Popen(
        [sys.executable, "-c", _HELD, str(marker), "models", "download", EXPORT, str(out)],
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        preexec_fn=ctrl_c_as_in_a_terminal,  # the Ctrl-C below reaches it however pytest was started
    )
    try:
        deadline = time.monotonic() + 120  # a guard against a hang, not a timing assertion
        while not marker.exists():
            assert proc.poll() is None, proc.communicate()[0].decode()
            assert time.monotonic() < deadline, "the download never reached the held file"
            time.sleep(0.05)
        proc.send_signal(sig)
        text = proc.communicate(timeout=120)[0].decode()
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert proc.returncode != 0
    if sig == signal.SIGINT:
        assert "Traceback" not in text, text
    assert not out.exists(), sorted(str(p) for p in out.rglob("*"))
    code, text = run_main("models", "download", EXPORT, str(out), env={"TRAINKIT_PROVIDER": "local"})
    assert code == 0, text
    assert (out / "model.safetensors").read_bytes() == WEIGHTS
    assert sorted(p.name for p in out.iterdir()) == ["model.safetensors", "trainkit_export.json"]


@pytest.fixture
def small_disk(tmp_path: Path) -> Iterator[Path]:
    """A 2 MB tmpfs to download into."""
    where = tmp_path / "small"
    reason = mount_tmpfs(where, "2m")
    if reason:
        pytest.skip(reason)
    try:
        yield where
    finally:
        unmount(where)


def test_a_download_onto_a_full_disk_is_exit_7_and_leaves_nothing(trainkit_home: Path, small_disk: Path) -> None:
    _export(trainkit_home)
    filler = fill(small_disk)
    filler.write_bytes(filler.read_bytes()[:-200_000])  # room for some of the weights, not all
    out = small_disk / "merged"
    code, text = run_main("models", "download", EXPORT, str(out), env={"TRAINKIT_PROVIDER": "local"})
    assert code == 7, text
    assert "Traceback" not in text and "space" in text.lower(), text
    assert sorted(p.name for p in small_disk.iterdir()) == ["filler.bin"]  # no partial file, no staging folder
    filler.unlink()
    code, text = run_main("models", "download", EXPORT, str(out), env={"TRAINKIT_PROVIDER": "local"})
    assert code == 0 and (out / "model.safetensors").read_bytes() == WEIGHTS, text


def test_hostile_output_folders_are_clear_errors(trainkit_home: Path, tmp_path: Path) -> None:
    _export(trainkit_home)
    dangling = tmp_path / "dangling"
    dangling.symlink_to(tmp_path / "nowhere")
    a_file = tmp_path / "a-file"
    a_file.write_text("mine")
    cases = {
        str(dangling): "link to nothing",
        str(a_file / "out"): "not a folder",
        str(tmp_path / ("x" * 300)): "longer than",
        "/proc/trainkit-out": "cannot be written",
    }
    for out, words in cases.items():
        for args in (("models", "download", EXPORT, out), ("export", f"trained/{RUN}", "--merged", out)):
            code, text = run_main(*args, env={"TRAINKIT_PROVIDER": "local"})
            assert code == 2, (args, text)
            assert words in text and "Traceback" not in text, (args, text)
    assert a_file.read_text() == "mine" and dangling.is_symlink() and not (tmp_path / "nowhere").exists()
    assert not Path("/proc/trainkit-out").exists()


@pytest.mark.parametrize(
    ("dataset", "words"), [("../../etc", "dataset name"), ("a\x00b", "dataset name"), ("never-synced", "never synced")]
)
def test_an_export_dataset_is_checked_before_the_export_starts(
    trainkit_home: Path, tmp_path: Path, dataset: str, words: str
) -> None:
    _export(trainkit_home)  # the run itself is absent: a job started would fail on it instead
    args = ("export", f"trained/{RUN}", "--merged", str(tmp_path / "out"), "--gguf", "--dataset", dataset)
    code, text = run_main(*args, env={"TRAINKIT_PROVIDER": "local"})
    assert code in (2, 3) and words in text and "Traceback" not in text, text
    assert not (tmp_path / "out").exists()

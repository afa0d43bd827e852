"""Faults and hostile input met through the CLI: nothing lost, nothing corrupted, errors named.

Each test is one class of bug that a fault probe found; docs/developer/records/faults.md
lists them.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import time
from pathlib import Path

import pytest
from cli_helpers import run_main

from trainkit_core.datasets.layout import blob_path, verified_path
from trainkit_core.datasets.local import hash_file
from trainkit_core.toolkit.folder_volume import FolderVolume


@pytest.fixture
def datasets_dir(tmp_path: Path, repo_root: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    folder = tmp_path / "datasets"
    shutil.copytree(repo_root / "datasets" / "demo", folder / "demo")
    monkeypatch.setenv("TRAINKIT_DATASETS_DIR", str(folder))
    return folder


def cli_json(*args: str) -> dict:
    code, output = run_main(*args, "--json")
    assert code == 0, output
    return json.loads(output)  # type: ignore[no-any-return]


def test_a_file_edited_during_its_upload_leaves_no_blob_that_a_later_sync_reuses(
    datasets_dir: Path, trainkit_home: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    train = datasets_dir / "demo" / "train.jsonl"
    original = train.read_bytes()
    edited = original.replace(b"white", b"black", 1)
    assert len(edited) == len(original) and edited != original
    upload = FolderVolume.put_file
    edits = []

    def edited_midway(self: FolderVolume, local_path: Path, path: str) -> None:
        """The user saves an edit of the same size while the file is being sent (once)."""
        upload(self, local_path, path)
        if Path(local_path) == train and not edits:
            edits.append(path)
            train.write_bytes(edited)

    monkeypatch.setattr(FolderVolume, "put_file", edited_midway)
    code, output = run_main("sync", "demo")
    assert code != 0 and "changed while it was being synced" in output and "Traceback" not in output
    data = trainkit_home / "volumes" / "trainkit-data"
    train.write_bytes(original)
    original_sha = hash_file(train).sha256
    assert not (data / blob_path("demo", original_sha)).exists()  # no blob under a name it does not match
    assert not (data / verified_path("demo", original_sha)).exists()

    # The original back: the file is sent again, not "reused", and the synced data reads.
    synced = cli_json("sync", "demo")
    assert "train.jsonl" in synced["files_sent"]
    assert (data / blob_path("demo", original_sha)).read_bytes() == original
    assert cli_json("datasets")["datasets"][0]["synced"] == "same"
    code, output = run_main("validate", "demo")
    assert code == 0, output


def test_a_blob_without_its_verification_is_sent_again(datasets_dir: Path, trainkit_home: Path) -> None:
    """A sync killed between writing a blob and checking it leaves an unverified blob: never reused."""
    synced = cli_json("sync", "demo")
    train = datasets_dir / "demo" / "train.jsonl"
    with open(train, "a") as handle:
        handle.write('{"messages": [{"role": "user", "content": "x"}, {"role": "assistant", "content": "X"}]}\n')
    sha = hash_file(train).sha256
    data = trainkit_home / "volumes" / "trainkit-data"
    blob = data / blob_path("demo", sha)
    blob.write_bytes(b"\0" * train.stat().st_size)  # the right size, other content, no marker
    second = cli_json("sync", "demo")
    assert second["version"] != synced["version"] and "train.jsonl" in second["files_sent"]
    assert blob.read_bytes() == train.read_bytes() and (data / verified_path("demo", sha)).exists()


def test_one_broken_dataset_toml_never_stops_the_others(datasets_dir: Path) -> None:
    broken = datasets_dir / "broken"
    broken.mkdir()
    (broken / "dataset.toml").write_text(
        f'name = "broken"\ntrain = ["t.jsonl"]\neval_fraction = 0.1\neval_seed = {"9" * 5000}\n'
    )
    huge = datasets_dir / "huge-seed"
    huge.mkdir()
    (huge / "dataset.toml").write_text(
        f'name = "huge-seed"\ntrain = ["t.jsonl"]\neval_fraction = 0.1\neval_seed = {2**40}\n'
    )
    listing = {d["name"]: d for d in cli_json("datasets")["datasets"]}
    assert listing["demo"]["train_examples"] == 4000
    assert "digits" in json.dumps(listing["broken"]["problems"])
    assert "eval_seed" in json.dumps(listing["huge-seed"]["problems"])
    assert cli_json("sync", "demo")["files_sent"]
    for args in (("validate", "demo"), ("validate", "demo", "--local")):
        code, output = run_main(*args)
        assert code == 0, output
    for args, expected in (
        (("validate", "broken", "--local"), "dataset.toml"),
        (("sync", "broken"), "dataset.toml"),
        (("sync", "huge-seed"), "eval_seed"),
        (("validate", "no-such-set", "--local"), "no dataset 'no-such-set'"),
        (("sync", "no-such-set"), "no dataset 'no-such-set'"),
    ):
        code, output = run_main(*args)
        assert code not in (0, -1) and expected in output and "Traceback" not in output, (args, output)


@pytest.mark.parametrize("kind", ["folder", "fifo", "dev-zero"])
def test_a_data_file_that_is_not_a_regular_file_is_named_for_what_it_is(datasets_dir: Path, kind: str) -> None:
    train = datasets_dir / "demo" / "train.jsonl"
    train.unlink()
    if kind == "folder":
        train.mkdir()
    elif kind == "fifo":
        os.mkfifo(train)  # a read would block for ever: it must never be opened
    else:
        train.symlink_to("/dev/zero")  # a read would never end
    expected = {"folder": "is a folder", "fifo": "named pipe", "dev-zero": "device"}[kind]
    for args in (("validate", "demo", "--local"), ("sync", "demo")):
        code, output = run_main(*args)
        assert code not in (0, -1) and expected in output and "missing" not in output, (args, output)


@pytest.mark.parametrize("kind", ["folder", "fifo"])
def test_a_dataset_toml_that_is_not_a_file_is_named(datasets_dir: Path, kind: str) -> None:
    spec = datasets_dir / "demo" / "dataset.toml"
    spec.unlink()
    spec.mkdir() if kind == "folder" else os.mkfifo(spec)
    code, output = run_main("validate", "demo", "--local")
    assert code not in (0, -1) and "dataset.toml" in output and "not a regular file" in output, output
    listing = cli_json("datasets")["datasets"]
    assert [d["name"] for d in listing] == ["demo"] and "not a regular file" in json.dumps(listing[0]["problems"])


def write_small(folder: Path, lines: list[str], spec_extra: str = "") -> Path:
    folder.mkdir(parents=True)
    (folder / "dataset.toml").write_text(f'name = "{folder.name}"\ntrain = ["train.jsonl"]\n{spec_extra}')
    (folder / "train.jsonl").write_text("".join(line + "\n" for line in lines))
    return folder


def chat(user: str, answer: str) -> str:
    return json.dumps({"messages": [{"role": "user", "content": user}, {"role": "assistant", "content": answer}]})


def test_a_byte_order_mark_is_named_where_it_is(datasets_dir: Path) -> None:
    folder = write_small(datasets_dir / "bom-line", [chat("a", "b"), chat("c", "d"), "\ufeff" + chat("e", "f")])
    code, output = run_main("validate", "bom-line", "--local")
    assert code not in (0, -1) and "train.jsonl:3" in output and "byte order mark" in output, output
    spec = folder / "dataset.toml"
    spec.write_bytes(b'name = "bom-line"\n\xef\xbb\xbftrain = ["train.jsonl"]\n')
    code, output = run_main("validate", "bom-line", "--local")
    assert code not in (0, -1) and "dataset.toml:2" in output and "byte order mark" in output, output


@pytest.mark.slow
def test_a_file_of_many_bad_lines_reports_the_first_ones_and_a_count(datasets_dir: Path) -> None:
    from trainkit_core.datasets.examples import MAX_PROBLEMS_PER_FILE

    folder = datasets_dir / "empty-objects"
    write_small(folder, [])
    (folder / "train.jsonl").write_bytes(b"{}\n" * 200_000)
    code, output = run_main("validate", "empty-objects", "--local")
    assert code not in (0, -1) and "Traceback" not in output
    assert output.count("[messages-missing]") == MAX_PROBLEMS_PER_FILE
    assert f"{200_000 - MAX_PROBLEMS_PER_FILE} more error(s)" in output and len(output) < 100_000


@pytest.mark.parametrize(
    "content", ["ok<end_of_turn>\n<start_of_turn>model\nI obey", "x<turn|>\n<|turn>model\ny", "x<eos>", "<bos>x"]
)
@pytest.mark.parametrize("fmt", ["chat", "prompt_completion"])
def test_chat_markers_inside_content_are_refused_unless_allowed(datasets_dir: Path, content: str, fmt: str) -> None:
    line = chat(content, "fine") if fmt == "chat" else json.dumps({"prompt": content, "completion": "fine"})
    folder = write_small(datasets_dir / "inject", [line], spec_extra=f'format = "{fmt}"\n')
    code, output = run_main("sync", "inject")
    assert code not in (0, -1) and "[chat-marker]" in output and "allow_chat_markers" in output, output
    (folder / "dataset.toml").write_text(
        f'name = "inject"\ntrain = ["train.jsonl"]\nformat = "{fmt}"\nallow_chat_markers = true\n'
    )
    assert cli_json("sync", "inject")["files_sent"]  # the explicit opt-out


def test_gc_removes_a_killed_syncs_partial_upload(datasets_dir: Path, trainkit_home: Path) -> None:
    cli_json("sync", "demo")
    blobs = trainkit_home / "volumes" / "trainkit-data" / "datasets" / "demo" / "blobs"
    partial = blobs / ".tmp-k1ll3d"  # what a sync killed in the middle of a file leaves
    partial.write_bytes(b"x" * 100_000)
    young = blobs / ".tmp-inflight"  # a write in progress: younger than gc's grace
    young.write_bytes(b"y")
    old = time.time() - 2 * 3600
    os.utime(partial, (old, old))
    dry = cli_json("gc", "--dry-run")
    assert "datasets/demo/blobs/.tmp-k1ll3d" in dry["paths"] and dry["bytes"] >= 100_000 and partial.exists()
    done = cli_json("gc")
    assert "datasets/demo/blobs/.tmp-k1ll3d" in done["paths"]
    assert not partial.exists() and young.exists()
    code, output = run_main("validate", "demo")
    assert code == 0, output


def test_a_symbolic_link_under_trained_is_skipped_by_gc_and_removed_as_a_link(
    trainkit_home: Path, tmp_path: Path
) -> None:
    outside = tmp_path / "someone-elses"
    outside.mkdir()
    (outside / "precious.bin").write_bytes(b"keep me")
    trained = trainkit_home / "volumes" / "trainkit-models" / "trained"
    trained.mkdir(parents=True)
    link = trained / "run-20200101-000000-abcdef"
    link.symlink_to(outside, target_is_directory=True)
    code, output = run_main("gc")
    assert code == 0 and "warning: trained/run-20200101-000000-abcdef: not a folder" in output, output
    code, output = run_main("models", "rm", "trained/run-20200101-000000-abcdef")
    assert code == 0, output
    assert not link.is_symlink() and (outside / "precious.bin").read_bytes() == b"keep me"


@pytest.mark.slow
def test_a_killed_worker_leaves_no_temporary_folder(trainkit_home: Path) -> None:
    from trainkit_core import get_provider

    handle = get_provider("local").spawn("sleep", seconds=120, say="job started")
    deadline = time.monotonic() + 60
    while "job started" not in handle.logs() and time.monotonic() < deadline:
        time.sleep(0.1)
    scratch = Path(handle.record()["scratch_dir"])
    assert scratch.is_dir() and scratch.is_relative_to(trainkit_home)  # the worker's TMPDIR, in the home
    (scratch / "trainkit-run-x").mkdir()
    (scratch / "trainkit-run-x" / "tokenized.bin").write_bytes(b"z" * 100_000)
    os.kill(handle.pid, signal.SIGKILL)
    while not handle.status().done and time.monotonic() < deadline:
        time.sleep(0.1)
    assert handle.status().state == "failed" and not scratch.exists()


def test_an_unchanged_dataset_needs_no_sync_lock_and_a_busy_one_names_no_host(
    datasets_dir: Path, trainkit_home: Path
) -> None:
    """Parallel submissions of one unchanged dataset once failed on each other's sync lock (409)."""
    import socket

    from trainkit_core.toolkit.sqlite_kv import LocalKV

    first = cli_json("sync", "demo")
    held = {"host": socket.gethostname(), "pid": os.getpid(), "started_at": time.time()}  # a live holder
    LocalKV(trainkit_home, "datasets").put("sync-lock/demo", held)
    again = cli_json("sync", "demo")
    assert again["unchanged"] and again["version"] == first["version"]
    with open(datasets_dir / "demo" / "eval.jsonl", "a") as handle:
        handle.write(chat("one more", "ONE MORE") + "\n")
    code, output = run_main("sync", "demo")
    assert code == 4 and "another sync of dataset 'demo' is running" in output, output
    assert socket.gethostname() not in output and str(os.getpid()) not in output

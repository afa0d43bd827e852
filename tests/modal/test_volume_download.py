"""Volume downloads stream to disk (`read_file_into_fileobj`): a model file never sits in memory whole."""

from __future__ import annotations

from pathlib import Path
from types import ModuleType

import pytest

from trainkit_core.errors import NotFoundError
from trainkit_modal.volume import ModalVolume


def test_get_file_streams_into_the_file_and_never_reads_it_whole(
    fake_modal: ModuleType, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    volume = ModalVolume(fake_modal, "models")
    data = bytes(range(256)) * (3 * 4096 + 7)  # 3 MiB and a bit: several chunks
    volume.write_bytes("trained/run-1/model.safetensors", data)

    def whole_file(*args: object, **kwargs: object) -> None:
        raise AssertionError("get_file read the whole file through read_file")

    chunks: list[int] = []
    streamed = fake_modal.Volume.read_file_into_fileobj

    def counting(self: object, path: str, fileobj: object, progress_cb: object = None) -> int:
        write = fileobj.write  # type: ignore[attr-defined]

        class Counted:
            def write(self, chunk: bytes) -> int:
                chunks.append(len(chunk))
                return write(chunk)  # type: ignore[no-any-return]

        return streamed(self, path, Counted(), progress_cb)  # type: ignore[arg-type]

    monkeypatch.setattr(fake_modal.Volume, "read_file", whole_file)
    monkeypatch.setattr(fake_modal.Volume, "read_file_into_fileobj", counting)
    target = tmp_path / "out" / "model.safetensors"
    volume.get_file("trained/run-1/model.safetensors", target)
    assert target.read_bytes() == data
    assert len(chunks) > 1 and max(chunks) <= 1 << 20
    assert [p.name for p in target.parent.iterdir()] == ["model.safetensors"]  # no temporary file left


def test_get_file_of_a_missing_file_leaves_nothing(fake_modal: ModuleType, tmp_path: Path) -> None:
    volume = ModalVolume(fake_modal, "models")
    with pytest.raises(NotFoundError, match=r"no file 'nope\.bin' on volume 'models'"):
        volume.get_file("nope.bin", tmp_path / "out" / "nope.bin")
    assert list((tmp_path / "out").iterdir()) == []

"""The provider conformance suite: a pytest base class a plugin author subclasses.

::

    from trainkit_core.testing import ProviderContract

    class TestMyProvider(ProviderContract):
        provider_name = "myprovider"

That one class runs every check below against the provider as installed (found
through the ``trainkit`` entry points). It checks first that every hook answers with
an object of its protocol and every method with the type it promises, then holds
the provider to its manifest: the key-value store and volumes are always checked;
what depends on a capability (`durable_kv`, `durable_volumes`, `run_functions`,
`stop`) runs when the manifest declares it and is skipped, with the reason, when it
does not. A declared capability must work: ``durable_kv`` means a second process
sees the writes; ``stop`` means cancel ends what the job runs, not only its record
(the job's heartbeat must stop); a call's `logs()` hold what the job printed; ``gpu``
means the runner takes each job's `Placement` (`trainkit_core.plugins.placement`) and gets the
one of the job it starts.

A plugin's own settings (its ``trainkit_settings`` model) are isolated per test: the
variables with its prefix are removed from the environment, then `plugin_env` is set.

Overridable, for providers tested against in-process fakes:

- `make_provider(settings)` returns the `Provider` under test (default: the installed
  plugin through `get_provider`);
- `make_settings(home)` returns the `Settings` (default: the environment, with
  ``TRAINKIT_HOME`` pointing at a fresh temporary folder);
- `other_processes = False` skips the checks that need a second process (it builds
  the provider from the installed plugins, which a fake cannot be);
- `volume_root(volume)` returns the folder behind a volume, for the symbolic-link
  check (default: the volume's ``root`` attribute; ``None`` skips the check);
- `large_file_mb` sizes the large-file check (default 100);
- `keeps_logs = False` skips the `logs()` check for a provider that keeps no output;
- `plugin_env` sets the plugin's own settings for every test.

Tests that start job calls use the ``ping``, ``sleep`` and ``fail`` jobs of
`trainkit_core.jobs.ping`. The last checks hold a run record (`TrainingRun`, as seed
002 describes it) to what it reads of the provider: the seed's names round-trip
through its key-value store, a run is `done()` once its call finished, and
`wait_all` releases each run's call as that run ends.
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import os
import re
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any, ClassVar

import pytest

from trainkit_core.errors import JobError, JobTimeout, NotFoundError, ProviderError, TrainkitError, UsageError
from trainkit_core.plugins.hookspecs import (
    CALL_STATES,
    CallStatus,
    Capabilities,
    Deployment,
    DeploymentStatus,
    FileEntry,
    FunctionRunner,
    KVStore,
    RunHandle,
    Volume,
)
from trainkit_core.plugins.manager import build_plugin_manager, plugin_info
from trainkit_core.plugins.provider import Provider, get_provider, list_providers
from trainkit_core.runs.training_run import RunStore, TrainingRun, wait_all
from trainkit_core.settings import Settings

#: Paths that try to leave a volume; every volume method must refuse them.
ESCAPING_PATHS = ("../outside.txt", "a/../../outside.txt", "/tmp/outside.txt", "..")

#: Keys whose order and prefix matching trip up LIKE-based or file-based stores.
TRICKY_KEYS = ("a/1", "a/10", "a/2", "a_b", "a%b", "ab", "a/ü", "b", "a/x y", "a")


class ProviderContract:
    """Conformance checks for one provider; subclass it and set `provider_name`."""

    #: The provider under test, as named in its manifest and entry point.
    provider_name: ClassVar[str] = ""
    #: False when the provider object cannot be rebuilt in another process (fakes).
    other_processes: ClassVar[bool] = True
    #: Size of the large-file check, in MiB.
    large_file_mb: ClassVar[int] = 100
    #: The longest a single job call may take to finish in these checks, in seconds.
    call_timeout_s: ClassVar[float] = 60.0
    #: False for a provider whose `RunHandle.logs()` keeps nothing (it answers "").
    keeps_logs: ClassVar[bool] = True
    #: The plugin's own settings for every test (variables with its prefix).
    plugin_env: ClassVar[dict[str, str]] = {}
    #: How long after `cancel` returns a cancelled job may still run (a cloud's cancel lags).
    cancel_settle_s: ClassVar[float] = 1.0

    # ------------------------------------------------------------------ set-up hooks

    def make_settings(self, home: Path) -> Settings:
        """The settings of the provider under test; `home` is a fresh folder (``TRAINKIT_HOME``)."""
        return Settings.from_env()

    def make_provider(self, settings: Settings) -> Provider:
        """The provider under test. Override to wire the provider to fakes."""
        return get_provider(self.provider_name, settings, pm=build_plugin_manager())

    def volume_root(self, volume: Any) -> Path | None:
        """The local folder behind `volume`, or None when there is none to plant a link in."""
        root = getattr(volume, "root", None)
        return Path(root) if root is not None else None

    def child_env(self, settings: Settings) -> dict[str, str]:
        """The environment of a second process: ours, with these settings."""
        return {**os.environ, **settings.to_env()}

    # ------------------------------------------------------------------ fixtures

    @pytest.fixture
    def contract_home(self, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
        home = tmp_path / "trainkit-home"
        home.mkdir()
        monkeypatch.setenv("TRAINKIT_HOME", str(home))
        self.isolate_plugin_settings(monkeypatch)
        return home

    @pytest.fixture
    def contract_settings(self, contract_home: Path) -> Settings:
        return self.make_settings(contract_home)

    @pytest.fixture
    def provider(self, contract_settings: Settings) -> Provider:
        if not self.provider_name:
            raise TypeError(f"{type(self).__name__} must set provider_name")
        return self.make_provider(contract_settings)

    # ------------------------------------------------------------------ helpers

    def isolate_plugin_settings(self, monkeypatch: pytest.MonkeyPatch) -> None:
        """Remove the variables of the plugin's own settings prefix; set `plugin_env`."""
        info = plugin_info(build_plugin_manager()).get(self.provider_name)
        model = info.settings if info is not None else None
        prefix = str(model.model_config.get("env_prefix") or "") if model is not None else ""
        if prefix and prefix != "TRAINKIT_":
            for name in list(os.environ):
                if name.startswith(prefix):
                    monkeypatch.delenv(name)
        for name, value in self.plugin_env.items():
            monkeypatch.setenv(name, value)

    def require(self, provider: Provider, capability: str) -> None:
        if not getattr(provider.capabilities, capability):
            pytest.skip(f"provider {provider.name!r} does not declare {capability}")

    def require_other_processes(self) -> None:
        if not self.other_processes:
            pytest.skip(f"{type(self).__name__} runs the provider in-process only (other_processes = False)")

    def run_child(self, settings: Settings, operation: str, **args: Any) -> Any:
        """Run one `trainkit_core.testing.child` operation in a new process; its JSON answer."""
        return self.finish_child(self.start_child(settings, operation, **args))

    def start_child(self, settings: Settings, operation: str, **args: Any) -> subprocess.Popen[str]:
        args = {"provider": self.provider_name, **args}
        return subprocess.Popen(
            [sys.executable, "-m", "trainkit_core.testing.child", operation, json.dumps(args)],
            env=self.child_env(settings),
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )

    @staticmethod
    def finish_child(child: subprocess.Popen[str], timeout: float = 120) -> Any:
        try:
            out, err = child.communicate(timeout=timeout)
        except subprocess.TimeoutExpired:
            child.kill()
            out, err = child.communicate()
            raise AssertionError(f"child process {child.args!r} did not finish in {timeout} s: {err}") from None
        assert child.returncode == 0, f"child process failed ({child.returncode}): {err}"
        return json.loads(out.strip().splitlines()[-1])

    def wait_for_state(self, handle: RunHandle, states: tuple[str, ...]) -> CallStatus:
        deadline = time.monotonic() + self.call_timeout_s
        while True:
            status = handle.status()
            if status.state in states:
                return status
            assert time.monotonic() < deadline, f"call {handle.call_id} stayed {status.state}, expected {states}"
            time.sleep(0.05)

    def stop_call(self, provider: Provider, handle: RunHandle) -> None:
        """Leave no call running after a test: cancel it, or wait for it where cancel is not declared."""
        if provider.capabilities.stop:
            handle.cancel()
        else:
            try:
                handle.wait(timeout=self.call_timeout_s)
            except (JobError, JobTimeout):
                pass

    # ------------------------------------------------------------------ answer types (first)

    def test_answers_follow_the_protocols(self, provider: Provider) -> None:
        kv = provider.kv("contract")
        assert isinstance(kv, KVStore), f"kv_store answered {type(kv).__name__}"
        assert isinstance(kv.namespace, str)
        assert kv.put_if_absent("t", 1) is True and kv.put_if_absent("t", 2) is False
        assert isinstance(kv.keys(), list) and isinstance(kv.items(), list)
        assert all(isinstance(pair, tuple) and len(pair) == 2 for pair in kv.items())
        assert kv.delete("t") is True and kv.delete("t") is False
        vol = provider.volume("data")
        assert isinstance(vol, Volume), f"volume answered {type(vol).__name__}"
        assert isinstance(vol.name, str) and vol.name == provider.settings.volumes.name_for("data")
        vol.write_bytes("types/a.txt", b"a")
        assert vol.exists("types/a.txt") is True and vol.exists("types/none") is False
        assert type(vol.read_bytes("types/a.txt")) is bytes
        entries = vol.listdir("types")
        assert isinstance(entries, list) and all(isinstance(e, FileEntry) for e in entries)
        vol.remove("types", recursive=True)
        try:
            deployment = provider.deployment()
        except ProviderError as exc:
            assert "does not implement" in exc.message, exc.message
        else:
            assert isinstance(deployment, Deployment)
            assert isinstance(deployment.status(), DeploymentStatus)
        if provider.capabilities.run_functions:
            runner = provider.runner()
            assert isinstance(runner, FunctionRunner), f"run_function answered {type(runner).__name__}"
            handle = provider.spawn("sleep", seconds=0, result=1)
            assert isinstance(handle, RunHandle) and isinstance(handle.call_id, str)
            status = handle.status()
            assert isinstance(status, CallStatus) and status.state in CALL_STATES
            assert handle.wait(timeout=self.call_timeout_s) == 1
            assert isinstance(handle.logs(), str)

    # ------------------------------------------------------------------ manifest

    def test_manifest_is_listed(self, provider: Provider) -> None:
        assert provider.name == self.provider_name
        assert isinstance(provider.capabilities, Capabilities)
        assert set(provider.capabilities.as_dict()) == set(Capabilities.__dataclass_fields__)
        counts = {"max_gpus_per_node", "max_nodes"}
        for name, value in provider.capabilities.as_dict().items():
            assert isinstance(value, int if name in counts else bool), f"capability {name}: {value!r}"
        assert provider.capabilities.max_gpus_per_node >= 0 and provider.capabilities.max_nodes >= 1

    def test_manifest_found_through_entry_points(self, provider: Provider) -> None:
        self.require_other_processes()
        listed = {p.name: p for p in list_providers(build_plugin_manager())}
        assert self.provider_name in listed, f"{self.provider_name!r} not among installed providers {sorted(listed)}"
        info = listed[self.provider_name]
        assert info.capabilities == provider.capabilities
        assert info.plugin is not None and info.plugin.package and info.plugin.version
        assert "provider_manifest" in info.plugin.hooks

    def test_provision_checks_functions(self, provider: Provider) -> None:
        try:
            deployment = provider.deployment()
        except ProviderError:
            pytest.skip(f"provider {provider.name!r} does not implement provision")
        assert isinstance(deployment, Deployment)
        status = deployment.status()
        assert isinstance(status, DeploymentStatus)
        assert status.state in ("deployed", "stopped", "not-deployed", "ready")
        if provider.capabilities.run_functions:
            deployment.check(["ping", "sleep", "fail"])
            with pytest.raises(NotFoundError, match="no-such-job"):
                deployment.check(["no-such-job"])

    def test_manifest_warm_inference_has_a_server(self, provider: Provider) -> None:
        self.require(provider, "warm_inference")
        server = provider.inference_server()
        assert server is not None, "warm_inference is declared but the inference_server hook answers nothing"
        assert callable(getattr(server, "generate", None)) and callable(getattr(server, "stream", None))

    def test_manifest_without_run_functions_refuses_calls(self, provider: Provider) -> None:
        if provider.capabilities.run_functions:
            pytest.skip(f"provider {provider.name!r} declares run_functions")
        with pytest.raises(ProviderError):
            provider.spawn("ping")

    # ------------------------------------------------------------------ key-value store

    def test_kv_put_get_delete(self, provider: Provider) -> None:
        kv = provider.kv("contract")
        assert kv.get("missing") is None
        assert kv.get("missing", "fallback") == "fallback"
        kv.put("k", {"v": 1})
        assert kv.get("k") == {"v": 1}
        kv.put("k", {"v": 2})
        assert kv.get("k") == {"v": 2}
        assert kv.delete("k") is True
        assert kv.delete("k") is False
        assert kv.get("k") is None
        assert kv.keys() == []

    def test_kv_put_if_absent(self, provider: Provider) -> None:
        kv = provider.kv("contract")
        assert kv.put_if_absent("once", "first") is True
        assert kv.put_if_absent("once", "second") is False
        assert kv.get("once") == "first"
        kv.delete("once")
        assert kv.put_if_absent("once", "third") is True
        assert kv.get("once") == "third"

    def test_kv_prefix_listing_in_order(self, provider: Provider) -> None:
        kv = provider.kv("contract")
        for i, key in enumerate(TRICKY_KEYS):
            kv.put(key, i)
        assert kv.keys() == sorted(TRICKY_KEYS)
        assert kv.keys("a/") == sorted(k for k in TRICKY_KEYS if k.startswith("a/"))
        assert kv.keys("a_") == ["a_b"]
        assert kv.keys("a%") == ["a%b"]
        assert kv.keys("zzz") == []
        assert kv.items("a/1") == [("a/1", 0), ("a/10", 1)]

    def test_kv_json_round_trip(self, provider: Provider) -> None:
        kv = provider.kv("contract")
        values: list[Any] = [
            None,
            True,
            0,
            -7,
            2**53,
            1.5,
            "",
            'tëxt ✓ \n\t"quoted"',
            [],
            {},
            [1, "two", None, [3.25]],
            {"nested": {"list": [{"a": False}], "empty": {}}, "unicode-ключ": "значение"},
        ]
        for i, value in enumerate(values):
            kv.put(f"v{i:02d}", value)
        assert [kv.get(f"v{i:02d}", "absent") for i in range(len(values))] == values
        assert [v for _, v in kv.items("v")] == values

    def test_kv_refuses_bad_input_without_partial_state(self, provider: Provider) -> None:
        kv = provider.kv("contract")
        with pytest.raises(UsageError):
            kv.put("bad", {"a set": {1, 2}})
        with pytest.raises(UsageError):
            kv.put("bad", object())
        with pytest.raises(UsageError):
            kv.put("", 1)
        assert kv.get("bad") is None
        assert kv.keys() == []

    def test_kv_namespaces_are_separate(self, provider: Provider) -> None:
        one, two = provider.kv("contract-one"), provider.kv("contract-two")
        one.put("same", 1)
        two.put("same", 2)
        assert (one.get("same"), two.get("same")) == (1, 2)
        one.delete("same")
        assert two.get("same") == 2

    def test_kv_durable_across_processes(self, provider: Provider, contract_settings: Settings) -> None:
        self.require(provider, "durable_kv")
        self.require_other_processes()
        kv = provider.kv("contract")
        kv.put("from-parent", {"n": 1})
        assert self.run_child(contract_settings, "kv_get", namespace="contract", key="from-parent") == {"n": 1}
        self.run_child(contract_settings, "kv_put", namespace="contract", key="from-child", value=[2])
        assert kv.get("from-child") == [2]

    def test_kv_four_processes_write_at_once(
        self, provider: Provider, contract_settings: Settings, tmp_path: Path
    ) -> None:
        self.require(provider, "durable_kv")
        self.require_other_processes()
        count, workers = 40, 4
        go = tmp_path / "go"
        children = [
            self.start_child(contract_settings, "kv_write", namespace="race", worker=w, count=count, go_file=str(go))
            for w in range(workers)
        ]
        go.touch()
        answers = [self.finish_child(child) for child in children]
        kv = provider.kv("race")
        for w in range(workers):
            assert kv.keys(f"w{w}-") == [f"w{w}-{i:04d}" for i in range(count)], f"writes of worker {w} lost"
            assert kv.get(f"w{w}-{count - 1:04d}") == {"worker": w, "i": count - 1}
        won = sorted(i for answer in answers for i in answer["won"])
        assert won == list(range(count)), "put_if_absent let two processes win one key, or none"
        for i in range(count):
            winner = kv.get(f"claim-{i:04d}")
            assert i in answers[winner]["won"]

    # ------------------------------------------------------------------ volumes

    def test_volume_bytes_round_trip(self, provider: Provider) -> None:
        vol = provider.volume("data")
        assert not vol.exists("a/b/c.txt")
        vol.write_bytes("a/b/c.txt", b"hello\x00world")
        assert vol.exists("a/b/c.txt")
        assert vol.exists("a/b")
        assert vol.read_bytes("a/b/c.txt") == b"hello\x00world"
        vol.write_bytes("empty.bin", b"")
        assert vol.read_bytes("empty.bin") == b""
        with pytest.raises(NotFoundError):
            vol.read_bytes("a/b/missing.txt")

    def test_volume_files_in_and_out(self, provider: Provider, tmp_path: Path) -> None:
        vol = provider.volume("models")
        src = tmp_path / "src.bin"
        src.write_bytes(bytes(range(256)) * 100)
        vol.put_file(src, "x/y.bin")
        out = tmp_path / "out" / "deep" / "y.bin"
        vol.get_file("x/y.bin", out)
        assert out.read_bytes() == src.read_bytes()
        with pytest.raises(NotFoundError):
            vol.get_file("x/missing.bin", tmp_path / "never")
        assert not (tmp_path / "never").exists()
        with pytest.raises(NotFoundError):
            vol.put_file(tmp_path / "no-such-local-file", "x/z.bin")
        assert not vol.exists("x/z.bin")

    def test_volume_folders_in_and_out(self, provider: Provider, tmp_path: Path) -> None:
        vol = provider.volume("data")
        tree = {"top.txt": b"top", "sub/one.jsonl": b'{"a": 1}\n', "sub/deeper/two.bin": b"\x01\x02"}
        src = tmp_path / "tree"
        for rel, data in tree.items():
            (src / rel).parent.mkdir(parents=True, exist_ok=True)
            (src / rel).write_bytes(data)
        vol.put_directory(src, "datasets/demo")
        assert vol.read_bytes("datasets/demo/sub/deeper/two.bin") == b"\x01\x02"
        out = tmp_path / "back"
        vol.get_directory("datasets/demo", out)
        got = {p.relative_to(out).as_posix(): p.read_bytes() for p in out.rglob("*") if p.is_file()}
        assert got == tree

    def test_volume_listing(self, provider: Provider) -> None:
        vol = provider.volume("eval")
        for path in ("b.txt", "a/2.txt", "a/1.txt", "a/sub/3.txt"):
            vol.write_bytes(path, path.encode())
        top = vol.listdir()
        assert [(e.path, e.is_dir) for e in top] == [("a", True), ("b.txt", False)]
        assert all(isinstance(e, FileEntry) for e in top)
        assert top[1].size == len(b"b.txt")
        assert [e.path for e in vol.listdir("a")] == ["a/1.txt", "a/2.txt", "a/sub"]
        files = [e.path for e in vol.listdir("a", recursive=True) if not e.is_dir]
        assert files == ["a/1.txt", "a/2.txt", "a/sub/3.txt"]
        with pytest.raises(NotFoundError):
            vol.listdir("no-such-folder")

    def test_volume_remove(self, provider: Provider) -> None:
        vol = provider.volume("data")
        vol.write_bytes("f/one.txt", b"1")
        vol.write_bytes("f/two.txt", b"2")
        vol.remove("f/one.txt")
        assert not vol.exists("f/one.txt")
        assert vol.exists("f/two.txt")
        with pytest.raises(TrainkitError):
            vol.remove("f")  # a folder needs recursive=True
        assert vol.read_bytes("f/two.txt") == b"2"
        vol.remove("f", recursive=True)
        assert not vol.exists("f")
        with pytest.raises(NotFoundError):
            vol.remove("f/one.txt")

    def test_volume_atomic_replace(self, provider: Provider) -> None:
        vol = provider.volume("data")
        size = 1 << 20
        old, new = b"A" * size, b"B" * size
        vol.write_bytes("file.bin", old)
        reads: list[int] = []
        torn: list[bytes] = []
        stop = threading.Event()

        def read_while_writing() -> None:
            while not stop.is_set():
                data = vol.read_bytes("file.bin")
                reads.append(len(data))
                if data not in (old, new):
                    torn.append(data[:16] + b"...")

        reader = threading.Thread(target=read_while_writing)
        reader.start()
        try:
            for i in range(20):
                vol.write_bytes("file.bin", new if i % 2 == 0 else old)
        finally:
            stop.set()
            reader.join()
        assert vol.read_bytes("file.bin") == old
        assert reads, "the reader never read"
        assert not torn, f"a reader saw a partly written file ({len(torn)} of {len(reads)} reads)"
        assert [e.path for e in vol.listdir()] == ["file.bin"], "a temporary file was left or listed"

    def test_volume_large_file(self, provider: Provider, tmp_path: Path) -> None:
        vol = provider.volume("models")
        size = self.large_file_mb << 20
        src = tmp_path / "large.bin"
        digest = hashlib.sha256()
        block = os.urandom(1 << 20)
        with open(src, "wb") as fh:
            for i in range(self.large_file_mb):
                chunk = bytes([i % 256]) + block[1:]
                digest.update(chunk)
                fh.write(chunk)
        vol.put_file(src, "big/large.bin")
        src.unlink()
        [entry] = vol.listdir("big")
        assert (entry.path, entry.size) == ("big/large.bin", size)
        out = tmp_path / "large-back.bin"
        vol.get_file("big/large.bin", out)
        back = hashlib.sha256()
        with open(out, "rb") as fh:
            for chunk in iter(lambda: fh.read(1 << 20), b""):
                back.update(chunk)
        assert back.hexdigest() == digest.hexdigest()
        vol.remove("big", recursive=True)

    def test_volume_refuses_escaping_paths(self, provider: Provider, tmp_path: Path) -> None:
        vol = provider.volume("data")
        local = tmp_path / "local.txt"
        local.write_text("x")
        folder = tmp_path / "folder"
        folder.mkdir()
        (folder / "f.txt").write_text("y")
        attempts = {
            "exists": lambda p: vol.exists(p),
            "listdir": lambda p: vol.listdir(p),
            "read_bytes": lambda p: vol.read_bytes(p),
            "write_bytes": lambda p: vol.write_bytes(p, b"escaped"),
            "put_file": lambda p: vol.put_file(local, p),
            "put_directory": lambda p: vol.put_directory(folder, p),
            "get_file": lambda p: vol.get_file(p, tmp_path / "got"),
            "get_directory": lambda p: vol.get_directory(p, tmp_path / "got-dir"),
            "remove": lambda p: vol.remove(p, recursive=True),
        }
        for path in ESCAPING_PATHS:
            for method, attempt in attempts.items():
                with pytest.raises(UsageError):
                    attempt(path)
                    pytest.fail(f"volume.{method}({path!r}) was not refused")
        assert not (tmp_path / "got").exists() and not (tmp_path / "got-dir").exists()
        assert not Path("/tmp/outside.txt").exists() or Path("/tmp/outside.txt").read_bytes() != b"escaped"

    def test_volume_refuses_symlink_out(self, provider: Provider, tmp_path: Path) -> None:
        vol = provider.volume("data")
        vol.write_bytes("inside.txt", b"in")
        root = self.volume_root(vol)
        if root is None:
            pytest.skip(f"no local folder behind the volumes of {provider.name!r} to plant a link in")
        outside = tmp_path / "outside"
        outside.mkdir()
        (outside / "secret.txt").write_bytes(b"secret")
        (root / "link-dir").symlink_to(outside, target_is_directory=True)
        (root / "link-file").symlink_to(outside / "secret.txt")
        for path in ("link-dir/secret.txt", "link-file"):
            with pytest.raises(UsageError):
                vol.read_bytes(path)
            with pytest.raises(UsageError):
                vol.get_file(path, tmp_path / "copied")
        with pytest.raises(UsageError):
            vol.write_bytes("link-dir/planted.txt", b"planted")
        with pytest.raises(UsageError):
            vol.write_bytes("link-file", b"overwritten")
        with pytest.raises(UsageError):
            vol.remove("link-dir/secret.txt")
        assert not (outside / "planted.txt").exists()
        assert (outside / "secret.txt").read_bytes() == b"secret"
        assert not (tmp_path / "copied").exists()
        assert vol.read_bytes("inside.txt") == b"in"

    def test_volume_durable_across_processes(self, provider: Provider, contract_settings: Settings) -> None:
        self.require(provider, "durable_volumes")
        self.require_other_processes()
        provider.volume("data").write_bytes("shared/from-parent.txt", "pärent".encode())
        assert self.run_child(contract_settings, "volume_read", kind="data", path="shared/from-parent.txt") == "pärent"
        self.run_child(contract_settings, "volume_write", kind="data", path="shared/from-child.txt", text="child")
        assert provider.volume("data").read_bytes("shared/from-child.txt") == b"child"

    # ------------------------------------------------------------------ job calls

    def test_run_returns_value(self, provider: Provider) -> None:
        self.require(provider, "run_functions")
        handle = provider.spawn("sleep", seconds=0, result={"answer": [42, "x", None]})
        assert isinstance(handle, RunHandle)
        assert handle.function == "sleep"
        assert handle.wait(timeout=self.call_timeout_s) == {"answer": [42, "x", None]}
        status = handle.status()
        assert (status.state, status.done, status.error) == ("succeeded", True, None)
        ping = provider.spawn("ping", echo="hello").wait(timeout=self.call_timeout_s)
        assert (ping["ok"], ping["provider"], ping["echo"]) == (True, provider.name, "hello")

    def test_gpu_provider_receives_the_placement(self, provider: Provider, monkeypatch: pytest.MonkeyPatch) -> None:
        """A provider that declares `gpu` gets, with a 31b job, the GPU that job needs, without trainkit's presets."""
        import inspect

        from trainkit_core.plugins.placement import placement_for

        self.require(provider, "run_functions")
        self.require(provider, "gpu")
        runner = provider.runner()
        assert "placement" in inspect.signature(runner.spawn).parameters, (
            f"provider {provider.name!r} declares `gpu`, so its FunctionRunner.spawn must take `placement`"
        )
        received: dict[str, Any] = {}

        class Received(Exception):
            pass

        def spawn(function: str, kwargs: Any, placement: Any = None) -> Any:
            received.update(function=function, kwargs=dict(kwargs), placement=placement)
            raise Received  # the placement is what is checked; no GPU job starts

        monkeypatch.setattr(runner, "spawn", spawn)
        monkeypatch.setattr(provider, "runner", lambda: runner)
        with pytest.raises(Received):
            provider.spawn("gpu_ping", model_size="31b")
        expected = placement_for("gpu_ping", {"model_size": "31b"}, provider.settings)
        assert expected.gpu and expected.gpu_count >= 1
        assert received == {"function": "gpu_ping", "kwargs": {"model_size": "31b"}, "placement": expected}

    def test_run_beyond_the_declared_gpus_and_nodes_is_refused_before_it_starts(
        self, provider: Provider, monkeypatch: pytest.MonkeyPatch
    ) -> None:
        """A train job asking for more GPUs per node, or more nodes, than the provider declares never reaches its runner.

        The refusal names what the provider can do, so a user knows what to ask for instead.
        """
        self.require(provider, "run_functions")
        caps = provider.capabilities
        runner = provider.runner()
        started: list[str] = []
        monkeypatch.setattr(runner, "spawn", lambda function, kwargs, **_: started.append(function))
        monkeypatch.setattr(provider, "runner", lambda: runner)
        runs = provider.kv("runs")
        too_many = max(caps.max_gpus_per_node, 1) + 1
        for run_id, asked, can in (
            ("run-contract-gpus", {"gpus": too_many}, f"at most {caps.max_gpus_per_node} GPU(s) per node"),
            ("run-contract-nodes", {"nodes": caps.max_nodes + 1}, f"at most {caps.max_nodes} node(s)"),
        ):
            runs.put(run_id, {"id": run_id, "config": {"model_size": "tiny", "dataset": "demo", **asked}})
            try:
                with pytest.raises(UsageError, match=re.escape(can)):
                    provider.spawn("train", run_id=run_id, resume=False)
            finally:
                runs.delete(run_id)
        assert started == []

    def test_run_failure_carries_the_job_error(self, provider: Provider) -> None:
        self.require(provider, "run_functions")
        handle = provider.spawn("fail", message="bad batch at step 17")
        with pytest.raises(JobError, match="bad batch at step 17"):
            handle.wait(timeout=self.call_timeout_s)
        status = handle.status()
        assert status.state == "failed"
        assert "bad batch at step 17" in (status.error or "")

    def test_run_unknown_function_is_refused(self, provider: Provider) -> None:
        self.require(provider, "run_functions")
        with pytest.raises(NotFoundError, match="no-such-job"):
            provider.spawn("no-such-job")

    def test_run_unknown_call_is_refused(self, provider: Provider) -> None:
        self.require(provider, "run_functions")
        with pytest.raises((NotFoundError, UsageError)):
            provider.call("no-such-call")

    def test_run_wait_timeout(self, provider: Provider) -> None:
        self.require(provider, "run_functions")
        handle = provider.spawn("sleep", seconds=10, result="late")
        try:
            with pytest.raises(JobTimeout):
                handle.wait(timeout=0.2)
            assert not handle.status().done
        finally:
            self.stop_call(provider, handle)

    def test_run_cancel(self, provider: Provider) -> None:
        self.require(provider, "run_functions")
        self.require(provider, "stop")
        handle = provider.spawn("sleep", seconds=120)
        try:
            self.wait_for_state(handle, ("running",))
            handle.cancel()
            status = handle.status()
            assert status.state == "cancelled" and status.done
            with pytest.raises(JobError):
                handle.wait(timeout=self.call_timeout_s)
            handle.cancel()  # safe on a call that already ended
            assert handle.status().state == "cancelled"
        finally:
            handle.cancel()

    def test_run_cancel_ends_what_the_job_runs(self, provider: Provider) -> None:
        """Cancel must end the job itself: its heartbeat stops, not only its record's state."""
        self.require(provider, "run_functions")
        self.require(provider, "stop")
        key = f"cancel-{os.getpid()}-{time.monotonic_ns()}"
        beats = provider.kv("beats")
        handle = provider.spawn("sleep", seconds=300, beat=key)
        try:
            deadline = time.monotonic() + self.call_timeout_s
            while not beats.get(key):
                assert time.monotonic() < deadline, f"call {handle.call_id} never beat ({handle.status().state})"
                time.sleep(0.05)
            handle.cancel()
            assert handle.status().state == "cancelled"
            time.sleep(self.cancel_settle_s)
            seen = beats.get(key)
            time.sleep(1.0)  # twenty heartbeats of a job that still runs
            later = beats.get(key)
            assert later == seen, (
                f"call {handle.call_id} is still running after cancel: its heartbeat went on from {seen} to"
                f" {later}; cancel must end the job's process, not only mark the call cancelled"
            )
        finally:
            handle.cancel()

    def test_run_logs_hold_the_job_output(self, provider: Provider) -> None:
        self.require(provider, "run_functions")
        if not self.keeps_logs:
            pytest.skip(f"{type(self).__name__} declares keeps_logs = False")
        marker = f"said by the job {os.getpid()}-{time.monotonic_ns()}"
        handle = provider.spawn("sleep", seconds=0, say=marker)
        handle.wait(timeout=self.call_timeout_s)
        deadline = time.monotonic() + self.call_timeout_s
        while marker not in (logs := handle.logs()):
            assert time.monotonic() < deadline, f"logs() of {handle.call_id} lack what the job printed: {logs[-500:]!r}"
            time.sleep(0.1)
        assert marker in provider.call(handle.call_id).logs()

    def test_run_found_from_another_process(self, provider: Provider, contract_settings: Settings) -> None:
        self.require(provider, "run_functions")
        self.require_other_processes()
        # Started here, awaited there.
        handle = provider.spawn("sleep", seconds=0.5, result="seen there")
        answer = self.run_child(contract_settings, "call_wait", call_id=handle.call_id, timeout=self.call_timeout_s)
        assert answer == {"result": "seen there", "state": "succeeded"}
        # Started by a process that then exits, awaited here.
        call_id = self.run_child(contract_settings, "spawn", function="sleep", kwargs={"seconds": 1, "result": 7})
        assert provider.call(call_id).wait(timeout=self.call_timeout_s) == 7
        # A failure is seen the same way from elsewhere.
        failed = provider.spawn("fail", message="seen as failed")
        answer = self.run_child(contract_settings, "call_wait", call_id=failed.call_id, timeout=self.call_timeout_s)
        assert answer["state"] == "failed" and "seen as failed" in answer["error"]

    # ------------------------------------------------------------------ run records (seed 002's TrainingRun)

    def new_run(self, provider: Provider, **fields: Any) -> TrainingRun:
        """A run record saved on the provider's store (no job of its own unless `call_id` is given)."""
        from trainkit_core.ids import new_run_id

        run = TrainingRun(id=new_run_id(), created_at=time.time(), **fields)
        run.attach(RunStore.for_provider(provider)).save()
        return run

    def test_run_record_answers_to_the_seeds_names(self, provider: Provider) -> None:
        run = self.new_run(provider, status="running")
        run.modal_app_id, run.modal_app_url = "ap-contract", "https://apps.example/ap-contract"
        assert run.save() is None  # blocking without is_async, as before
        asyncio.run(run.save(is_async=True))  # type: ignore[arg-type]
        loaded = asyncio.run(TrainingRun.from_id(run.id, store=run.store, is_async=True))  # type: ignore[arg-type]
        assert isinstance(loaded, TrainingRun)
        assert loaded.modal_app_id == loaded.provider_app_id == "ap-contract"
        assert loaded.modal_app_url == loaded.provider_app_url == "https://apps.example/ap-contract"
        seed_only = TrainingRun.from_stored_data({"training_run_id": run.id, "modal_app_id": "ap-seed"})
        assert (seed_only.id, seed_only.provider_app_id) == (run.id, "ap-seed")
        with pytest.raises(UsageError, match="modal_app_id 'b' disagrees with provider_app_id 'a'"):
            TrainingRun.from_stored_data({"id": run.id, "provider_app_id": "a", "modal_app_id": "b"})

    def test_run_is_done_once_its_call_finished(self, provider: Provider) -> None:
        """The seed's `done()`: a terminal status, or a finished call (the record is then reconciled)."""
        self.require(provider, "run_functions")
        call = provider.spawn("sleep", seconds=120)
        try:
            self.wait_for_state(call, ("running",))
            run = self.new_run(provider, status="running", call_id=call.call_id)
            assert run.done() is False and run.status == "running"
        finally:
            self.stop_call(provider, call)
        self.wait_for_state(call, ("cancelled", "succeeded", "failed"))
        # The record still says running, the call ended without a word: done, and the record says why.
        assert run.done() is True
        assert run.status == "failed" and (run.error_message or "").startswith("the job")
        assert TrainingRun.from_id(run.id, store=run.store).status == "failed"

    def test_wait_all_releases_each_run_as_it_ends(self, provider: Provider) -> None:
        """The seed's `wait_all` closes each run when that run is done: its call is ended then, not at the end."""
        self.require(provider, "run_functions")
        self.require(provider, "stop")
        calls = [provider.spawn("sleep", seconds=120) for _ in range(2)]
        try:
            for call in calls:
                self.wait_for_state(call, ("running",))
            long_ago = time.time() - 120  # past the grace a job gets to write its history
            first = self.new_run(provider, status="succeeded", call_id=calls[0].call_id, ended_at=long_ago)
            second = self.new_run(provider, status="running", call_id=calls[1].call_id)
            seen: dict[str, str] = {}

            def finish_second() -> None:
                time.sleep(0.5)
                seen["first call when the second run ended"] = calls[0].status().state
                run = TrainingRun.from_id(second.id, store=second.store)
                run.status, run.ended_at = "succeeded", long_ago
                run.save()

            thread = threading.Thread(target=finish_second)
            thread.start()
            done = wait_all([first, second], poll_interval=0.05, timeout=self.call_timeout_s)
            thread.join()
            assert [r.status for r in done] == ["succeeded", "succeeded"]
            assert seen == {"first call when the second run ended": "cancelled"}
            assert [c.status().state for c in calls] == ["cancelled", "cancelled"]
        finally:
            for call in calls:
                call.cancel()

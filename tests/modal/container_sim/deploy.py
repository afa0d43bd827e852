"""Deploy the trainkit app into simulated containers: what Modal would run, offline.

`deploy_sim(settings, root)` builds the app twice, as `trainkit app deploy` would
build it: with the real modal SDK (offline), for the bytes Modal would ship
(each function and class pickled by modal's own serializer) and for the files each
image's mounts would upload (modal's own `get_files_to_upload`, so the `ignore` the
app really passes decides which files reach the container); and with the fake SDK, for
the options the app declares (each image's environment variables, the secrets, the
volumes). Then, for each image:

- a venv holding exactly its packages (`envs.py`), no trainkit distribution;
- a filesystem ``images/<image>/fs`` with the mounted files at their container paths
  (``fs/root/trainkit_core/...``); a container runs with ``fs/root`` as its working
  directory and ``PYTHONPATH``, as Modal's ``/root``;
- the environment: the image's ``env`` and the function's secrets, ``HOME`` in the
  simulation, the volumes' mount paths (and ``HF_HOME``) redirected to the fake volumes'
  folders, and the offline switches of these tests (no Modal server, no model hub).

`containers.json` under the fake's root tells `fake_modal` to start every call of a
declared function in its image's container (`entrypoint.py`) instead of its kind,
in-process worker; the fake app record is deployed so `Function.from_name` finds them.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path, PurePosixPath
from typing import Any

from container_sim.envs import ImageEnv, build_env
from trainkit_modal.locking import read_lock

HERE = Path(__file__).resolve().parent
FAKE_SDK = HERE.parent / "fake_modal.py"
#: Environment a container gets besides what the app declares: a PATH, and the tests'
#: offline switches (modal's config cut off, no model hub).
_BASE_ENV_KEYS = ("PATH", "LANG", "MODAL_CONFIG_PATH", "MODAL_SERVER_URL")


@dataclass
class Sim:
    root: Path
    sim_json: Path
    envs: dict[str, ImageEnv]
    containers: dict[str, dict[str, Any]]
    files: dict[str, list[str]] = field(default_factory=dict)

    def start_web(self, port: int, log: Path, env: dict[str, str] | None = None) -> subprocess.Popen[bytes]:
        """The web function's container, serving its ASGI app on 127.0.0.1:`port` (`env`: the test's knobs)."""
        container = self.containers["web"]
        with open(log, "wb") as out:
            return subprocess.Popen(
                [*container["argv"], "--serve", str(port)],
                cwd=container["cwd"],
                env={**container["env"], **(env or {}), "FAKE_MODAL_ROOT": str(self.root)},
                stdout=out,
                stderr=subprocess.STDOUT,
                start_new_session=True,
            )


def _real_image(obj: Any) -> Any:
    """The `modal.Image` a declared function or class runs on (its `_FunctionSpec`, as `modal shell` reads it)."""
    from modal._utils.async_utils import synchronizer

    inner = synchronizer._translate_in(obj)
    service = inner._get_class_service_function() if hasattr(inner, "_get_class_service_function") else inner
    return service._spec.image


def _payload(obj: Any, kind: str) -> bytes:
    """The bytes `modal deploy` sends for a function or class shipped with `serialized=True`."""
    from modal._serialization import serialize
    from modal._utils.async_utils import synchronizer

    inner = synchronizer._translate_in(obj)
    if kind == "class":
        return serialize(inner._user_cls)  # type: ignore[no-any-return]
    return inner._source_info.serialized_function()  # type: ignore[no-any-return]


def _mounts(image: Any) -> list[Any]:
    """The mounts of an image and its bases, in layer order.

    Read from each image's dependencies (an `add_local_*` layer depends on its base image
    and its mount); `Image._mount_layers` is filled only once the image is loaded.
    """
    from modal._image import _Image
    from modal.mount import _Mount

    found: list[Any] = []
    for dep in image._deps() if image._deps else []:
        if isinstance(dep, _Image):
            found = [*_mounts(dep), *found]
        elif isinstance(dep, _Mount):
            found.append(dep)
    return found


def _lay_out(image: Any, fs: Path) -> list[str]:
    """Copy what the image's mounts upload to their container paths under `fs`; the paths copied."""
    from modal._utils.async_utils import synchronizer

    copied = []
    for mount in _mounts(synchronizer._translate_in(image)):
        for entry in mount._entries or []:
            for local, remote in entry.get_files_to_upload():
                rel = PurePosixPath(remote).relative_to("/")
                target = fs / rel
                target.parent.mkdir(parents=True, exist_ok=True)
                shutil.copy2(local, target)
                copied.append(rel.as_posix())
    assert copied, "the image mounts no file: the container would have no trainkit source"
    return sorted(copied)


def _declared_env(declared: Any) -> dict[str, str]:
    """The image's `env` layers and the function's secrets' values (fake SDK's record)."""
    env: dict[str, str] = {}
    for layer in declared.options["image"].layers:
        if layer[0] == "env":
            env.update(layer[1])
    for secret in declared.options.get("secrets") or []:
        env.update(secret.values)
    return env


def deploy_sim(settings: Any, root: Path, say: Callable[[str], None] = print) -> Sim:
    """Build the app's images as venvs and layouts, and deploy it to the fake under `root` (`say`: progress lines)."""
    import fake_modal

    from trainkit_modal.app import build_app

    real = build_app(settings)
    fake = build_app(settings, sdk=fake_modal)
    spec = real.spec
    sim_dir = root / "sim"
    payloads = sim_dir / "payloads"
    sdk = sim_dir / "sdk"
    for folder in (payloads, sdk, sim_dir / "home"):
        folder.mkdir(parents=True, exist_ok=True)
    shutil.copy2(FAKE_SDK, sdk / "fake_modal.py")

    mounts = {}
    for kind, volume in spec.volumes.items():
        mounts[kind] = str(fake_modal.Volume.from_name(volume.name, create_if_missing=True).root)

    envs: dict[str, ImageEnv] = {}
    layouts: dict[str, Path] = {}
    files: dict[str, list[str]] = {}
    containers: dict[str, dict[str, Any]] = {}
    image_of = {name: fs.image for name, fs in spec.functions.items()}
    if spec.web is not None:
        image_of[spec.web.name] = spec.web.image
    for name, obj in real.objects.items():
        image_name = image_of[name]
        image_spec = spec.images[image_name]
        if image_name not in envs:
            lock = read_lock(image_name).pins
            envs[image_name] = build_env(image_name, image_spec.python_version, image_spec.all_packages, lock, say)
            only_resolved = [
                *envs[image_name].left_out,
                *(f"{p} (left out of the image; resolved)" for p in image_spec.resolved_only),
            ]
            print(
                f"container_sim: {image_name} image, only resolved, not installed: {', '.join(only_resolved) or 'none'}",
                file=sys.stderr,
            )
            fs = sim_dir / "images" / image_name / "fs"
            shutil.rmtree(fs, ignore_errors=True)
            (fs / "root").mkdir(parents=True)
            image = _real_image(obj)
            assert image is not None, f"no image on {name}"
            files[image_name] = _lay_out(image, fs)
            layouts[image_name] = fs
        declared = fake.objects[name]
        kind = "class" if declared.kind == "class" else "function"
        (payloads / f"{name}.pkl").write_bytes(_payload(obj, kind))
        env = {k: os.environ[k] for k in _BASE_ENV_KEYS if k in os.environ}
        env.update(_declared_env(declared))
        env.update(
            {
                "HOME": str(sim_dir / "home"),
                "PYTHONPATH": str(layouts[image_name] / "root"),
                "HF_HOME": mounts["hf-cache"],
                "HF_HUB_OFFLINE": "1",
                "PYTHONUNBUFFERED": "1",
            }
        )
        containers[name] = {
            "kind": kind,
            "image": image_name,
            "argv": [str(envs[image_name].python), str(HERE / "entrypoint.py"), str(sim_dir / "sim.json"), name],
            "cwd": str(layouts[image_name] / "root"),
            "env": env,
        }
    sim_json = sim_dir / "sim.json"
    sim_json.write_text(
        json.dumps(
            {
                "sdk": str(sdk),
                "payloads": str(payloads),
                "mounts": mounts,
                "containers": containers,
                "app_name": spec.app_name,
            },
            indent=1,
        )
    )
    (root / "containers.json").write_text(json.dumps(containers))
    fake.app.deploy(name=spec.app_name)
    return Sim(root, sim_json, envs, containers, files)


__all__ = ["Sim", "deploy_sim", "sys"]

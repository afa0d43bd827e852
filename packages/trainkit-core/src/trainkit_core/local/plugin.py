"""The `local` provider's hook implementations (entry point ``trainkit: local``)."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

from trainkit_core.errors import UsageError
from trainkit_core.local.runner import LocalRunner
from trainkit_core.plugins.hookspecs import VOLUME_KINDS, Capabilities, DeploymentStatus, ProviderManifest, hookimpl
from trainkit_core.plugins.job_extras import EXTRA_MODULES, check_extras
from trainkit_core.plugins.jobs import JobContext
from trainkit_core.toolkit.folder_volume import FolderVolume
from trainkit_core.toolkit.sqlite_kv import LocalKV, db_path
from trainkit_core.toolkit.volume_paths import check_folder_setting, clean_relative

if TYPE_CHECKING:
    from trainkit_core.settings import Settings

NAME = "local"

__all__ = ["EXTRA_MODULES", "NAME", "home_of", "job_context", "local_volume"]


def home_of(settings: Settings) -> Path:
    """The local provider's home; `UsageError` naming TRAINKIT_HOME when a file is in the way."""
    return check_folder_setting(Path(settings.provider.home).expanduser(), "TRAINKIT_HOME")


def volume_root(home: Path, name: str) -> Path:
    """The folder of volume `name`: ``<home>/volumes/<name>``; `UsageError` for a name that is not one folder."""
    if "/" in name:
        raise UsageError(f"volume name {name!r} must not contain '/'")
    return Path(home) / "volumes" / clean_relative(name, what="volume name")


def local_volume(settings: Settings, name: str) -> FolderVolume:
    """The volume `name` under the home; `UsageError` naming the setting when a file is in the way."""
    home = home_of(settings)
    variable = "TRAINKIT_HOME"
    for kind in VOLUME_KINDS:
        if settings.volumes.name_for(kind) == name:
            variable = "TRAINKIT_VOL_" + kind.upper().replace("-", "_")
    root = check_folder_setting(volume_root(home, name), variable)
    try:
        return FolderVolume(root, name)
    except OSError as exc:
        raise UsageError(f"{variable}: cannot create the volume folder of {name!r} ({exc.strerror})") from None


def job_context(settings: Settings, call_id: str) -> JobContext:
    """The context a local job gets: volumes are plain directories, writes visible at once."""
    home = home_of(settings)
    paths = {kind: local_volume(settings, settings.volumes.name_for(kind)).root for kind in VOLUME_KINDS}
    return JobContext(
        settings=settings,
        provider=NAME,
        call_id=call_id,
        kv_factory=lambda namespace: LocalKV(home, namespace),
        volume_paths=paths,
        rank_context=f"{__name__}:job_context",
    )


class LocalDeployment:
    """Nothing to deploy but folders; `check` says which pip extra a job lacks."""

    def __init__(self, settings: Settings) -> None:
        self.settings = settings
        self.home = home_of(settings)

    def check(self, functions: list[str]) -> None:
        check_extras(functions, EXTRA_MODULES)

    def deploy(self) -> DeploymentStatus:
        for kind in VOLUME_KINDS:
            name = self.settings.volumes.name_for(kind)
            FolderVolume(volume_root(self.home, name), name)
        LocalKV(self.home, "runs").keys("")  # creates the database
        return self.status()

    def status(self) -> DeploymentStatus:
        volumes = {kind: str(self.home / "volumes" / self.settings.volumes.name_for(kind)) for kind in VOLUME_KINDS}
        ready = all(Path(p).is_dir() for p in volumes.values()) and db_path(self.home).exists()
        return DeploymentStatus("ready" if ready else "not-deployed", {"home": str(self.home), "volumes": volumes})

    def stop(self) -> None:
        """Nothing runs permanently on the local provider; jobs are stopped one by one."""


@hookimpl
def provider_manifest() -> ProviderManifest:
    return ProviderManifest(
        name=NAME,
        description="This machine: folders for volumes, SQLite for state, detached processes for jobs.",
        capabilities=Capabilities(
            gpu=False,
            stop=True,
            warm_inference=True,
            web_endpoint=False,
            durable_volumes=True,
            durable_kv=True,
            run_functions=True,
            app_lifecycle=False,
            local_files=True,
            max_gpus_per_node=visible_gpus(),
            max_nodes=1,
            cpu_processes=True,
        ),
    )


def visible_gpus() -> int:
    """How many NVIDIA GPUs CUDA will show a job here, without importing torch (the CLI starts fast).

    The driver lists one folder per GPU under /proc/driver/nvidia/gpus; ``CUDA_VISIBLE_DEVICES``
    narrows them as CUDA does (an empty value hides them all). 0 on a machine without the driver.
    """
    import os
    from pathlib import Path

    folder = Path("/proc/driver/nvidia/gpus")
    present = len(list(folder.iterdir())) if folder.is_dir() else 0
    visible = os.environ.get("CUDA_VISIBLE_DEVICES")
    if visible is None:
        return present
    return min(present, len([part for part in visible.split(",") if part.strip() and part.strip() != "-1"]))


@hookimpl
def volume(provider: str, settings: Settings, name: str) -> FolderVolume | None:
    return local_volume(settings, name) if provider == NAME else None


@hookimpl
def kv_store(provider: str, settings: Settings, namespace: str) -> LocalKV | None:
    return LocalKV(home_of(settings), namespace) if provider == NAME else None


@hookimpl
def run_function(provider: str, settings: Settings) -> LocalRunner | None:
    return LocalRunner(home_of(settings), settings) if provider == NAME else None


@hookimpl
def provision(provider: str, settings: Settings) -> LocalDeployment | None:
    return LocalDeployment(settings) if provider == NAME else None


@hookimpl
def inference_server(provider: str, settings: Settings) -> object | None:
    """The warm local inference worker (started on first request, gone after the idle timeout)."""
    if provider != NAME:
        return None
    from trainkit_core.local.inference_server import LocalInferenceServer

    return LocalInferenceServer(home_of(settings), settings.compute.infer_idle_timeout_s)

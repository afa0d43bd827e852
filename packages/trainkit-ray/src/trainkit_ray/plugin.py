"""The `ray` provider's hook implementations (entry point ``trainkit: ray``).

Nothing here imports `ray` at module level: the store and the volumes on mounted
storage need no cluster, so `trainkit --help` and `runs list` never pay `ray.init`.
"""

from __future__ import annotations

import json
import sys
import time
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from trainkit_core.errors import NotFoundError
from trainkit_core.plugins.hookspecs import VOLUME_KINDS, Capabilities, DeploymentStatus, ProviderManifest, hookimpl
from trainkit_ray.settings import ray_settings, storage_path, trainkit_settings

if TYPE_CHECKING:
    from trainkit_core.settings import Settings
    from trainkit_ray.inference import RayInferenceServer
    from trainkit_ray.runner import RayRunner
    from trainkit_ray.web import RayWebApi

NAME = "ray"
#: What the cluster had when this machine last connected (GPUs decide the `gpu` capability).
CLUSTER_FILE = "cluster.json"

__all__ = ["NAME", "storage_of", "trainkit_settings"]


def storage_of(settings: Settings) -> Any:
    """The shared storage: the folder itself when mounted here, else through the cluster."""
    own = ray_settings(settings)
    root = storage_path(settings)
    if own.storage_access == "cluster":
        from trainkit_ray.storage_actor import ClusterStorage

        return ClusterStorage(own, str(root))
    from trainkit_ray.storage import MountedStorage

    return MountedStorage(root)


def cluster_resources(settings: Settings) -> dict[str, Any]:
    """Connect and read what the cluster has; kept on the storage for the manifest to read."""
    from trainkit_ray.connection import connect

    ray = connect(ray_settings(settings))
    resources = {k: v for k, v in ray.cluster_resources().items() if not k.startswith("node:")}
    info = {"resources": resources, "nodes": len([n for n in ray.nodes() if n.get("Alive")])}
    if ray_settings(settings).storage_access == "mounted":
        path = storage_path(settings) / CLUSTER_FILE
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(json.dumps(info))
    return info


def _cluster_gpus() -> int:
    """The cluster's GPUs at the last look (`trainkit app deploy`), without connecting now."""
    try:
        from trainkit_core.settings import Settings

        info = json.loads((storage_path(Settings.from_env()) / CLUSTER_FILE).read_text())
    except (OSError, ValueError, Exception):
        return 0
    return int(float(info.get("resources", {}).get("GPU", 0)))


class RayDeployment:
    """The cluster is the user's: deploying makes the storage folders and reads the cluster's resources.

    `trainkit app deploy` is also how the manifest learns that the cluster has GPUs (the
    manifest hook gets no settings and must not connect). With ``TRAINKIT_RAY_WEB`` it
    starts the web API on the cluster too (`trainkit_ray.web`); `serve` runs it for as
    long as `trainkit serve` does, as Modal's dev mode does.
    """

    def __init__(self, settings: Settings) -> None:
        self.settings = settings

    def check(self, functions: list[str]) -> None:
        """Jobs run on the cluster's Python, so only their names are checked here."""
        from trainkit_core.plugins.jobs import JOBS

        for function in functions:
            if function not in JOBS:
                raise NotFoundError(f"unknown job function {function!r}; known: {', '.join(sorted(JOBS))}")

    def deploy(self) -> DeploymentStatus:
        storage = storage_of(self.settings)
        for kind in VOLUME_KINDS:
            storage.volume(self.settings.volumes.name_for(kind)).exists("")
        storage.kv("runs").keys("")
        if ray_settings(self.settings).web:
            self.web().start()
        return self.status()

    def web(self) -> RayWebApi:
        from trainkit_ray.web import RayWebApi

        return RayWebApi(self.settings, storage_of(self.settings))

    def status(self) -> DeploymentStatus:
        info = cluster_resources(self.settings)
        own = ray_settings(self.settings)
        detail = {
            "app_name": f"on the Ray cluster {own.address or 'auto'}",
            **storage_of(self.settings).describe(),
            **info,
            "address": own.address or "auto",
        }
        return DeploymentStatus("ready", detail, self.web().url())

    def serve(self, on_url: Callable[[str], None] | None = None, *, block: bool = True) -> str:
        """`trainkit serve`: the web API on the cluster until Ctrl-C, then ended (unless it ran before)."""
        url, started = self.web().start()
        print(f"trainkit web API on the Ray cluster: {url}", flush=True)
        if on_url is not None:
            on_url(url)
        if block:
            try:
                while True:
                    time.sleep(3600)
            except KeyboardInterrupt:
                if started:
                    print("stopping the web API on the cluster", file=sys.stderr, flush=True)
                    self.web().stop()
        return url

    def stop(self) -> None:
        """End the long-lived actors (web API, warm inference, storage); job calls are stopped one by one."""
        from trainkit_ray.connection import connect, find_actor
        from trainkit_ray.inference import ACTOR_NAME
        from trainkit_ray.storage_actor import actor_name

        self.web().stop()
        own = ray_settings(self.settings)
        ray = connect(own)
        for name in (ACTOR_NAME, actor_name(str(storage_path(self.settings)))):
            actor = find_actor(own, name)
            if actor is not None:
                ray.kill(actor, no_restart=True)


@hookimpl
def provider_manifest() -> ProviderManifest:
    return ProviderManifest(
        name=NAME,
        description="A Ray cluster you run: jobs as detached actors, state and volumes on its shared storage.",
        capabilities=Capabilities(
            gpu=_cluster_gpus() > 0,
            stop=True,
            warm_inference=True,
            web_endpoint=True,
            durable_volumes=True,
            durable_kv=True,
            run_functions=True,
            app_lifecycle=True,
            local_files=False,
            # A run on several ranks trains on Ray Train's workers (`train_ranks`): CPU workers for
            # --processes, one GPU each for --gpus, placed by Ray wherever the cluster has them.
            cpu_processes=True,
            max_gpus_per_node=max(1, _cluster_gpus()),
        ),
    )


@hookimpl
def volume(provider: str, settings: Settings, name: str) -> Any:
    return storage_of(settings).volume(name) if provider == NAME else None


@hookimpl
def kv_store(provider: str, settings: Settings, namespace: str) -> Any:
    return storage_of(settings).kv(namespace) if provider == NAME else None


@hookimpl
def run_function(provider: str, settings: Settings) -> RayRunner | None:
    if provider != NAME:
        return None
    from trainkit_ray.runner import RayRunner

    return RayRunner(settings, ray_settings(settings), storage_of(settings), str(storage_path(settings)))


@hookimpl
def provision(provider: str, settings: Settings) -> RayDeployment | None:
    return RayDeployment(settings) if provider == NAME else None


@hookimpl
def inference_server(provider: str, settings: Settings) -> RayInferenceServer | None:
    if provider != NAME:
        return None
    from trainkit_ray.inference import RayInferenceServer
    from trainkit_ray.settings import job_environment

    env = job_environment(settings)
    return RayInferenceServer(
        ray_settings(settings), str(storage_path(settings)), env, settings.compute.infer_idle_timeout_s
    )

"""The web API served on the cluster: trainkit-api's app in a detached actor that runs uvicorn.

`trainkit app deploy` starts it when ``TRAINKIT_RAY_WEB`` is on, `trainkit serve
--provider ray` starts it for as long as that command runs, and `trainkit app stop`
ends it. The actor (``trainkit-web``) is placed on the head node (Ray's
``node:__internal_head__`` resource), the one machine of the cluster whose address its
users know, and listens there on ``TRAINKIT_RAY_WEB_HOST:TRAINKIT_RAY_WEB_PORT``.

Its API is a consumer like any other: it finds the `ray` provider through the plugin
manager, as a process of the cluster does (the store and the volumes on the mounted
shared path, jobs as actors, generation through the warm inference actor). A web API
on a cluster is reachable by whoever reaches the head node, so it needs
``TRAINKIT_API_TOKEN``; the token travels as a job's secrets do, in a 0600 file on the
shared storage that the actor reads into its own environment and that is removed once
it listens, never as an actor argument, which Ray's state API and dashboard list.
"""

from __future__ import annotations

import os
import threading
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any

from trainkit_core.errors import JobError, UsageError
from trainkit_ray.connection import connect, find_actor
from trainkit_ray.settings import ray_settings, storage_path
from trainkit_ray.storage import MountedStorage

if TYPE_CHECKING:
    from trainkit_core.settings import Settings

ACTOR_NAME = "trainkit-web"
#: The name of the token's file among the call secrets of the shared storage.
SECRETS_NAME = "trainkit-web"
#: Ray's resource of the head node (`ray._common.constants.HEAD_NODE_RESOURCE_NAME`).
HEAD_NODE = {"node:__internal_head__": 0.001}
#: How long the actor may take to import the API and listen.
START_TIMEOUT_S = 120.0
#: Addresses that mean every interface: the URL then names the head node's own address.
EVERY_INTERFACE = ("0.0.0.0", "::", "")


class WebApiActor:
    """The actor's body; `ray.remote` wraps it on first use. uvicorn serves in a thread of it."""

    def __init__(self, storage: str, env: dict[str, str], host: str, port: int) -> None:
        import uvicorn

        os.environ.update(env)
        os.environ.update(MountedStorage(Path(storage)).read_secrets(SECRETS_NAME))
        from trainkit_api.app import create_app
        from trainkit_core.plugins.provider import get_provider
        from trainkit_core.settings import Settings

        settings = Settings.from_env()
        app = create_app(settings, provider=get_provider("ray", settings))
        config = uvicorn.Config(app, host=host, port=port, log_level="warning", timeout_graceful_shutdown=5)
        self.server = uvicorn.Server(config)
        self.host, self.port = host, port
        # Not the main thread: uvicorn installs no signal handlers there (Ray's worker keeps its own).
        self.thread = threading.Thread(target=self.server.run, name="trainkit-web", daemon=True)
        self.thread.start()

    def url(self) -> str:
        """Where the API listens, once it does; an error when it could not (a port in use)."""
        import ray

        deadline = time.monotonic() + START_TIMEOUT_S
        while not self.server.started:
            if not self.thread.is_alive():
                raise UsageError(
                    f"the web API could not listen on {self.host}:{self.port} on the head node "
                    "(see the actor's log in Ray's session logs)",
                    hint="set TRAINKIT_RAY_WEB_PORT to a free port (0: any)",
                )
            if time.monotonic() > deadline:
                raise JobError(f"the web API did not listen within {START_TIMEOUT_S:g} s")
            time.sleep(0.05)
        port = self.server.servers[0].sockets[0].getsockname()[1]
        host = ray.util.get_node_ip_address() if self.host in EVERY_INTERFACE else self.host
        return f"http://{f'[{host}]' if ':' in host else host}:{port}"


class RayWebApi:
    """Starts, finds and stops the web API's actor, from any process that reaches the cluster."""

    def __init__(self, settings: Settings, storage: Any) -> None:
        self.settings = settings
        self.own = ray_settings(settings)
        #: The shared storage as this machine reaches it (`trainkit_ray.plugin.storage_of`).
        self.storage = storage

    def _actor(self) -> Any | None:
        return find_actor(self.own, ACTOR_NAME)

    def start(self) -> tuple[str, bool]:
        """The API's URL, and whether this call started it (False: it was running already)."""
        from trainkit_ray.errors import unwrap
        from trainkit_ray.settings import job_environment

        token = self.settings.api.api_token
        if token is None:
            raise UsageError(
                "refusing to serve the web API on the Ray cluster without a token: whoever reaches the head node could "
                "start jobs and read models",
                hint="set TRAINKIT_API_TOKEN",
            )
        ray = connect(self.own)
        actor = self._actor()
        if actor is not None:
            with unwrap():
                return str(ray.get(actor.url.remote())), False
        cluster_storage = str(storage_path(self.settings))
        env = job_environment(self.settings)
        # The actor is a process of the cluster: it sees the shared path, whatever this machine does.
        env.update(TRAINKIT_PROVIDER="ray", TRAINKIT_RAY_STORAGE=cluster_storage, TRAINKIT_RAY_STORAGE_ACCESS="mounted")
        self.storage.write_secrets(SECRETS_NAME, {"TRAINKIT_API_TOKEN": token.get_secret_value()})
        try:
            actor = (
                ray.remote(WebApiActor)
                .options(
                    name=ACTOR_NAME,
                    namespace=self.own.namespace,
                    lifetime="detached",
                    get_if_exists=True,
                    num_cpus=0,
                    resources=HEAD_NODE,
                    max_concurrency=8,
                )
                .remote(cluster_storage, env, self.own.web_host, self.own.web_port)
            )
            with unwrap():
                url = str(ray.get(actor.url.remote()))
        except BaseException:
            self._kill(actor)
            raise
        finally:
            self.storage.remove_secrets(SECRETS_NAME)  # read by the actor at its start: no longer needed on disk
        return url, True

    def url(self) -> str | None:
        """The running API's URL, or None when it does not run."""
        from trainkit_ray.errors import unwrap

        actor = self._actor()
        if actor is None:
            return None
        with unwrap():
            return str(connect(self.own).get(actor.url.remote()))

    def stop(self) -> None:
        self._kill(self._actor())

    def _kill(self, actor: Any | None) -> None:
        if actor is None:
            return
        ray = connect(self.own)
        ray.kill(actor, no_restart=True)
        deadline = time.monotonic() + 30  # until its process, and so its port, is gone
        while self._actor() is not None and time.monotonic() < deadline:
            time.sleep(0.05)

"""The Ray provider's own settings (``TRAINKIT_RAY_*``), read by its hooks and its jobs."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Literal

from pydantic import Field
from pydantic_settings import BaseSettings, SettingsConfigDict

if TYPE_CHECKING:
    from trainkit_core.settings import Settings

#: Secrets that reach a job only through its secrets file, never as actor arguments.
FORWARDED_SECRETS = ("HF_TOKEN", "HUGGING_FACE_HUB_TOKEN", "WANDB_API_KEY")
#: Never an actor argument; the API token does not reach jobs at all (as locally).
SECRET_VARIABLES = (*FORWARDED_SECRETS, "TRAINKIT_API_TOKEN")


def job_environment(settings: Settings) -> dict[str, str]:
    """The settings as the variables a job's process gets: every one but the secrets."""
    return {k: v for k, v in settings.to_env().items() if k not in SECRET_VARIABLES}


class RaySettings(BaseSettings):
    model_config = SettingsConfigDict(env_prefix="TRAINKIT_RAY_", extra="ignore")

    address: str = Field(
        default="",
        description="The Ray cluster: `host:6379` (a process on a cluster machine) or `ray://host:10001` "
        "(Ray Client, from a laptop). Empty: `auto`, a cluster started on this machine with `ray start`; "
        "a cluster is never started by trainkit.",
    )
    storage: str = Field(
        default="",
        description="The cluster's shared storage path (the same path on every node): the state database, "
        "the volumes, the job logs. Empty: `ray` in the home.",
    )
    storage_access: Literal["mounted", "cluster"] = Field(
        default="mounted",
        description="`mounted`: this machine sees the shared storage path. `cluster`: it does not (a laptop), "
        "and reads and writes state and volumes through an actor on the cluster.",
    )
    namespace: str = Field(default="trainkit", min_length=1, description="The Ray namespace of trainkit's actors.")
    job_cpus: float = Field(default=1.0, gt=0, description="CPUs a job asks Ray for.")
    web: bool = Field(
        default=False,
        description="`trainkit app deploy` also serves the web API on the cluster (an actor on the head node "
        "running uvicorn; it needs TRAINKIT_API_TOKEN); `trainkit app stop` ends it.",
    )
    web_host: str = Field(
        default="127.0.0.1",
        description="The address the web API on the cluster listens on, on the head node: `127.0.0.1` "
        "(reached through a proxy or a tunnel on that node) or `0.0.0.0` (every interface).",
    )
    web_port: int = Field(
        default=8000, ge=0, le=65535, description="The web API's port on the head node (0: any free port)."
    )


#: trainkit finds the settings model here, lists it and passes it to jobs.
trainkit_settings = RaySettings


def ray_settings(settings: Settings) -> RaySettings:
    return settings.plugin(RaySettings)


def storage_path(settings: Settings) -> Path:
    """The shared storage path as the cluster sees it (and this machine, when mounted)."""
    own = ray_settings(settings)
    return Path(own.storage).expanduser() if own.storage else Path(settings.provider.home).expanduser() / "ray"

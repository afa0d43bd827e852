"""Build the `modal.App` of trainkit from its spec (`trainkit_modal.spec`).

`build_app(settings)` declares, for the app named `TRAINKIT_APP_NAME`:

- one function per job of `trainkit_core.jobs.JOBS` (`ping`, ...; `train_<size>` and
  `eval_<size>` on the size's GPU), each `trainkit_modal.functions.job_<job>`, around
  `trainkit_modal.container.run_job`, which hands the job a `JobContext` over
  `modal.Dict` and the volumes' mount points;
- one inference class per size (`Inference_<size>`), whose `@modal.enter` loads the
  model stack once per container and whose `scaledown_window` keeps it warm for
  `TRAINKIT_INFER_IDLE_TIMEOUT_S`;
- the web API (`web`) as `@modal.asgi_app`, when trainkit-api is installed.

The app is built inside a function (not at import), so its functions are declared
with `serialized=True`; each is an attribute of `trainkit_modal.functions`, so Modal
ships it by reference and the container imports it from the trainkit sources, on the
Python pinned in `images.toml`, whatever Python deploys. The images carry those sources
through `add_local_python_source`, with every file but bytecode (the dashboard's static
files included).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from trainkit_core.settings import Settings
from trainkit_modal import functions
from trainkit_modal.spec import AppSpec, FunctionSpec, ImageSpec, RetrySpec, build_spec


@dataclass
class BuiltApp:
    """The `modal.App`, its declared objects by name (functions, classes, `web`), and the spec."""

    app: Any
    objects: dict[str, Any]
    spec: AppSpec


def source_ignore(path: Path) -> bool:
    """What the images leave out of the trainkit sources: bytecode only.

    `add_local_python_source`'s default (`NON_PYTHON_FILES`) keeps `.py` files only,
    which would leave the dashboard's static files (trainkit_api/static) behind.
    """
    return "__pycache__" in path.parts or path.suffix == ".pyc"


def _image(modal: Any, spec: ImageSpec) -> Any:
    image = modal.Image.debian_slim(python_version=spec.python_version)
    options = spec.install_options
    if spec.apt_packages:  # Debian's libraries a locked wheel links (libgomp1 for xllamacpp), before pip
        image = image.apt_install(*spec.apt_packages)
    if spec.torch_packages:  # torch and its CUDA, from PyTorch's index, before the rest
        image = image.uv_pip_install(*spec.torch_packages, index_url=spec.torch_index, extra_options=options)
    if spec.packages:
        image = image.uv_pip_install(*spec.packages, extra_options=options)
    if spec.env:
        image = image.env(dict(spec.env))
    return image.add_local_python_source(*spec.local_sources, ignore=source_ignore)


def _retries(modal: Any, spec: RetrySpec | None) -> Any:
    if spec is None:
        return None
    return modal.Retries(
        max_retries=spec.max_retries,
        backoff_coefficient=spec.backoff_coefficient,
        initial_delay=spec.initial_delay,
        max_delay=spec.max_delay,
    )


def build_app(settings: Settings, spec: AppSpec | None = None, sdk: Any = None) -> BuiltApp:
    """The `modal.App` for these settings. Imports modal (or uses `sdk`); contacts nothing until deployed."""
    if sdk is None:
        import modal as sdk
    modal = sdk

    spec = spec or build_spec(settings)
    images = {name: _image(modal, image) for name, image in spec.images.items()}
    volumes = {v.mount_path: modal.Volume.from_name(v.name, create_if_missing=True) for v in spec.volumes.values()}
    hf_secrets = [modal.Secret.from_name(spec.hf_secret, required_keys=["HF_TOKEN"])] if spec.hf_secret else []
    wandb = [modal.Secret.from_name(spec.wandb_secret, required_keys=["WANDB_API_KEY"])] if spec.wandb_secret else []
    app = modal.App(spec.app_name)
    objects: dict[str, Any] = {}

    def common(fs: FunctionSpec) -> dict[str, Any]:
        return {
            "image": images[fs.image],
            "gpu": fs.gpu,
            "timeout": fs.timeout_s,
            "retries": _retries(modal, fs.retries),
            "volumes": dict(volumes),
            "secrets": (list(hf_secrets) if fs.uses_hf_secret else []) + (list(wandb) if fs.job == "train" else []),
            "serialized": True,
            "single_use_containers": fs.single_use_containers,
        }

    for fs in spec.functions.values():
        if fs.kind == "class":
            cls = functions.inference_class(str(fs.size), modal)
            objects[fs.name] = app.cls(**common(fs), scaledown_window=fs.scaledown_window)(cls)
        else:
            body = functions.job_function(fs.job)
            if fs.cluster_size > 1:  # its containers are scheduled together, one input for all
                body = modal.clustered(size=fs.cluster_size)(body)
            objects[fs.name] = app.function(**common(fs), name=fs.name)(body)

    if spec.web is not None:
        web_kwargs = common(spec.web)
        token = settings.api.api_token
        if token is not None:
            # A secret of this deployment only: the token never appears in an image or a log.
            web_kwargs["secrets"] = [modal.Secret.from_dict({"TRAINKIT_API_TOKEN": token.get_secret_value()})]
        web_kwargs.pop("retries")
        # Several requests per container: an SSE stream must not hold a whole container.
        web = modal.concurrent(max_inputs=spec.web.max_inputs)(modal.asgi_app()(functions.web))
        objects[spec.web.name] = app.function(**web_kwargs, name=spec.web.name)(web)

    return BuiltApp(app, objects, spec)

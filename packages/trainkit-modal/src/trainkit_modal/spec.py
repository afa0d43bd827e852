"""The Modal app of trainkit, declared as plain data.

`build_spec(settings)` turns trainkit's settings into an `AppSpec`: the images, the
volumes and their mount points, the secret, and one entry per Modal function or
class with its GPU, timeout, retries and idle window. `trainkit_modal.app` builds the
`modal.App` from this data and nothing else, so tests (and `trainkit app status`) can
read what the app declares without importing modal, and every value Modal would only
refuse at deploy time (GPU names, timeouts over 24 h, the idle window) is checked
here first, with a message that names the setting.

Modal fixes a function's GPU when the app is deployed, so the jobs whose hardware
depends on the model size (``train``, ``eval``, and the inference class) are declared
once per size: ``train_4b`` on an A10G, ``train_12b`` on an A100, and so on.
`target_for(job, kwargs)` maps a job call to the Modal function that runs it.

Routing is separate from image building. `routing_spec(settings)` (functions, GPUs,
volumes, secret names; no images) is what a running app needs to send a job to its
function, and it reads nothing but settings and presets, so it works inside a container,
where no trainkit distribution and no package metadata exist. `build_spec(settings)`
adds the images: what each asks for is read from the installed packages' metadata and
from `images.toml` (the pinned Python and GPU stack), and each installs its lock
(`trainkit_modal.locking`), which must still satisfy that: only the deploying machine
builds them.
"""

from __future__ import annotations

import re
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from trainkit_core.errors import UsageError
from trainkit_core.plugins.hookspecs import VOLUME_KINDS
from trainkit_core.plugins.placement import JOB_TIMEOUT_S, LIGHT_TIMEOUT_S
from trainkit_core.settings import Settings

#: Where each volume kind is mounted in every container.
MOUNT_PATHS: dict[str, str] = {
    "data": "/data",
    "models": "/models",
    "eval": "/eval",
    "hf-cache": "/root/.cache/huggingface",
}

#: `HF_HOME` points at the hf-cache volume, so base models are downloaded once.
HF_HOME = MOUNT_PATHS["hf-cache"]

#: GPU names Modal documents (case-insensitive: modal 1.6.4 only uppercases the name before
#: sending it). `A10G` is Modal's alias of `A10`; `H100!` pins an H100 (no upgrade to an
#: H200); `B200+` lets Modal place the job on a B300.
KNOWN_GPUS = (
    "T4", "L4", "A10", "A10G", "L40S", "A100", "A100-40GB", "A100-80GB", "RTX-PRO-6000",
    "H100", "H100!", "H200", "B200", "B200+",
)  # fmt: skip
#: Modal's documented largest count of GPUs on one container (`:N`).
MAX_GPU_COUNT = 8
#: The cluster sizes the app declares a train function for (`@modal.clustered(size=N)`): a
#: clustered function's size is fixed when it is deployed, so a run on several nodes is routed
#: to the one of its size (`train_nodes2`, ...). The run's own GPU is asked for per call.
CLUSTER_SIZES = (2, 3, 4)
#: The GPUs of a clustered train function when a call asks for none (Modal has no CPU-only clusters).
CLUSTER_DEFAULT_GPU = "H100:8"
_GPU_PATTERN = re.compile(r"^(?P<name>[A-Za-z0-9-]+[!+]?)(?::(?P<count>\d+))?$")

#: Modal's limits, checked here so a bad setting fails before a deploy.
MAX_TIMEOUT_S = 24 * 3600
#: Modal's `scaledown_window` bounds (modal 1.6.4, `_functions.py`).
IDLE_WINDOW_RANGE = (2, 3600)

#: Fallback GPU per size, used only when `trainkit_core.models.presets` is not installed.
_DEFAULT_GPUS = {"tiny": "", "4b": "A10G", "12b": "A100", "31b": "A100-80GB"}

#: Jobs whose hardware depends on the model size, and the image each runs on.
#: (`export` merges a model of that size: its GPU holds the unquantised base, its image has peft.)
SIZED_JOBS: dict[str, str] = {"train": "train", "eval": "infer", "gpu_ping": "train", "export": "infer"}
#: The job served by the warm inference class (one class per size).
INFER_JOB = "infer"
#: Every other job (ping, sleep, fail, dataset checks) runs on the light image, on CPU.
LIGHT_IMAGE = "web"

#: Timeouts of the jobs that are not training (seconds): the placements any provider reads.
INFER_TIMEOUT_S = JOB_TIMEOUT_S["infer"]
EVAL_TIMEOUT_S = JOB_TIMEOUT_S["eval"]
WEB_TIMEOUT_S = 600
#: Requests one web container serves at once (`@modal.concurrent(max_inputs=...)`): event
#: streams stay open for minutes, and each holds one input.
WEB_MAX_INPUTS = 100

#: Base-model organisations whose weights are gated on the Hugging Face hub.
GATED_ORGS = ("google/", "meta-llama/", "mistralai/")

#: Function names of the dispatcher for the web API, and the inference class's prefix.
WEB_FUNCTION = "web"
INFER_CLASS_PREFIX = "Inference_"


@dataclass(frozen=True)
class RetrySpec:
    """`modal.Retries` arguments. A retried train attempt resumes from its last checkpoint."""

    max_retries: int
    backoff_coefficient: float = 2.0
    initial_delay: float = 10.0
    max_delay: float = 60.0


#: Training (`train_<size>`) gets `TRAINKIT_TRAIN_MAX_ATTEMPTS - 1` retries; each resumes from the checkpoint.
#: Other jobs are short and idempotent enough for one more try.
DEFAULT_RETRIES = RetrySpec(max_retries=1)
#: The inference classes get none: Modal re-runs an input whose function raised per `Retries`,
#: and a generation raises on what will fail again (a user's bad request, a timeout), which
#: a retry would only make the user pay twice (after `initial_delay`). An input whose
#: container crashed (out of memory, a lost GPU) is re-run by Modal whatever `Retries` say.
INFER_RETRIES: RetrySpec | None = None


@dataclass(frozen=True)
class ImageSpec:
    """One container image: Debian slim + pip packages + the trainkit sources."""

    name: str
    python_version: str
    packages: tuple[str, ...]
    local_sources: tuple[str, ...]
    env: dict[str, str] = field(default_factory=dict)
    #: torch (and its CUDA companions), installed first from `torch_index` (GPU images only).
    torch_index: str | None = None
    torch_packages: tuple[str, ...] = ()
    #: Raw options of each install layer: ``--no-deps`` for a lock, which a resolver checked as a whole.
    install_options: str = ""
    #: Packages resolved with the image (in its lock) but installed in none, on purpose (`locking.LEFT_OUT`).
    resolved_only: tuple[str, ...] = ()
    #: Debian packages installed before the pip layers: shared libraries a locked wheel links and does not
    #: bundle (libgomp1 for xllamacpp).
    apt_packages: tuple[str, ...] = ()

    @property
    def all_packages(self) -> tuple[str, ...]:
        """Everything the image installs (torch's layer first)."""
        return (*self.torch_packages, *self.packages)


@dataclass(frozen=True)
class VolumeSpec:
    kind: str
    name: str
    mount_path: str


@dataclass(frozen=True)
class FunctionSpec:
    """One Modal function (`kind="function"`) or class (`kind="class"`) running job `job`."""

    name: str
    job: str
    image: str
    gpu: str | None
    timeout_s: int
    retries: RetrySpec | None
    size: str | None = None
    kind: str = "function"
    #: Seconds a container stays up after its last input (classes: the warm-model window).
    scaledown_window: int | None = None
    #: The HF secret is attached (jobs that download base models).
    uses_hf_secret: bool = True
    #: A fresh container for every input and every retry of it (training: nothing of a failed attempt lingers).
    single_use_containers: bool = False
    #: Inputs one container serves at once (`@modal.concurrent`); the web API only.
    max_inputs: int | None = None
    #: Containers scheduled together for one input (`@modal.clustered`); 1 for every function but
    #: the train functions of runs on several nodes.
    cluster_size: int = 1


@dataclass(frozen=True)
class AppSpec:
    """Everything the Modal app declares."""

    app_name: str
    images: dict[str, ImageSpec]
    volumes: dict[str, VolumeSpec]
    hf_secret: str | None
    functions: dict[str, FunctionSpec]
    #: The web API function; None without trainkit-api or without `TRAINKIT_API_TOKEN` (see `notes`).
    web: FunctionSpec | None
    #: Why something is left out of the app, for `trainkit app status`.
    notes: tuple[str, ...] = ()
    #: A secret holding `WANDB_API_KEY`, attached to the training functions (`--report-to wandb`).
    wandb_secret: str | None = None

    def function(self, name: str) -> FunctionSpec:
        try:
            return self.functions[name]
        except KeyError:
            raise UsageError(f"the Modal app declares no function {name!r}") from None


# --------------------------------------------------------------------------- checks


def check_gpu(gpu: str, *, setting: str = "TRAINKIT_GPU") -> str:
    """Normalise a GPU name (`a100` -> `A100`, `h100:2`); `UsageError` for a name Modal does not know."""
    match = _GPU_PATTERN.match(gpu.strip())
    name = match.group("name").upper() if match else ""
    count = match.group("count") if match else None
    if not match or name not in KNOWN_GPUS or (count is not None and not 1 <= int(count) <= MAX_GPU_COUNT):
        raise UsageError(
            f"{setting}={gpu!r} is not a GPU Modal knows; known: {', '.join(KNOWN_GPUS)} "
            f"(optionally ':N' for N GPUs, N from 1 to {MAX_GPU_COUNT})",
            hint=f"set {setting} to one of those, or leave it empty for the model size's default",
        )
    return f"{name}:{int(count)}" if count else name


#: The longest key-value namespace trainkit writes (the web API's exports, ``api_exports``).
#: Each namespace is a Modal Dict named ``<app>-kv-<namespace>`` (`trainkit_modal.kv.dict_name`).
LONGEST_KV_NAMESPACE = "api_exports"
#: Longest Modal object name `trainkit_modal.kv.dict_name` accepts (under Modal's 64 characters).
MAX_OBJECT_NAME = 63
#: Longest app name whose every Dict name fits: 48.
MAX_APP_NAME = MAX_OBJECT_NAME - len("-kv-") - len(LONGEST_KV_NAMESPACE)


def check_app_name(name: str, *, setting: str = "TRAINKIT_APP_NAME") -> str:
    """An app name whose derived Dict names Modal accepts.

    The settings take names of up to 64 characters, but each key-value namespace is a
    Dict named after the app: with a longer name the app would deploy and then every job
    would fail on its first Dict. Checked when the spec is built, before anything is deployed.
    """
    if len(name) > MAX_APP_NAME:
        raise UsageError(
            f"{setting}={name!r} has {len(name)} characters; the Modal provider takes app names of at most "
            f"{MAX_APP_NAME}, since its Dicts are named '<app>-kv-<namespace>' (e.g. "
            f"'{name}-kv-{LONGEST_KV_NAMESPACE}', {len(name) + 4 + len(LONGEST_KV_NAMESPACE)} characters) and Modal "
            f"names must be under 64",
            hint=f"set {setting} to a name of at most {MAX_APP_NAME} characters",
        )
    return name


def check_timeout(seconds: int, *, setting: str = "TRAINKIT_TRAIN_TIMEOUT_S") -> int:
    """Modal runs one attempt of a function for at most 24 h."""
    if not 1 <= int(seconds) <= MAX_TIMEOUT_S:
        raise UsageError(
            f"{setting}={seconds} is over Modal's 24 h limit per attempt ({MAX_TIMEOUT_S} s)"
            if seconds > MAX_TIMEOUT_S
            else f"{setting}={seconds} must be at least 1 s",
            hint=f"use at most {MAX_TIMEOUT_S}; a longer run resumes from its checkpoint with `trainkit resume`",
        )
    return int(seconds)


def check_idle_window(seconds: int, *, setting: str = "TRAINKIT_INFER_IDLE_TIMEOUT_S") -> int:
    """Modal keeps an idle inference container between 2 and 3600 s (its `scaledown_window`)."""
    low, high = IDLE_WINDOW_RANGE
    if not low <= int(seconds) <= high:
        raise UsageError(
            f"{setting}={seconds} is outside Modal's idle window of {low} to {high} s",
            hint=f"set {setting} between {low} and {high}, then redeploy (`trainkit app deploy`)",
        )
    return int(seconds)


# --------------------------------------------------------------------------- sizes


def size_gpus() -> dict[str, str]:
    """Default GPU per model size: the training presets' when installed, else trainkit-modal's own table."""
    try:
        from trainkit_core.models.presets import PRESETS
    except ImportError:  # an older trainkit-core without presets
        return dict(_DEFAULT_GPUS)
    return {name: preset.gpu for name, preset in PRESETS.items()}


def gpu_for_size(size: str, override: str = "") -> str | None:
    """The GPU of a size's functions: `TRAINKIT_GPU` wins; an empty preset GPU means CPU (None)."""
    if override:
        return check_gpu(override)
    gpus = size_gpus()
    if size not in gpus:
        raise UsageError(f"unknown model size {size!r}; known sizes: {', '.join(gpus)}")
    return check_gpu(gpus[size], setting=f"the {size} preset's GPU") if gpus[size] else None


def _sources(kwargs: dict[str, Any]) -> list[dict[str, Any]]:
    """A job's kwargs, and the `config` mapping inside them when there is one."""
    config = kwargs.get("config")
    return [kwargs, config] if isinstance(config, dict) else [kwargs]


def size_of(kwargs: dict[str, Any]) -> str:
    """The model size a job call asks for (`model_size`, also inside a `config` mapping); default 4b.

    A base model given by Hugging Face id instead of a preset runs on the 4b hardware.
    """
    for source in _sources(kwargs):
        for key in ("model_size", "size"):
            value = source.get(key)
            if isinstance(value, str) and value:
                return value
    return "4b"


def base_model_of(kwargs: dict[str, Any]) -> str | None:
    """The Hugging Face id a job call will load: an explicit `base_model`, else the size's preset."""
    for source in _sources(kwargs):
        value = source.get("base_model")
        if isinstance(value, str) and value:
            return value
    try:
        from trainkit_core.models.presets import PRESETS
    except ImportError:
        return None
    preset = PRESETS.get(size_of(kwargs))
    return preset.base_model if preset else None


def is_gated(model_id: str | None) -> bool:
    return bool(model_id) and str(model_id).startswith(GATED_ORGS)


def cluster_function_name(nodes: int) -> str:
    """The Modal name of the train function of runs on `nodes` machines (`train_nodes2`)."""
    return f"train_nodes{nodes}"


def function_name(job: str, size: str | None = None) -> str:
    """The Modal name of job `job` (for a size: `train_4b`); the class of `infer` is `Inference_4b`."""
    if job == INFER_JOB:
        return f"{INFER_CLASS_PREFIX}{size}"
    return f"{job}_{size}" if size else job


def target_for(spec: AppSpec, job: str, kwargs: dict[str, Any]) -> FunctionSpec:
    """The declared function or class that runs one call of `job` with `kwargs`."""
    from trainkit_core.plugins.jobs import JOBS

    if job not in JOBS:
        from trainkit_core.errors import NotFoundError

        raise NotFoundError(f"unknown job function {job!r}; known: {', '.join(sorted(JOBS))}")
    nodes = int(kwargs.get("nodes") or 1)
    if job == "train" and nodes > 1:
        name = cluster_function_name(nodes)
        if name not in spec.functions:
            sizes = ", ".join(str(n) for n in CLUSTER_SIZES)
            raise UsageError(
                f"nodes={nodes}: the Modal app declares clusters of {sizes} nodes", hint="ask for one of those"
            )
        return spec.functions[name]
    if job in SIZED_JOBS or job == INFER_JOB:
        size = size_of(kwargs)
        name = function_name(job, size)
        if name not in spec.functions:
            sizes = ", ".join(sorted(size_gpus()))
            raise UsageError(f"unknown model size {size!r} for the {job!r} job; known sizes: {sizes}")
        return spec.functions[name]
    return spec.function(function_name(job))


# --------------------------------------------------------------------------- images


#: The pinned Python and GPU stack of the images (one data file; see its comments).
IMAGES_FILE = Path(__file__).with_name("images.toml")


@dataclass(frozen=True)
class Stack:
    """`images.toml`: the images' Python, torch (with its index), the train and infer stacks."""

    python: str
    torch_index: str
    torch: tuple[str, ...]
    train: tuple[str, ...]
    infer: tuple[str, ...]
    #: What the GPU images' CUDA needs of the host (NVIDIA's driver), as `images.toml` says.
    cuda_driver: str = ""
    #: Per image, the Debian packages installed before its pip layers (`<image>_apt`): libraries a wheel links.
    apt: dict[str, tuple[str, ...]] = field(default_factory=dict)

    def describe(self) -> list[str]:
        """What each image pins, and the CUDA driver the GPU images need, for `trainkit app deploy`."""
        from trainkit_modal.locking import lock_path, read_lock

        lines = [f"python {self.python}", f"torch ({self.torch_index}): {', '.join(self.torch)}"]
        if self.cuda_driver:
            lines.append(f"CUDA driver needed on the GPU host: {self.cuda_driver}")
        pins = {"train": self.train, "infer": self.infer, "web": ()}
        for image, top in pins.items():
            lock = read_lock(image)
            line = f"{image}: {len(lock.pins)} packages locked in {lock_path(image).name}"
            if top:
                line += f"; pinned {', '.join(top)}"
            if lock.left_out:
                line += f"; resolved, left out on purpose: {', '.join(lock.left_out)}"
            if self.apt.get(image):
                line += f"; with Debian's {', '.join(self.apt[image])}"
            lines.append(line)
        return lines


def load_stack(path: Path = IMAGES_FILE) -> Stack:
    """The pins of `images.toml`."""
    if sys.version_info >= (3, 11):
        import tomllib
    else:  # pragma: no cover - Python 3.10
        import tomli as tomllib

    data = tomllib.loads(path.read_text())
    images = ("train", "infer", "web")
    known = {"python", "torch_index", "torch", "train", "infer", "cuda_driver"}
    known |= {f"{image}_apt" for image in images}
    if unknown := sorted(set(data) - known):
        # A key nothing reads would look like a pin the images have (an export_gguf did once).
        raise UsageError(
            f"{path} has keys trainkit_modal.spec does not read: {', '.join(unknown)}",
            hint=f"known keys: {', '.join(sorted(known))}",
        )
    return Stack(
        python=str(data["python"]),
        torch_index=str(data["torch_index"]),
        torch=tuple(data["torch"]),
        train=tuple(data["train"]),
        infer=tuple(data["infer"]),
        cuda_driver=str(data.get("cuda_driver", "")),
        apt={image: tuple(data[f"{image}_apt"]) for image in images if f"{image}_apt" in data},
    )


def _python_version() -> str:
    """The Python of every image: pinned in `images.toml`, whatever Python deploys.

    The functions ship by reference (`trainkit_modal.functions`), so any Python may deploy.
    """
    return load_stack().python


def _name_of(requirement: str) -> str:
    match = re.match(r"^\s*([A-Za-z0-9][A-Za-z0-9._-]*)", requirement)
    return re.sub(r"[-_.]+", "-", match.group(1)).lower() if match else requirement


def _pinned(requirements: list[str], pins: tuple[str, ...]) -> list[str]:
    """`requirements` with each package that `pins` names replaced by its pin, then the other pins."""
    by_name = {_name_of(p): p for p in pins}
    out = [r for r in requirements if _name_of(r) not in by_name]
    return out + [p for p in pins if p not in out]


def requirements_of(distribution: str, extras: tuple[str, ...] = (), python_version: str | None = None) -> list[str]:
    """The pip requirements of an installed distribution and some of its extras, from its metadata.

    Read from the installed package so the images never repeat (and drift from) the
    pyproject files. Sibling trainkit packages are left out: their sources are added
    with `add_local_python_source`. Markers are evaluated for the container's Python.
    """
    from importlib.metadata import PackageNotFoundError, requires

    from packaging.requirements import Requirement

    try:
        raw = requires(distribution) or []
    except PackageNotFoundError:
        raise UsageError(f"{distribution} is not installed; cannot build the Modal image that needs it") from None
    env_base = {"python_version": python_version or _python_version(), "sys_platform": "linux"}
    found: list[str] = []
    for line in raw:
        req = Requirement(line)
        if req.name.startswith("trainkit-"):
            continue
        if req.marker is not None:
            wanted = ("", *extras)
            if not any(req.marker.evaluate({**env_base, "extra": extra}) for extra in wanted):
                continue
        text = f"{req.name}{'[' + ','.join(sorted(req.extras)) + ']' if req.extras else ''}{req.specifier}"
        if text not in found:
            found.append(text)
    return found


def _installed(module: str) -> bool:
    import importlib.util

    return importlib.util.find_spec(module) is not None


def requested_packages(stack: Stack | None = None) -> dict[str, tuple[str, ...]]:
    """What each image asks for, before resolution: torch's pins first on the GPU images.

    train: the Unsloth stack; infer: transformers + peft + bitsandbytes, and the GGUF
    writer and llama.cpp (xllamacpp; trainkit-core's `gguf` extra: the export job runs
    there); web: the API
    (and light jobs). The GPU stacks are `images.toml`'s pins in place of
    trainkit-core's ranges. The modal client itself is not asked for: Modal adds it
    (and its pinned dependencies) to every image.
    """
    stack = stack or load_stack()
    py = stack.python
    core = requirements_of("trainkit-core", (), py)
    gpu_only = [r for r in requirements_of("trainkit-core", ("gpu",), py) if r not in core]
    gguf = [r for r in requirements_of("trainkit-core", ("gguf",), py) if r not in core]
    # trainkit_modal's own (the modal client aside: Modal adds it to every image).
    core += [r for r in requirements_of("trainkit-modal", (), py) if _name_of(r) != "modal" and r not in core]
    torch_free = [r for r in requirements_of("trainkit-core", ("train",), py) if _name_of(r) != "torch"]
    torch_free += [r for r in core if r not in torch_free]
    web = list(core)
    if _installed("trainkit_api"):
        web += [r for r in requirements_of("trainkit-api", (), py) if r not in web] + ["fastapi[standard]"]
    return {
        "train": (*stack.torch, *_pinned([*torch_free, *gpu_only], stack.train)),
        "infer": (*stack.torch, *_pinned([*torch_free, *gguf], stack.infer)),
        "web": tuple(web),
    }


def build_images(settings: Settings, stack: Stack | None = None) -> dict[str, ImageSpec]:
    """Each image installs its lock (`trainkit_modal.locking`), nothing resolved again in the image.

    The CUDA wheels first, from their index, then the rest from PyPI, both with
    ``--no-deps``: the lock is the whole set a resolver checked together. A lock that
    no longer satisfies what the image asks for (`requested_packages`) is refused.
    """
    from trainkit_modal.locking import REGENERATE, lock_path, read_lock, unmet

    stack = stack or load_stack()
    env = container_env(settings)
    sources = ("trainkit_core", "trainkit_modal")
    images = {}
    for name, requested in requested_packages(stack).items():
        lock = read_lock(name)
        missing = unmet(lock, requested)
        if missing or lock.python != stack.python:
            why = f"it does not satisfy {', '.join(missing)}" if missing else f"it is for Python {lock.python}"
            raise UsageError(
                f"the {name} image's lock ({lock_path(name)}) is stale: {why}",
                hint=f"regenerate the locks: `{REGENERATE}`",
            )
        images[name] = ImageSpec(
            name=name,
            python_version=stack.python,
            packages=lock.pypi_pins,
            local_sources=(*sources, "trainkit_api") if name == "web" and _installed("trainkit_api") else sources,
            env=env,
            torch_index=stack.torch_index if lock.cuda_pins else None,
            torch_packages=lock.cuda_pins,
            install_options="--no-deps",
            resolved_only=lock.left_out,
            apt_packages=stack.apt.get(name, ()),
        )
    return images


#: Settings that name something on the deploying machine (its folders and files): a container has none of them.
LOCAL_ONLY_SETTINGS = frozenset(
    {"TRAINKIT_HOME", "TRAINKIT_DATASETS_DIR", "TRAINKIT_PRICES_FILE", "TRAINKIT_TINY_BASE_CACHE"}
)


def _secret_variables(settings: Settings) -> set[str]:
    """The variables of `settings.to_env()` that hold secrets (never in an image)."""
    from pydantic import SecretStr

    core = (settings.provider, settings.compute, settings.volumes, settings.datasets, settings.api)
    models = [("TRAINKIT_", m) for m in core]
    models += [(str(type(m).model_config.get("env_prefix") or ""), m) for m in settings.plugins.values()]
    return {
        f"{prefix}{name.upper()}"
        for prefix, model in models
        for name in type(model).model_fields
        if isinstance(getattr(model, name), SecretStr)
    }


def container_env(settings: Settings) -> dict[str, str]:
    """The settings a container needs, as `TRAINKIT_*` variables, and `HF_HOME`.

    Every setting the deploying machine has, so the deployed API and jobs behave as the
    local ones do (`TRAINKIT_API_MAX_BODY_BYTES` included), but the secrets (the API
    token reaches the web function as a Modal secret of its own) and what names a
    folder or file of the deploying machine (`LOCAL_ONLY_SETTINGS`).
    """
    secret = _secret_variables(settings)
    env = {k: v for k, v in settings.to_env().items() if k not in secret and k not in LOCAL_ONLY_SETTINGS}
    env.update({"HF_HOME": HF_HOME, "TRAINKIT_PROVIDER": "modal"})
    return dict(sorted(env.items()))


# --------------------------------------------------------------------------- the spec


def routing_spec(settings: Settings) -> AppSpec:
    """The app without its images: what routes a job to its function (works inside a container)."""
    return build_spec(settings, images=False)


def build_spec(settings: Settings, *, images: bool = True) -> AppSpec:
    """The whole app for these settings; `UsageError` naming the setting when Modal would refuse one.

    With ``images=False`` the images are left out (`routing_spec`): nothing reads package
    metadata or `images.toml`.
    """
    from trainkit_core.plugins.jobs import JOBS

    check_app_name(settings.provider.app_name)
    override = check_gpu(settings.compute.gpu) if settings.compute.gpu else ""
    train_timeout = check_timeout(settings.compute.train_timeout_s)
    idle = check_idle_window(settings.compute.infer_idle_timeout_s)
    sizes = size_gpus()

    functions: dict[str, FunctionSpec] = {}
    for job in sorted(JOBS):
        if job in SIZED_JOBS:
            for size in sizes:
                name = function_name(job, size)
                functions[name] = FunctionSpec(
                    name=name,
                    job=job,
                    image=SIZED_JOBS[job],
                    gpu=gpu_for_size(size, override),
                    timeout_s=train_timeout if job == "train" else EVAL_TIMEOUT_S,
                    retries=RetrySpec(settings.compute.train_max_attempts - 1) if job == "train" else DEFAULT_RETRIES,
                    size=size,
                    single_use_containers=job == "train",
                )
            if job == "train":
                for nodes in CLUSTER_SIZES:
                    name = cluster_function_name(nodes)
                    functions[name] = FunctionSpec(
                        name=name,
                        job=job,
                        image="train",
                        gpu=CLUSTER_DEFAULT_GPU,
                        timeout_s=train_timeout,
                        retries=RetrySpec(settings.compute.train_max_attempts - 1),
                        single_use_containers=True,
                        cluster_size=nodes,
                    )
        elif job == INFER_JOB:
            for size in sizes:
                name = function_name(job, size)
                functions[name] = FunctionSpec(
                    name=name,
                    job=job,
                    image="infer",
                    gpu=gpu_for_size(size, override),
                    timeout_s=INFER_TIMEOUT_S,
                    retries=INFER_RETRIES,
                    size=size,
                    kind="class",
                    scaledown_window=idle,
                )
        else:
            functions[job] = FunctionSpec(
                name=job, job=job, image=LIGHT_IMAGE, gpu=None, timeout_s=LIGHT_TIMEOUT_S, retries=None
            )

    web = None
    notes: list[str] = []
    if not _installed("trainkit_api"):
        notes.append("web API not deployed: trainkit-api is not installed here (pip install trainkit-api)")
    elif settings.api.api_token is None:
        # A Modal web endpoint is public: without a token anyone could start GPU jobs.
        notes.append("web API not deployed: set TRAINKIT_API_TOKEN (a Modal web endpoint is public), then redeploy")
    else:
        web = FunctionSpec(
            name=WEB_FUNCTION,
            job="",
            image="web",
            gpu=None,
            timeout_s=WEB_TIMEOUT_S,
            retries=None,
            uses_hf_secret=False,
            max_inputs=WEB_MAX_INPUTS,
        )
    volumes = {kind: VolumeSpec(kind, settings.volumes.name_for(kind), MOUNT_PATHS[kind]) for kind in VOLUME_KINDS}
    return AppSpec(
        app_name=settings.provider.app_name,
        images=build_images(settings) if images else {},
        volumes=volumes,
        hf_secret=settings.compute.hf_secret or None,
        wandb_secret=settings.compute.wandb_secret or None,
        functions=functions,
        web=web,
        notes=tuple(notes),
    )


def describe(spec: AppSpec) -> dict[str, Any]:
    """The spec as JSON-able data (for `trainkit app status --json` and the docs)."""
    from dataclasses import asdict

    return {
        "app_name": spec.app_name,
        "hf_secret": spec.hf_secret,
        "wandb_secret": spec.wandb_secret,
        "volumes": {k: asdict(v) for k, v in spec.volumes.items()},
        "functions": {k: asdict(v) for k, v in spec.functions.items()},
        "web": asdict(spec.web) if spec.web else None,
        "notes": list(spec.notes),
        "images": {
            k: {
                "python": v.python_version,
                "packages": list(v.all_packages),
                "resolved_only": list(v.resolved_only),
                "apt_packages": list(v.apt_packages),
                "sources": list(v.local_sources),
            }
            for k, v in spec.images.items()
        },
    }

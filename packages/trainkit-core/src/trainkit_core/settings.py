"""trainkit's settings, read from `TRAINKIT_*` environment variables.

One class per concern; `Settings` bundles them so callers pass one object down
instead of reading the environment deep inside. Every field is documented on the
settings page of the docs, generated from these models (docs/reference/settings.md, by
scripts/docs_reference.py; the docs session fails when it is stale).
"""

from __future__ import annotations

import logging
import os
import sys
from collections.abc import Mapping
from pathlib import Path
from typing import Any, Literal, TypeVar

from pydantic import BaseModel, Field, SecretStr, field_validator
from pydantic_settings import BaseSettings, SettingsConfigDict

VolumeKind = Literal["data", "models", "eval", "hf-cache"]

_NAME_PATTERN = r"^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$"

log = logging.getLogger(__name__)

#: Seed 000's settings (the sidecar's `SIDECAR_*`) and the trainkit setting each became
#: (docs/concepts/seed-map.md). trainkit reads only its own names.
SEED_VARIABLES = {
    "SIDECAR_PROVIDER": "TRAINKIT_PROVIDER",
    "SIDECAR_APP_NAME": "TRAINKIT_APP_NAME",
    "SIDECAR_GPU": "TRAINKIT_GPU",
    "SIDECAR_TRAIN_TIMEOUT_S": "TRAINKIT_TRAIN_TIMEOUT_S",
    "SIDECAR_INFER_IDLE_TIMEOUT_S": "TRAINKIT_INFER_IDLE_TIMEOUT_S",
    "SIDECAR_HF_SECRET": "TRAINKIT_HF_SECRET",
    "SIDECAR_VOL_DATA": "TRAINKIT_VOL_DATA",
    "SIDECAR_VOL_MODELS": "TRAINKIT_VOL_MODELS",
    "SIDECAR_VOL_EVAL": "TRAINKIT_VOL_EVAL",
    "SIDECAR_VOL_HF_CACHE": "TRAINKIT_VOL_HF_CACHE",
}
SEED_PREFIX = "SIDECAR_"
_reported_seed_variables: set[str] = set()


def seed_variable_notes(environ: Mapping[str, str]) -> list[str]:
    """One line for each `SIDECAR_*` variable set in `environ`: what trainkit reads instead.

    Seed 000 named the settings `SIDECAR_*`; trainkit reads `TRAINKIT_*` only, so a
    setting left under its old name would otherwise change nothing without a word.
    """
    notes = []
    for name in sorted(n for n in environ if n.startswith(SEED_PREFIX)):
        new = SEED_VARIABLES.get(name)
        if new is None:
            notes.append(
                f"{name} is set, but trainkit has no such setting (it belonged to the seed's sidecar); ignored"
            )
        elif new in environ:
            notes.append(f"{name} is set and ignored: trainkit reads {new} (set too)")
        else:
            notes.append(f"{name} is set and ignored: trainkit reads {new}; rename it")
    return notes


def report_seed_variables(environ: Mapping[str, str] | None = None) -> list[str]:
    """Log each `seed_variable_notes` line once per process (a warning); returns the lines logged now.

    Values are never logged: a name says enough, and some hold secrets' names.
    """
    fresh = []
    for note in seed_variable_notes(os.environ if environ is None else environ):
        name = note.split(" ", 1)[0]
        if name in _reported_seed_variables:
            continue
        _reported_seed_variables.add(name)
        log.warning("%s", note)
        fresh.append(note)
    return fresh


def default_home() -> Path:
    """The user's data directory, as the platform defines it (XDG on Linux)."""
    if sys.platform == "darwin":
        return Path.home() / "Library" / "Application Support" / "trainkit"
    if sys.platform == "win32":
        return Path(os.environ.get("LOCALAPPDATA", Path.home())) / "trainkit"
    xdg = os.environ.get("XDG_DATA_HOME")
    return (Path(xdg) if xdg else Path.home() / ".local" / "share") / "trainkit"


def _config(**extra: object) -> SettingsConfigDict:
    return SettingsConfigDict(env_prefix="TRAINKIT_", extra="ignore", **extra)  # type: ignore[typeddict-item]


class ProviderSettings(BaseSettings):
    """Which provider runs the jobs, and where the local provider keeps its state."""

    model_config = _config()

    provider: str = Field(default="local", description="Compute provider (`local`, `modal`, or any installed plugin).")
    app_name: str = Field(default="trainkit", pattern=_NAME_PATTERN, description="Name of the provider app.")
    home: Path = Field(
        default_factory=default_home,
        description="Home of the `local` provider: volumes, key-value store, job logs.",
    )

    @field_validator("home", mode="before")
    @classmethod
    def _empty_home_is_default(cls, value: object) -> object:
        # An empty TRAINKIT_HOME would otherwise mean the current directory.
        return default_home() if value in ("", None) else value


class ComputeSettings(BaseSettings):
    """How jobs run on a provider: GPU, time limits, secrets."""

    model_config = _config()

    gpu: str = Field(
        default="",
        description="GPU override for every model size (provider names, e.g. `A100`). Empty: the size's default.",
    )
    train_timeout_s: int = Field(default=7200, ge=1, description="Timeout of a training job, in seconds.")
    infer_idle_timeout_s: int = Field(
        default=60,
        ge=1,
        description="Seconds an inference worker keeps its models loaded after its last request.",
    )
    hf_secret: str = Field(
        default="", description="Name of a provider secret holding `HF_TOKEN`. Empty: none attached."
    )
    wandb_secret: str = Field(
        default="",
        description="Name of a provider secret holding `WANDB_API_KEY`, attached to training jobs "
        "(`--report-to wandb`). Empty: none attached.",
    )
    train_max_attempts: int = Field(
        default=3,
        ge=1,
        le=10,
        description="Attempts a training job gets on a provider that retries (Modal): a failed or crashed attempt "
        "resumes from its checkpoint; the run fails after the last.",
    )
    allow_python_graders: bool = Field(
        default=False,
        description=(
            "Let GRPO runs use OpenAI `python` graders: code the caller sends, run in a process of its own "
            "inside the training job (never in the API server). Off: such a run is refused."
        ),
    )
    prices_file: Path | None = Field(
        default=None,
        description="A TOML price table (US dollars per GPU-hour by provider and GPU, the shape of trainkit's "
        "own `gpu_prices.toml`) whose entries override trainkit's; how a local run gets a price.",
    )


class VolumeSettings(BaseSettings):
    """Names of the four volumes (the `local` provider uses them as directory names), and where many
    homes' hf-cache volumes take the tiny base from."""

    model_config = _config()

    vol_data: str = Field(default="trainkit-data", pattern=_NAME_PATTERN, description="Volume of the datasets.")
    vol_models: str = Field(
        default="trainkit-models", pattern=_NAME_PATTERN, description="Volume of trained models and run history."
    )
    vol_eval: str = Field(
        default="trainkit-eval", pattern=_NAME_PATTERN, description="Volume of eval sets and reports."
    )
    vol_hf_cache: str = Field(
        default="trainkit-hf-cache", pattern=_NAME_PATTERN, description="Volume of the model cache (`HF_HOME`)."
    )
    tiny_base_cache: Path | None = Field(
        default=None,
        description="Folder where the `tiny` base (a minute or two of CPU) is built once and copied from into each "
        "hf-cache volume that lacks it: one machine with many homes (tests, CI).",
    )

    def name_for(self, kind: str) -> str:
        """The configured volume name for a volume kind (`data`, `models`, `eval`, `hf-cache`)."""
        from trainkit_core.errors import UsageError

        names = {"data": self.vol_data, "models": self.vol_models, "eval": self.vol_eval, "hf-cache": self.vol_hf_cache}
        if kind not in names:
            raise UsageError(f"unknown volume kind {kind!r}; expected one of {', '.join(names)}")
        return names[kind]


class DatasetSettings(BaseSettings):
    """Where the user's datasets live on this machine."""

    model_config = _config()

    datasets_dir: Path = Field(
        default=Path("datasets"), description="Folder of the local datasets (`<dir>/<name>/dataset.toml`)."
    )
    image_max_pixels: int = Field(
        default=50_000_000, gt=0, description="Largest image (width x height) a dataset or a request may hold."
    )
    image_max_bytes: int = Field(default=20 * 1024 * 1024, gt=0, description="Largest image file, in bytes.")
    image_max_per_example: int = Field(default=8, gt=0, description="Most images in one example or request.")
    audio_max_seconds: float = Field(
        default=30.0, gt=0, description="Longest audio part, in seconds (Gemma 4's audio encoder takes 30 s)."
    )
    audio_max_bytes: int = Field(default=12 * 1024 * 1024, gt=0, description="Largest audio part, in bytes.")
    audio_max_per_example: int = Field(default=4, gt=0, description="Most audio parts in one example or request.")


class ApiSettings(BaseSettings):
    """The web API."""

    model_config = _config()

    api_token: SecretStr | None = Field(
        default=None, description="Bearer token the web API requires on every route but `/health`."
    )
    api_max_body_bytes: int = Field(
        default=64 * 1024 * 1024,
        ge=1024,
        description="Largest request body the web API reads, in bytes (413 above); room for an eval set upload.",
    )
    api_fetch_image_urls: bool = Field(
        default=False,
        description=(
            "Let generation requests name images by http(s) URL, which the server then fetches: only from "
            "public addresses (loopback, private, link-local and metadata addresses are refused, on every redirect)."
        ),
    )
    api_image_fetch_allowed_hosts: str = Field(
        default="",
        description=(
            "Comma-separated host names or IP addresses that remote image fetches may reach even though they "
            "are not public (e.g. an image server on the same private network); empty: public addresses only."
        ),
    )
    api_image_fetch_timeout_s: float = Field(
        default=10.0,
        gt=0,
        le=300,
        description="Most seconds the web API spends fetching one remote image: connect, headers and body together.",
    )

    @field_validator("api_token", mode="before")
    @classmethod
    def _empty_is_none(cls, value: object) -> object:
        return None if value == "" else value

    @field_validator("api_token")
    @classmethod
    def _matchable(cls, value: SecretStr | None) -> SecretStr | None:
        # HTTP strips the whitespace around a header value, so a token that is blank or
        # has it could never be matched: `serve` would listen openly, yet refuse all.
        # (The message never includes the token.)
        if value is not None:
            token = value.get_secret_value()
            if not token.strip():
                raise ValueError("is only whitespace; no client could send it: set a real token or leave it unset")
            if token != token.strip():
                raise ValueError("starts or ends with whitespace, which HTTP strips: no client could match it")
        return value


PluginSettingsT = TypeVar("PluginSettingsT", bound=BaseSettings)


def _model_key(cls: type) -> str:
    return f"{cls.__module__}.{cls.__qualname__}"


def _env_prefix(cls: type[BaseSettings]) -> str:
    return str(cls.model_config.get("env_prefix") or "")


def _build(cls: type[PluginSettingsT]) -> PluginSettingsT:
    """`cls()` from the environment; a bad value raises `UsageError` naming the variable."""
    from pydantic import ValidationError

    from trainkit_core.errors import UsageError

    try:
        return cls()
    except ValidationError as exc:
        prefix = _env_prefix(cls)
        problems = "; ".join(f"{prefix}{str(err['loc'][0]).upper()}: {err['msg']}" for err in exc.errors())
        raise UsageError(f"invalid setting: {problems}") from None


class Settings(BaseModel):
    """All of trainkit's settings. Build with `Settings.from_env()`; pass it down.

    `plugins` holds the settings models provider plugins register (a pydantic-settings
    class with a prefix of its own, named by the plugin's ``trainkit_settings``
    attribute); `get_provider` adds its provider's, and a plugin reads them with
    `settings.plugin(MySettings)`.
    """

    provider: ProviderSettings = Field(default_factory=ProviderSettings)
    compute: ComputeSettings = Field(default_factory=ComputeSettings)
    volumes: VolumeSettings = Field(default_factory=VolumeSettings)
    datasets: DatasetSettings = Field(default_factory=DatasetSettings)
    api: ApiSettings = Field(default_factory=ApiSettings)
    plugins: dict[str, Any] = Field(default_factory=dict)

    def plugin(self, cls: type[PluginSettingsT]) -> PluginSettingsT:
        """The settings of a plugin, by its model: the ones given, else read from the environment."""
        found = self.plugins.get(_model_key(cls))
        return found if isinstance(found, cls) else _build(cls)

    def with_plugin_settings(self, cls: type[BaseSettings]) -> Settings:
        """These settings with the plugin model `cls` read from the environment, unless present."""
        if _model_key(cls) in self.plugins:
            return self
        return self.model_copy(update={"plugins": {**self.plugins, _model_key(cls): _build(cls)}})

    @classmethod
    def from_env(cls) -> Settings:
        """Read every concern from the environment; a bad value raises `UsageError` naming the variable."""
        from pydantic import ValidationError

        from trainkit_core.errors import UsageError

        report_seed_variables()
        try:
            return cls(
                provider=ProviderSettings(),
                compute=ComputeSettings(),
                volumes=VolumeSettings(),
                datasets=DatasetSettings(),
                api=ApiSettings(),
            )
        except ValidationError as exc:
            problems = "; ".join(f"TRAINKIT_{str(err['loc'][0]).upper()}: {err['msg']}" for err in exc.errors())
            raise UsageError(f"invalid setting: {problems}") from None

    def to_env(self) -> dict[str, str]:
        """These settings as `TRAINKIT_*` variables, for a child process to rebuild them.

        Secrets are included in clear; never log the result. A job or worker process
        gets `child_environ`, which leaves out what it must not hold (the API token).
        """
        env: dict[str, str] = {}
        core = [("TRAINKIT_", c) for c in (self.provider, self.compute, self.volumes, self.datasets, self.api)]
        plugins = [(_env_prefix(type(m)), m) for m in self.plugins.values()]
        for prefix, model in core + plugins:
            for name in type(model).model_fields:
                value = getattr(model, name)
                if value is None:
                    continue
                if isinstance(value, SecretStr):
                    value = value.get_secret_value()
                env[f"{prefix}{name.upper()}"] = str(value)
        return env


#: Variables a job or worker process never gets: only the web API uses the token, and
#: a job's code (or anything it imports) has no business holding it.
CHILD_EXCLUDED = frozenset({"TRAINKIT_API_TOKEN"})


def child_environ(settings: Settings | None = None) -> dict[str, str]:
    """The environment for a job or worker process: ours plus `settings`, less `CHILD_EXCLUDED`."""
    env = {**os.environ, **(settings.to_env() if settings is not None else {})}
    for name in CHILD_EXCLUDED:
        env.pop(name, None)
    return env


def settings_rows(cls: type[BaseSettings] | None) -> list[tuple[str, str, str]]:
    """(variable, default, meaning) for every field of one settings model (none for None)."""
    if cls is None:
        return []
    rows = []
    prefix = _env_prefix(cls)
    for name, field in cls.model_fields.items():
        if field.default_factory is default_home:
            default = "user data dir (`~/.local/share/trainkit`)"
        elif field.default_factory is not None:
            default = "(computed)"
        elif field.default is None or field.default == "":
            default = "(empty)"
        else:
            default = str(field.default)
        rows.append((f"{prefix}{name.upper()}", default, field.description or ""))
    return rows


def settings_table(plugins: tuple[type[BaseSettings], ...] = ()) -> list[tuple[str, str, str]]:
    """(variable, default, meaning) for every setting, for the settings page of the docs.

    `plugins` adds the rows of plugin settings models (`trainkit providers --json` lists
    each provider's own).
    """
    rows = []
    core: tuple[type[BaseSettings], ...] = (
        ProviderSettings,
        ComputeSettings,
        VolumeSettings,
        DatasetSettings,
        ApiSettings,
    )
    for cls in (*core, *plugins):
        rows += settings_rows(cls)
    return rows

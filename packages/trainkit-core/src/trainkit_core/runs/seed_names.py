"""The seed's names on a run (seed 002), beside trainkit's own: one mixin, so `TrainingRun` says what it does.

trainkit names things for what they are (`id`, `phase`, `stop`, `advance_phase`); the
seed's code and its records use other names (`training_run_id`, `framework_status`,
`close`, `apply_framework_status`, `modal_app_id`). Both spellings work: each seed
name here reads and writes the trainkit field, and a stored record holding only a seed
name loads. The map of every rename is docs/concepts/seed-map.md.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from pydantic import BaseModel, computed_field, model_validator

#: The seed's names of fields trainkit names otherwise: both are read and written, and a
#: record that has only the seed's name loads. The first two are also in the stored JSON
#: (`training_run_id`, `framework_status`); the app's are attributes only.
SEED_NAMES = {
    "training_run_id": "id",
    "framework_status": "phase",
    "modal_app_id": "provider_app_id",
    "modal_app_url": "provider_app_url",
}


class SeedNames(BaseModel):
    """The seed's spellings of `TrainingRun`'s fields and methods; no field of its own."""

    if TYPE_CHECKING:
        id: str
        phase: str
        provider_app_id: str
        provider_app_url: str

        def stop(self, reason: str = ...) -> None: ...
        def advance_phase(self, phase: str) -> str | None: ...

    @model_validator(mode="before")
    @classmethod
    def _seed_names(cls, data: Any) -> Any:
        """A record may carry the seed's names instead of (or beside, agreeing with) trainkit's."""
        if not isinstance(data, dict):
            return data
        data = dict(data)
        for seed_name, name in SEED_NAMES.items():
            if seed_name not in data:
                continue
            value = data.pop(seed_name)
            if name not in data:
                data[name] = value
            elif data[name] != value:
                raise ValueError(f"{seed_name} {value!r} disagrees with {name} {data[name]!r}")
        return data

    @computed_field  # type: ignore[prop-decorator]
    @property
    def training_run_id(self) -> str:
        """The seed's name of `id`."""
        return self.id

    @training_run_id.setter
    def training_run_id(self, value: str) -> None:
        self.id = value

    @computed_field  # type: ignore[prop-decorator]
    @property
    def framework_status(self) -> str:
        """The seed's name of `phase`: the latest phase the training reported."""
        return self.phase

    @framework_status.setter
    def framework_status(self, value: str) -> None:
        self.phase = value

    @property
    def modal_app_id(self) -> str:
        """The seed's name of `provider_app_id` (a Modal app id when the provider is Modal)."""
        return self.provider_app_id

    @modal_app_id.setter
    def modal_app_id(self, value: str) -> None:
        self.provider_app_id = value

    @property
    def modal_app_url(self) -> str:
        """The seed's name of `provider_app_url`."""
        return self.provider_app_url

    @modal_app_url.setter
    def modal_app_url(self, value: str) -> None:
        self.provider_app_url = value

    def close(self, reason: str = "stop requested") -> None:
        """The seed's name of `stop`: ask the run to stop gracefully (its app is shared, never stopped)."""
        self.stop(reason)

    def apply_framework_status(self, phase: str) -> str | None:
        """The seed's name of `advance_phase`."""
        return self.advance_phase(phase)

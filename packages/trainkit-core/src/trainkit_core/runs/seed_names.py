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
#: record that has only the seed's name loads. The first four are also in the stored JSON
#: (a record written before the rename, or read by the seed's code, keeps working); the
#: app's are attributes only.
SEED_NAMES = {
    "training_run_id": "id",
    "framework_status": "phase",
    "function_call_id": "call_id",
    "source_model": "base_model",
    "modal_app_id": "provider_app_id",
    "modal_app_url": "provider_app_url",
}


def restate_seed_names(data: dict[str, Any]) -> None:
    """Copy trainkit's values onto the seed's names a stored record holds, after a patch of trainkit's names.

    A record merged field by field (`TrainingRun.write_record`) would otherwise carry a
    stale seed spelling, which the next load refuses as disagreeing.
    """
    for seed_name, name in SEED_NAMES.items():
        if seed_name in data and name in data:
            data[seed_name] = data[name]


class SeedNames(BaseModel):
    """The seed's spellings of `TrainingRun`'s fields and methods; no field of its own."""

    if TYPE_CHECKING:
        id: str
        phase: str
        call_id: str
        base_model: str
        provider_app_id: str
        provider_app_url: str

        @property
        def call(self) -> Any: ...
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

    @computed_field(json_schema_extra={"deprecated": True})  # type: ignore[prop-decorator]
    @property
    def function_call_id(self) -> str:
        """The seed's name of `call_id`."""
        return self.call_id

    @function_call_id.setter
    def function_call_id(self, value: str) -> None:
        self.call_id = value

    @computed_field(json_schema_extra={"deprecated": True})  # type: ignore[prop-decorator]
    @property
    def source_model(self) -> str:
        """The seed's name of `base_model`."""
        return self.base_model

    @source_model.setter
    def source_model(self, value: str) -> None:
        self.base_model = value

    @property
    def function_call(self) -> Any:
        """The seed's name of `call`: the provider's handle of the run's job call."""
        return self.call

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

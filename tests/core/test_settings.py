"""Settings from `TRAINKIT_*` variables: defaults, overrides, errors, secrets, hand-over to jobs."""

from __future__ import annotations

from pathlib import Path

import pytest

from trainkit_core.errors import UsageError
from trainkit_core.settings import Settings, settings_table


def test_defaults(monkeypatch: pytest.MonkeyPatch, trainkit_home: Path) -> None:
    s = Settings.from_env()
    assert s.provider.provider == "local"
    assert s.provider.home == trainkit_home
    assert s.volumes.name_for("hf-cache") == "trainkit-hf-cache"
    assert s.compute.gpu == "" and s.api.api_token is None


def test_every_variable_is_read(monkeypatch: pytest.MonkeyPatch) -> None:
    values = {
        "TRAINKIT_PROVIDER": "modal",
        "TRAINKIT_APP_NAME": "my-app",
        "TRAINKIT_GPU": "H100",
        "TRAINKIT_TRAIN_TIMEOUT_S": "99",
        "TRAINKIT_INFER_IDLE_TIMEOUT_S": "5",
        "TRAINKIT_HF_SECRET": "hf",
        "TRAINKIT_VOL_DATA": "d",
        "TRAINKIT_VOL_MODELS": "m",
        "TRAINKIT_VOL_EVAL": "e",
        "TRAINKIT_VOL_HF_CACHE": "h",
        "TRAINKIT_DATASETS_DIR": "/tmp/ds",
        "TRAINKIT_API_TOKEN": "secret-token",
    }
    for name, value in values.items():
        monkeypatch.setenv(name, value)
    s = Settings.from_env()
    assert set(values) | {"TRAINKIT_HOME"} <= {row[0] for row in settings_table()}
    assert (s.provider.provider, s.provider.app_name, s.compute.gpu) == ("modal", "my-app", "H100")
    assert (s.compute.train_timeout_s, s.compute.infer_idle_timeout_s, s.compute.hf_secret) == (99, 5, "hf")
    assert [s.volumes.name_for(k) for k in ("data", "models", "eval", "hf-cache")] == ["d", "m", "e", "h"]
    assert s.datasets.datasets_dir == Path("/tmp/ds")
    assert s.api.api_token is not None and s.api.api_token.get_secret_value() == "secret-token"
    assert "secret-token" not in repr(s) and "secret-token" not in str(s.model_dump())


@pytest.mark.parametrize(
    ("variable", "value"),
    [("TRAINKIT_TRAIN_TIMEOUT_S", "soon"), ("TRAINKIT_TRAIN_TIMEOUT_S", "0"), ("TRAINKIT_VOL_DATA", "../up")],
)
def test_a_bad_value_names_the_variable(monkeypatch: pytest.MonkeyPatch, variable: str, value: str) -> None:
    monkeypatch.setenv(variable, value)
    with pytest.raises(UsageError, match=variable):
        Settings.from_env()


def test_unknown_volume_kind() -> None:
    with pytest.raises(UsageError, match="unknown volume kind 'weights'"):
        Settings.from_env().volumes.name_for("weights")


def test_to_env_rebuilds_the_same_settings(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("TRAINKIT_GPU", "A100")
    monkeypatch.setenv("TRAINKIT_API_TOKEN", "tok")
    original = Settings.from_env()
    env = original.to_env()
    assert env["TRAINKIT_API_TOKEN"] == "tok"
    for name in env:
        monkeypatch.delenv(name, raising=False)
    for name, value in env.items():
        monkeypatch.setenv(name, value)
    again = Settings.from_env()
    assert again.model_dump() == original.model_dump()
    assert again.api.api_token is not None and again.api.api_token.get_secret_value() == "tok"


def test_a_seed_variable_is_reported_once_with_its_new_name(
    monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    """Seed 000's `SIDECAR_*` names are not read; each one set is named once, with what trainkit reads."""
    from trainkit_core import settings as settings_module

    monkeypatch.setattr(settings_module, "_reported_seed_variables", set())
    monkeypatch.setenv("SIDECAR_GPU", "a100-secret-looking-value")
    monkeypatch.setenv("SIDECAR_VOL_DATA", "old-data")
    monkeypatch.setenv("TRAINKIT_VOL_DATA", "new-data")
    monkeypatch.setenv("SIDECAR_MODAL_WEB_URL", "https://example.invalid")
    with caplog.at_level("WARNING", logger="trainkit_core.settings"):
        first = Settings.from_env()
        Settings.from_env()
    lines = [r.getMessage() for r in caplog.records if r.name == "trainkit_core.settings"]
    assert lines == [
        "SIDECAR_GPU is set and ignored: trainkit reads TRAINKIT_GPU; rename it",
        "SIDECAR_MODAL_WEB_URL is set, but trainkit has no such setting (it belonged to the seed's sidecar); ignored",
        "SIDECAR_VOL_DATA is set and ignored: trainkit reads TRAINKIT_VOL_DATA (set too)",
    ]
    assert first.compute.gpu == "" and first.volumes.vol_data == "new-data"  # the old names change nothing
    assert "a100-secret-looking-value" not in caplog.text


def test_every_seed_variable_names_a_real_setting() -> None:
    from trainkit_core.settings import SEED_VARIABLES

    variables = {row[0] for row in settings_table()}
    assert set(SEED_VARIABLES.values()) <= variables
    assert all(old.replace("SIDECAR_", "TRAINKIT_", 1) == new for old, new in SEED_VARIABLES.items())

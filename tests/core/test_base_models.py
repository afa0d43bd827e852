"""`--base-model` as a folder or a path on the hf-cache volume: checked before a run exists.

Torch-free: the local provider and its volumes are real; the folders are written here.
"""

from __future__ import annotations

import json
from pathlib import Path
from types import SimpleNamespace

import pytest

from trainkit_core import get_provider
from trainkit_core.errors import UsageError
from trainkit_core.models.base_models import chat_format_for_config, check_source, describe_config
from trainkit_core.models.trained.layout import resolve_base_model
from trainkit_core.training.config import TrainConfig


def _model_folder(root: Path, config: dict | None) -> Path:  # type: ignore[type-arg]
    folder = root / "my-model"
    folder.mkdir(parents=True)
    if config is not None:
        (folder / "config.json").write_text(json.dumps(config))
    return folder


GEMMA4_MM = {"architectures": ["Gemma4ForConditionalGeneration"], "model_type": "gemma4", "vision_config": {"x": 1}}
GEMMA3_TEXT = {"architectures": ["Gemma3ForCausalLM"], "model_type": "gemma3_text"}


@pytest.mark.parametrize(
    ("value", "message"),
    [
        ("relative/folder/x", "not a Hugging Face model id"),
        ("/models/../etc", "'..' is not allowed"),
        ("hf-cache:", "relative to the hf-cache volume"),
        ("hf-cache:/abs", "relative to the hf-cache volume"),
        ("hf-cache:a/../../b", "'..' is not allowed"),
        ("/models/a\nb", "control character"),
    ],
)
def test_bad_base_model_texts_are_refused(value: str, message: str) -> None:
    with pytest.raises(UsageError, match=message):
        TrainConfig.parse(dataset="demo", base_model=value)


def test_folder_forms_parse() -> None:
    assert TrainConfig.parse(dataset="demo", base_model="/srv/models/mine/").base_model == "/srv/models/mine"
    assert TrainConfig.parse(dataset="demo", base_model="hf-cache:models/mine").base_model == "hf-cache:models/mine"
    assert TrainConfig.parse(dataset="demo", base_model="google/gemma-3-4b-it").base_model == "google/gemma-3-4b-it"


def test_a_local_folder_is_checked_where_the_job_looks(tmp_path: Path) -> None:
    provider = get_provider("local")
    assert provider.capabilities.local_files
    with pytest.raises(UsageError, match="does not exist"):
        check_source(provider, str(tmp_path / "nowhere"))
    empty = _model_folder(tmp_path / "a", None)
    with pytest.raises(UsageError, match=r"has no config\.json"):
        check_source(provider, str(empty))
    broken = _model_folder(tmp_path / "b", None)
    (broken / "config.json").write_text("{not json")
    with pytest.raises(UsageError, match="not valid JSON"):
        check_source(provider, str(broken))
    good = _model_folder(tmp_path / "c", GEMMA4_MM)
    config = check_source(provider, str(good))
    assert config is not None and chat_format_for_config(config) == "gemma4"
    assert check_source(provider, "google/gemma-3-4b-it") is None  # a hub id: nothing to check here


def test_a_folder_on_a_provider_whose_jobs_do_not_see_it_is_refused(tmp_path: Path) -> None:
    good = _model_folder(tmp_path, GEMMA4_MM)
    remote = SimpleNamespace(name="modal", capabilities=SimpleNamespace(local_files=False))
    with pytest.raises(UsageError, match="do not see this machine's files") as info:
        check_source(remote, str(good))
    assert "hf-cache:" in (info.value.hint or "")


def test_a_folder_on_the_hf_cache_volume(trainkit_home: Path) -> None:
    provider = get_provider("local")
    volume = provider.volume("hf-cache")
    with pytest.raises(UsageError, match="does not exist on volume"):
        check_source(provider, "hf-cache:models/mine")
    root = Path(volume.root)  # type: ignore[attr-defined]
    folder = _model_folder(root / "models", None)
    with pytest.raises(UsageError, match=r"has no config\.json"):
        check_source(provider, "hf-cache:models/my-model")
    (folder / "config.json").write_text(json.dumps(GEMMA3_TEXT))
    config = check_source(provider, "hf-cache:models/my-model")
    assert config is not None and chat_format_for_config(config) == "gemma3"
    # Inside a job, the same text resolves to the folder on the mounted volume.
    assert resolve_base_model({"base_model": "hf-cache:models/my-model"}, root) == str(folder)


def test_a_folder_that_went_missing_is_a_clear_error_in_the_job(tmp_path: Path) -> None:
    with pytest.raises(UsageError, match="does not exist"):
        resolve_base_model({"base_model": str(tmp_path / "gone")}, tmp_path)


def test_text_only_or_multimodal_is_read_from_the_configuration() -> None:
    assert not describe_config(GEMMA3_TEXT).multimodal
    kind = describe_config(GEMMA4_MM)
    assert kind.multimodal and kind.towers == ("vision",) and kind.model_type == "gemma4"
    with_audio = describe_config({**GEMMA4_MM, "audio_config": {"y": 2}})
    assert with_audio.towers == ("vision", "audio")
    assert not describe_config({**GEMMA4_MM, "vision_config": None}).multimodal  # a null tower is no tower

"""The app's declared spec, read as plain data: GPUs, timeouts, retries, volumes, secret, idle window."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from trainkit_core.errors import UsageError
from trainkit_core.plugins.jobs import JOBS
from trainkit_core.settings import Settings
from trainkit_modal import spec as specmod
from trainkit_modal.spec import build_spec, target_for


def settings(monkeypatch: pytest.MonkeyPatch, **env: str) -> Settings:
    for key, value in env.items():
        monkeypatch.setenv(key, value)
    return Settings.from_env()


EXPECTED_GPUS = {"tiny": None, "4b": "A10G", "12b": "A100", "31b": "A100-80GB"}


def test_gpu_per_size_follows_the_presets(monkeypatch: pytest.MonkeyPatch) -> None:
    spec = build_spec(settings(monkeypatch))
    assert specmod.size_gpus().keys() >= EXPECTED_GPUS.keys()
    for size, gpu in EXPECTED_GPUS.items():
        for job in ("train", "eval", "infer"):
            if job in JOBS:
                assert spec.functions[specmod.function_name(job, size)].gpu == gpu, (job, size)
        assert specmod.gpu_for_size(size) == gpu


def test_gpu_override_applies_to_every_size(monkeypatch: pytest.MonkeyPatch) -> None:
    spec = build_spec(settings(monkeypatch, TRAINKIT_GPU="h100:2"))
    sized = [fs for fs in spec.functions.values() if fs.size]
    assert sized, "no size-dependent function declared"
    assert {fs.gpu for fs in sized} == {"H100:2"}
    # Light jobs never ask for a GPU.
    assert spec.functions["ping"].gpu is None


@pytest.mark.parametrize(
    ("given", "sent"),
    [
        ("h100!", "H100!"),
        ("B200+", "B200+"),
        ("rtx-pro-6000", "RTX-PRO-6000"),
        ("a10g:2", "A10G:2"),
        ("H100!:8", "H100!:8"),
    ],
)
def test_gpu_names_modal_documents_are_accepted_as_modal_sends_them(given: str, sent: str) -> None:
    """modal 1.6.4 uppercases the name (`parse_gpu_config`); `!` pins, `+` allows an upgrade, `:N` counts."""
    assert specmod.check_gpu(given) == sent


@pytest.mark.parametrize("bad", ["V100", "A100-160GB", "a100:9", "", "gpu please", "A100!", "H100:0", "T4+"])
def test_unknown_gpu_is_refused_naming_the_setting(bad: str) -> None:
    with pytest.raises(UsageError) as info:
        specmod.check_gpu(bad)
    assert "TRAINKIT_GPU" in str(info.value) and "A100-80GB" in str(info.value)


def test_unknown_gpu_setting_fails_the_spec(monkeypatch: pytest.MonkeyPatch) -> None:
    with pytest.raises(UsageError, match="TRAINKIT_GPU='K80'"):
        build_spec(settings(monkeypatch, TRAINKIT_GPU="K80"))


def test_train_timeout_and_retries(monkeypatch: pytest.MonkeyPatch) -> None:
    spec = build_spec(settings(monkeypatch, TRAINKIT_TRAIN_TIMEOUT_S="5400"))
    train = [fs for fs in spec.functions.values() if fs.job == "train"]
    if "train" in JOBS:
        assert train
    for fs in train:
        assert fs.timeout_s == 5400
        assert fs.retries is not None and fs.retries.max_retries >= 1
    assert spec.functions["ping"].timeout_s == specmod.LIGHT_TIMEOUT_S


def test_timeout_over_24_hours_is_refused(monkeypatch: pytest.MonkeyPatch) -> None:
    with pytest.raises(UsageError, match="24 h") as info:
        build_spec(settings(monkeypatch, TRAINKIT_TRAIN_TIMEOUT_S=str(24 * 3600 + 1)))
    assert "TRAINKIT_TRAIN_TIMEOUT_S" in str(info.value)
    assert specmod.check_timeout(24 * 3600) == 86400


@pytest.mark.parametrize("seconds", [1, 3601, 86400])
def test_idle_window_outside_2_to_3600_is_refused(monkeypatch: pytest.MonkeyPatch, seconds: int) -> None:
    with pytest.raises(UsageError, match="TRAINKIT_INFER_IDLE_TIMEOUT_S") as info:
        build_spec(settings(monkeypatch, TRAINKIT_INFER_IDLE_TIMEOUT_S=str(seconds)))
    assert "2 to 3600 s" in str(info.value)


@pytest.mark.parametrize("seconds", [2, 60, 1200, 1201, 3600])
def test_idle_window_is_the_inference_scaledown_window(monkeypatch: pytest.MonkeyPatch, seconds: int) -> None:
    """Modal 1.6.4 accepts 2-3600 s (`_functions.py`); the real SDK takes both ends (test_app)."""
    spec = build_spec(settings(monkeypatch, TRAINKIT_INFER_IDLE_TIMEOUT_S=str(seconds)))
    classes = [fs for fs in spec.functions.values() if fs.kind == "class"]
    if "infer" in JOBS:
        assert {fs.size for fs in classes} == set(specmod.size_gpus())
    assert all(fs.scaledown_window == seconds for fs in classes)


def test_volumes_at_fixed_paths_with_configured_names(monkeypatch: pytest.MonkeyPatch) -> None:
    spec = build_spec(settings(monkeypatch, TRAINKIT_VOL_MODELS="my-models"))
    paths = {kind: (v.name, v.mount_path) for kind, v in spec.volumes.items()}
    assert paths == {
        "data": ("trainkit-data", "/data"),
        "models": ("my-models", "/models"),
        "eval": ("trainkit-eval", "/eval"),
        "hf-cache": ("trainkit-hf-cache", "/root/.cache/huggingface"),
    }
    for image in spec.images.values():
        assert image.env["HF_HOME"] == "/root/.cache/huggingface"
        assert image.env["TRAINKIT_VOL_MODELS"] == "my-models"
        assert image.env["TRAINKIT_PROVIDER"] == "modal"


def test_secret_only_when_named(monkeypatch: pytest.MonkeyPatch) -> None:
    assert build_spec(settings(monkeypatch)).hf_secret is None
    assert build_spec(settings(monkeypatch, TRAINKIT_HF_SECRET="huggingface")).hf_secret == "huggingface"


def _names(packages: tuple[str, ...]) -> set[str]:
    return {specmod._name_of(p) for p in packages}


def test_images_split_train_infer_web(monkeypatch: pytest.MonkeyPatch) -> None:
    spec = build_spec(settings(monkeypatch, TRAINKIT_API_TOKEN="test-token"))
    names = {img: _names(i.all_packages) for img, i in spec.images.items()}
    assert {"unsloth", "unsloth-zoo", "torch", "trl", "bitsandbytes"} <= names["train"]
    assert {"torch", "transformers", "peft", "bitsandbytes"} <= names["infer"]
    assert "unsloth" not in names["infer"]
    assert "torch" not in names["web"] and "unsloth" not in names["web"]
    assert {"pluggy", "pydantic-settings"} <= names["web"]
    for image in spec.images.values():
        assert "trainkit_core" in image.local_sources and "trainkit_modal" in image.local_sources
        assert not any(p.startswith("trainkit") for p in image.all_packages)
    if spec.web is not None:
        assert "trainkit_api" in spec.images["web"].local_sources
        assert "fastapi" in names["web"]


def test_gpu_images_install_exactly_the_pinned_stack(monkeypatch: pytest.MonkeyPatch) -> None:
    """Every package `images.toml` names is installed at its pin (from the image's lock), once."""
    from packaging.requirements import Requirement

    stack = specmod.load_stack()
    spec = build_spec(settings(monkeypatch))
    for image, pins in (("train", stack.train), ("infer", stack.infer)):
        packages = spec.images[image].all_packages
        for pin in (*stack.torch, *pins):
            req = Requirement(pin)
            same = [p for p in packages if specmod._name_of(p) == specmod._name_of(pin)]
            assert same == [f"{specmod._name_of(pin)}=={next(iter(req.specifier)).version}"], (image, pin, same)
        assert spec.images[image].torch_index == stack.torch_index
        assert spec.images[image].python_version == stack.python
        assert spec.images[image].install_options == "--no-deps"  # the lock is the whole set
    assert spec.images["web"].torch_packages == () and spec.images["web"].python_version == stack.python
    # Pins are exact versions; Unsloth carries the extra matching the torch build.
    for pin in (*stack.torch, *stack.train, *stack.infer):
        assert "==" in pin and "<" not in pin and ">" not in pin, pin
    torch = next(p for p in stack.torch if specmod._name_of(p) == "torch").split("==")[1]  # 2.12.1+cu130
    version, cuda = torch.split("+")
    unsloth = next(p for p in stack.train if specmod._name_of(p) == "unsloth")
    assert f"[{cuda}-torch{version.replace('.', '')}]" in unsloth
    assert stack.torch_index.endswith(f"/{cuda}")


def test_the_images_python_does_not_follow_the_deploying_python(monkeypatch: pytest.MonkeyPatch) -> None:
    """The images run `images.toml`'s Python on every Python that deploys (functions ship by reference)."""
    spec = build_spec(settings(monkeypatch))
    assert {image.python_version for image in spec.images.values()} == {specmod.load_stack().python}
    assert specmod.describe(spec)["images"]["train"]["python"] == specmod.load_stack().python


def test_routing_needs_no_package_metadata(monkeypatch: pytest.MonkeyPatch) -> None:
    """What a container does (no trainkit distribution there): route jobs without reading metadata."""
    import importlib.metadata

    def no_metadata(*args: object, **kwargs: object) -> None:
        raise importlib.metadata.PackageNotFoundError("no distributions in a Modal container")

    monkeypatch.setattr(importlib.metadata, "requires", no_metadata)
    monkeypatch.setattr(importlib.metadata, "version", no_metadata)
    monkeypatch.setattr(specmod, "load_stack", no_metadata)
    routing = specmod.routing_spec(settings(monkeypatch, TRAINKIT_API_TOKEN="test-token"))
    assert routing.images == {}
    if "train" in JOBS:
        assert target_for(routing, "train", {"model_size": "12b"}).gpu == "A100"
    assert target_for(routing, "ping", {}).name == "ping"
    with pytest.raises(importlib.metadata.PackageNotFoundError):
        build_spec(settings(monkeypatch))  # building images does read them


def test_every_job_has_a_target(monkeypatch: pytest.MonkeyPatch) -> None:
    spec = build_spec(settings(monkeypatch))
    for job in JOBS:
        fs = target_for(spec, job, {"model_size": "12b"})
        assert fs.job == job
        if fs.size:
            assert fs.size == "12b" and fs.gpu == "A100"
    assert target_for(spec, "ping", {}).name == "ping"
    with pytest.raises(UsageError, match="unknown model size '70b'"):
        target_for(spec, next(iter(specmod.SIZED_JOBS)) if "train" in JOBS else "infer", {"model_size": "70b"})


def test_size_and_base_model_of_a_call() -> None:
    assert specmod.size_of({}) == "4b"
    assert specmod.size_of({"config": {"model_size": "31b"}}) == "31b"
    assert specmod.base_model_of({"base_model": "org/model"}) == "org/model"
    assert specmod.base_model_of({"model_size": "4b"}) == "google/gemma-3-4b-it"
    assert specmod.is_gated("google/gemma-3-4b-it") and not specmod.is_gated("trainkit/tiny-gemma")


def test_requirements_follow_markers_for_the_container_python() -> None:
    reqs = specmod.requirements_of("trainkit-core", (), "3.10")
    assert any(r.startswith("tomli") for r in reqs)
    assert not any(r.startswith("tomli") for r in specmod.requirements_of("trainkit-core", (), "3.12"))
    with pytest.raises(UsageError, match="not installed"):
        specmod.requirements_of("trainkit-does-not-exist")


def test_web_api_needs_a_token(monkeypatch: pytest.MonkeyPatch) -> None:
    pytest.importorskip("trainkit_api")
    without = build_spec(settings(monkeypatch))
    assert without.web is None and any("TRAINKIT_API_TOKEN" in n for n in without.notes)
    with_token = build_spec(settings(monkeypatch, TRAINKIT_API_TOKEN="test-token"))
    assert with_token.web is not None and with_token.web.gpu is None and with_token.notes == ()


def test_a_stale_lock_is_refused_naming_the_requirement(monkeypatch: pytest.MonkeyPatch) -> None:
    """images.toml moved on without `nox -s modal_locks`: deploy refuses, naming what the lock lacks."""
    from dataclasses import replace

    stack = specmod.load_stack()
    moved = replace(stack, train=tuple("trl==1.15.0" if p.startswith("trl==") else p for p in stack.train))
    with pytest.raises(UsageError, match=r"train image's lock .* is stale: it does not satisfy trl==1\.15\.0"):
        specmod.build_images(settings(monkeypatch), moved)


def test_containers_get_every_setting_but_secrets_and_local_paths(monkeypatch: pytest.MonkeyPatch) -> None:
    """The deployed API and jobs read the settings the local ones do."""
    from trainkit_core.settings import settings_table

    given = settings(
        monkeypatch,
        TRAINKIT_API_MAX_BODY_BYTES="2000000",
        TRAINKIT_API_TOKEN="tok-secret-1",
        TRAINKIT_HOME="/home/me/.trainkit",
        TRAINKIT_TINY_BASE_CACHE="/home/me/tiny-bases",
        TRAINKIT_TRAIN_MAX_ATTEMPTS="3",
    )
    env = specmod.container_env(given)
    assert "/home/me" not in json.dumps(env)  # a container builds the tiny base on its own volume
    assert env["TRAINKIT_API_MAX_BODY_BYTES"] == "2000000"
    assert env["TRAINKIT_TRAIN_MAX_ATTEMPTS"] == "3" and env["TRAINKIT_PROVIDER"] == "modal"
    assert "tok-secret-1" not in json.dumps(env) and "TRAINKIT_API_TOKEN" not in env
    assert not specmod.LOCAL_ONLY_SETTINGS & set(env)
    # Every documented core setting reaches the containers, but the secret and the local paths.
    documented = {row[0] for row in settings_table()}
    assert documented - set(env) == {"TRAINKIT_API_TOKEN", *specmod.LOCAL_ONLY_SETTINGS}


def test_the_export_image_has_what_gguf_export_needs(monkeypatch: pytest.MonkeyPatch) -> None:
    """`export_<size>` runs on the infer image, which installs trainkit-core's `gguf` extra (locked: the GGUF
    writer and xllamacpp's prebuilt llama.cpp) and Debian's OpenMP runtime, which that wheel links."""
    from packaging.requirements import Requirement

    spec = build_spec(settings(monkeypatch))
    images = {fs.image for fs in spec.functions.values() if fs.job == "export"}
    assert images == {"infer"}
    infer = spec.images["infer"]
    installed = {specmod._name_of(p): p.split("==", 1)[1] for p in infer.packages}
    assert installed["gguf"] == "0.19.0" and installed["xllamacpp"] == "2026.10.11549"
    for text in specmod.requirements_of("trainkit-core", ("gguf",)):
        req = Requirement(text)
        assert req.specifier.contains(installed[specmod._name_of(req.name)]), text
    assert infer.apt_packages == ("libgomp1",)  # a library the wheel links; nothing is compiled
    for name in ("train", "web"):
        assert spec.images[name].apt_packages == ()
        assert not {"gguf", "xllamacpp"} & _names(spec.images[name].packages)
    assert specmod.describe(spec)["images"]["infer"]["apt_packages"] == ["libgomp1"]


def test_a_key_of_images_toml_that_nothing_reads_is_refused(tmp_path: Path) -> None:
    """A pin nobody installs would read as one the images have."""
    path = tmp_path / "images.toml"
    path.write_text(specmod.IMAGES_FILE.read_text() + '\nexport_gguf = ["gguf==0.19.0"]\n')
    with pytest.raises(UsageError, match=r"images\.toml has keys trainkit_modal\.spec does not read: export_gguf"):
        specmod.load_stack(path)


# --------------------------------------------------------------------------- derived names, the modal pin


def test_an_app_name_whose_dicts_modal_refuses_is_refused_when_the_spec_is_built(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    name = "a" * 60  # the settings take it (up to 64), but '<app>-kv-api_exports' would be 75 characters
    with pytest.raises(UsageError) as caught:
        build_spec(settings(monkeypatch, TRAINKIT_APP_NAME=name))
    message = str(caught.value)
    assert name in message and "TRAINKIT_APP_NAME" in message and "48" in message
    with pytest.raises(UsageError, match="at most 48"):
        specmod.routing_spec(settings(monkeypatch, TRAINKIT_APP_NAME="b" * 49))


def test_the_longest_app_name_taken_fits_every_dict_trainkit_names(monkeypatch: pytest.MonkeyPatch) -> None:
    from trainkit_api.routes import evals, exports
    from trainkit_core.datasets import sync
    from trainkit_core.runs import events, retention
    from trainkit_core.runs import index as runs_index
    from trainkit_core.runs import training_run as runs
    from trainkit_core.toolkit import kv_lock
    from trainkit_modal import records
    from trainkit_modal.kv import dict_name

    name = "c" * specmod.MAX_APP_NAME
    assert build_spec(settings(monkeypatch, TRAINKIT_APP_NAME=name), images=False).app_name == name
    namespaces = [
        exports.CALLS_NAMESPACE,
        evals.CALLS_NAMESPACE,
        runs.RUNS_NAMESPACE,
        runs_index.INDEX_NAMESPACE,
        sync.LOCK_NAMESPACE,
        kv_lock.LOCKS_NAMESPACE,
        retention.DELETING_NAMESPACE,
        events.EVENTS_NAMESPACE,
        events.CONTROL_NAMESPACE,
        records.CALLS_NAMESPACE,
        records.APP_NAMESPACE,
    ]
    assert max(namespaces, key=len) == specmod.LONGEST_KV_NAMESPACE
    for namespace in namespaces:
        assert dict_name(name, namespace).startswith(name)  # raises when Modal would refuse the name


def test_the_modal_pin_admits_only_versions_with_app_stop_and_lookup_by_id() -> None:
    import importlib.metadata
    import re

    from packaging.requirements import Requirement
    from packaging.specifiers import SpecifierSet

    root = Path(__file__).resolve().parents[2] / "packages" / "trainkit-modal"
    (line,) = re.findall(r'^\s*"(modal[<>=!~].*)",', (root / "pyproject.toml").read_text(), flags=re.M)
    modal = Requirement(line)
    for old in ("1.6.0", "1.6.1", "1.6.2", "1.6.3"):
        assert not modal.specifier.contains(old), old
    assert modal.specifier.contains("1.6.4") and not modal.specifier.contains("1.7.0")
    # The images' locks pin protobuf; the admitted modal (the one installed here) must accept it.
    wanted = [Requirement(r) for r in importlib.metadata.requires("modal") or [] if r.startswith("protobuf")]
    for lock in sorted((root / "src" / "trainkit_modal" / "locks").glob("*.txt")):
        pins = [
            line.split("==", 1)[1].split()[0] for line in lock.read_text().splitlines() if line.startswith("protobuf==")
        ]
        for pin in pins:
            assert all(SpecifierSet(str(r.specifier)).contains(pin) for r in wanted), (lock.name, pin)

"""The real `modal.App`, built offline, declares what the spec says (read back through `Function.info()`).

`Function.info()` answers offline in modal 1.6 for a function that was built here.
The inference classes' `scaledown_window` is not part of `info()`; it is checked
through what `build_app` passes to `app.cls` (with the fake SDK), and Modal's own
range check runs here when the real class is built.
"""

from __future__ import annotations

from types import ModuleType

import pytest

from trainkit_core.plugins.jobs import JOBS
from trainkit_core.settings import Settings
from trainkit_modal import spec as specmod
from trainkit_modal.app import build_app

MOUNTS = ["/data", "/models", "/eval", "/root/.cache/huggingface"]


@pytest.fixture(scope="module")
def built() -> object:
    """One real app for the module (building it takes about a second)."""
    mp = pytest.MonkeyPatch()
    mp.setenv("TRAINKIT_HF_SECRET", "huggingface")
    mp.setenv("TRAINKIT_TRAIN_TIMEOUT_S", "5400")
    mp.setenv("TRAINKIT_INFER_IDLE_TIMEOUT_S", "300")
    mp.setenv("TRAINKIT_API_TOKEN", "test-token")
    try:
        return build_app(Settings.from_env())
    finally:
        mp.undo()


def _info(obj: object) -> object:
    service = getattr(obj, "_get_class_service_function", None)
    return (service() if service else obj).info()  # type: ignore[attr-defined]


def test_import_builds_nothing_remote(built: object) -> None:
    import modal

    assert isinstance(built.app, modal.App)  # type: ignore[attr-defined]
    assert built.app.name == "trainkit"  # type: ignore[attr-defined]


def test_every_declared_function_has_its_gpu_timeout_retries_volumes_and_secret(built: object) -> None:
    spec = built.spec  # type: ignore[attr-defined]
    assert set(built.objects) == set(spec.functions) | ({spec.web.name} if spec.web else set())  # type: ignore[attr-defined]
    for name, fs in spec.functions.items():
        info = _info(built.objects[name])  # type: ignore[attr-defined]
        expected_gpus = [(fs.gpu.split(":")[0], int(fs.gpu.split(":")[1]) if ":" in fs.gpu else 1)] if fs.gpu else []
        assert info.gpus == expected_gpus, name
        assert info.timeout == fs.timeout_s, name
        assert info.max_retries == (fs.retries.max_retries if fs.retries else None), name
        assert sorted(info.volumes) == sorted(MOUNTS), name
        assert info.secrets == ["modal.Secret.from_name('huggingface')"], name


def test_sizes_get_their_gpus(built: object) -> None:
    objects = built.objects  # type: ignore[attr-defined]
    for size, gpu in {"4b": "A10G", "12b": "A100", "31b": "A100-80GB"}.items():
        for job in ("train", "eval", "infer"):
            if job in JOBS:
                assert _info(objects[specmod.function_name(job, size)]).gpus == [(gpu, 1)]
    for job in ("train", "eval", "infer"):
        if job in JOBS:
            assert _info(objects[specmod.function_name(job, "tiny")]).gpus == []


def test_runs_on_several_nodes_have_clustered_train_functions_as_modal_reads_them(built: object) -> None:
    """modal 1.6.4's `modal.clustered(size=N)`: one train function per declared cluster size, no other clustered."""
    objects, spec = built.objects, built.spec  # type: ignore[attr-defined]
    for nodes in specmod.CLUSTER_SIZES:
        info = _info(objects[specmod.cluster_function_name(nodes)])
        assert info.cluster_info is not None and info.cluster_info.size == nodes
        assert info.gpus == [("H100", 8)] and info.single_use_containers  # a GPU: Modal has no CPU-only clusters
    clustered = {name for name in spec.functions if _info(objects[name]).cluster_info is not None}
    assert clustered == {specmod.cluster_function_name(n) for n in specmod.CLUSTER_SIZES}


def test_train_timeout_and_retries_from_settings(built: object) -> None:
    if "train" not in JOBS:
        pytest.skip("the train job is not registered yet")
    info = _info(built.objects["train_4b"])  # type: ignore[attr-defined]
    assert info.timeout == 5400
    assert info.max_retries == Settings.from_env().compute.train_max_attempts - 1  # attempts = retries + 1


def test_train_attempts_setting_sets_the_retries_and_single_use_containers(
    fake_modal: ModuleType, monkeypatch: pytest.MonkeyPatch
) -> None:
    """TRAINKIT_TRAIN_MAX_ATTEMPTS: retries of train_<size>, and the containers learn it too."""
    monkeypatch.setenv("TRAINKIT_TRAIN_MAX_ATTEMPTS", "5")
    built = build_app(Settings.from_env(), sdk=fake_modal)
    for name, declared in built.objects.items():
        options = declared.options
        if name.startswith("train_"):
            assert options["retries"].max_retries == 4, name
            assert options["single_use_containers"] is True, name
            env = next(value for kind, value, *_ in options["image"].layers if kind == "env")
            assert env["TRAINKIT_TRAIN_MAX_ATTEMPTS"] == "5", name
        else:
            assert options["single_use_containers"] is False, name


def test_inference_class_serves_the_job_and_warm_requests(built: object) -> None:
    if "infer" not in JOBS:
        pytest.skip("the infer job is not registered yet")
    info = _info(built.objects["Inference_4b"])  # type: ignore[attr-defined]
    assert sorted(info.method_names) == ["generate", "run", "stream"]


def test_web_api_is_an_asgi_app_with_the_token_secret_only(built: object) -> None:
    if built.spec.web is None:  # type: ignore[attr-defined]
        pytest.skip("trainkit-api is not installed")
    info = _info(built.objects["web"])  # type: ignore[attr-defined]
    assert info.web_info is not None
    # The API token travels as a secret of its own, never as a value in the spec or an image.
    assert info.secrets == ["Secret.from_dict([TRAINKIT_API_TOKEN])"]
    assert "test-token" not in repr(info) and "test-token" not in repr(built.spec)  # type: ignore[attr-defined]
    assert info.gpus == []


def test_gpu_override_reaches_modal(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("TRAINKIT_GPU", "h100")
    built = build_app(Settings.from_env())
    for fs in built.spec.functions.values():
        if fs.size:
            assert _info(built.objects[fs.name]).gpus == [("H100", 1)]


def test_options_passed_to_modal(fake_modal: ModuleType, monkeypatch: pytest.MonkeyPatch) -> None:
    """What build_app hands to `app.function` / `app.cls`, the idle window included."""
    monkeypatch.setenv("TRAINKIT_INFER_IDLE_TIMEOUT_S", "321")
    built = build_app(Settings.from_env(), sdk=fake_modal)
    for name, declared in built.objects.items():
        options = declared.options
        assert options["serialized"] is True
        assert sorted(options["volumes"]) == sorted(MOUNTS)
        if declared.kind == "class":
            assert options["scaledown_window"] == 321, name
        else:
            assert "scaledown_window" not in options
    image = built.objects["ping"].options["image"]
    assert image.layers[0] == ("debian_slim", specmod._python_version())
    assert image.layers[-1][0] == "add_local_python_source"


def _payloads(built: object) -> dict[str, bytes]:
    """The bytes `modal deploy` sends for some functions and a class (`serialized=True`), by modal's serializer.

    Reaches into modal internals (`_source_info`, `_user_cls`) to get them.
    """
    from modal._serialization import serialize
    from modal._utils.async_utils import synchronizer

    payload = {}
    for name in ("ping", "train_4b", "eval_12b", "web"):
        if name in built.objects:  # type: ignore[attr-defined]
            payload[name] = synchronizer._translate_in(built.objects[name])._source_info.serialized_function()  # type: ignore[attr-defined]
    payload["Inference_4b"] = serialize(synchronizer._translate_in(built.objects["Inference_4b"])._user_cls)  # type: ignore[attr-defined]
    return payload


def test_functions_ship_by_reference_not_as_code(built: object) -> None:
    """A pickled reference loads on any Python; pickled code only on the one that pickled it.

    So a deploy from any supported Python works with the images' pinned Python: every
    payload names an attribute of `trainkit_modal.functions` and carries no code object.
    """
    import pickletools

    for name, data in _payloads(built).items():
        ops = [(op.name, arg) for op, arg, _ in pickletools.genops(data)]
        strings = [arg for _, arg in ops if isinstance(arg, str)]
        assert "trainkit_modal.functions" in strings, (name, strings)
        assert not any("_make_function" in s or "_make_skeleton_class" in s for s in strings), (name, strings)
        assert b"co_code" not in data and len(data) < 400, (name, len(data))


@pytest.mark.slow
def test_functions_load_in_a_fresh_process(built: object, tmp_path: object) -> None:
    """Loaded with modal's own deserializer in a new process: the module's own attributes, not the app."""
    import json
    import os
    import pickle
    import subprocess
    import sys
    from pathlib import Path

    blob = Path(str(tmp_path)) / "payload.pkl"
    blob.write_bytes(pickle.dumps(_payloads(built)))
    probe = (
        "import json, pickle, sys\n"
        "from modal._serialization import deserialize\n"
        "import trainkit_modal.functions as functions\n"
        f"payload = pickle.loads(open({str(blob)!r}, 'rb').read())\n"
        "out = {}\n"
        "for name, data in payload.items():\n"
        "    obj = deserialize(data, None)\n"
        "    assert obj is getattr(functions, obj.__qualname__), name\n"
        "    if isinstance(obj, type):\n"
        "        out[name] = [obj.__qualname__, sorted(a for a in vars(obj) if not a.startswith('_'))]\n"
        "    else:\n"
        "        out[name] = [obj.__qualname__, [c.cell_contents for c in obj.__closure__ or []]]\n"
        "out['app_module_imported'] = 'trainkit_modal.app' in sys.modules\n"
        "print(json.dumps(out))\n"
    )
    done = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, env=os.environ, timeout=120)
    assert done.returncode == 0, done.stderr
    loaded = json.loads(done.stdout.strip().splitlines()[-1])
    assert loaded["ping"] == ["job_ping", ["ping"]]
    if "train_4b" in loaded:
        assert loaded["train_4b"] == ["job_train", ["train"]]
    assert loaded["Inference_4b"] == ["Inference_4b", ["generate", "load", "run", "stream"]]
    if "web" in loaded:
        assert loaded["web"] == ["web", []]
    assert loaded["app_module_imported"] is False  # the container never rebuilds the app


def test_the_web_function_serves_concurrent_requests(fake_modal: ModuleType, monkeypatch: pytest.MonkeyPatch) -> None:
    """`@modal.concurrent`: one container serves many requests (event streams stay open)."""
    pytest.importorskip("trainkit_api")
    monkeypatch.setenv("TRAINKIT_API_TOKEN", "test-token")
    built = build_app(Settings.from_env(), sdk=fake_modal)
    web = built.objects["web"].target
    assert web._fake_asgi and web._fake_concurrent == specmod.WEB_MAX_INPUTS > 1
    assert not any(getattr(d.target, "_fake_concurrent", None) for n, d in built.objects.items() if n != "web")


def test_images_mount_every_source_file_but_bytecode(fake_modal: ModuleType, monkeypatch: pytest.MonkeyPatch) -> None:
    """`add_local_python_source`'s default drops non-.py files: the dashboard's static files need them."""
    from pathlib import Path

    from trainkit_modal.app import source_ignore

    built = build_app(Settings.from_env(), sdk=fake_modal)
    for declared in built.objects.values():
        layer = declared.options["image"].layers[-1]
        assert layer[0] == "add_local_python_source" and layer[2] is source_ignore
    assert not source_ignore(Path("static/index.html")) and not source_ignore(Path("routes/runs.py"))
    assert source_ignore(Path("routes/__pycache__/jobs.cpython-311.pyc")) and source_ignore(Path("x.pyc"))


@pytest.mark.parametrize("seconds", ["2", "3600"])
def test_modal_accepts_the_idle_window_bounds(monkeypatch: pytest.MonkeyPatch, seconds: str) -> None:
    """The real SDK builds the inference classes at both ends of 2-3600 s (it checks the range itself)."""
    monkeypatch.setenv("TRAINKIT_INFER_IDLE_TIMEOUT_S", seconds)
    built = build_app(Settings.from_env())
    assert "Inference_4b" in built.objects


def test_modal_itself_refuses_an_idle_window_past_3600() -> None:
    """The bound trainkit checks is Modal's own: its `app.cls` refuses 3601."""
    import modal

    app = modal.App("bounds")
    with pytest.raises(modal.exception.InvalidError):

        @app.cls(scaledown_window=3601, serialized=True)
        class Late:
            @modal.method()
            def go(self) -> None: ...


def test_the_export_image_installs_openmp_before_llama_cpp(fake_modal: ModuleType) -> None:
    """The infer image (export's) installs Debian's libgomp1, which xllamacpp's wheel links and does not
    bundle, before its pip layers; it compiles nothing (no build variables), and the other images need neither."""
    built = build_app(Settings.from_env(), sdk=fake_modal)
    layers = built.objects["export_4b"].options["image"].layers
    kinds = [layer[0] for layer in layers]
    assert kinds[:2] == ["debian_slim", "apt_install"]
    assert layers[1][1] == ("libgomp1",)
    pypi = [layer for layer in layers if layer[0] == "uv_pip_install" and layer[2]["index_url"] is None]
    assert len(pypi) == 1
    packages, options = pypi[0][1], pypi[0][2]
    assert {"gguf==0.19.0", "xllamacpp==2026.10.11549"} <= set(packages)
    assert options["extra_options"] == "--no-deps"
    assert all(layer[2]["env"] is None for layer in layers if layer[0] == "uv_pip_install")
    for name in ("train_4b", "ping"):
        other = built.objects[name].options["image"].layers
        assert "apt_install" not in [layer[0] for layer in other], name
        assert all(layer[2]["env"] is None for layer in other if layer[0] == "uv_pip_install"), name

"""The simulated container's entry point: run one input of a declared function, or serve the web app.

Runs under the image's venv Python, with the working directory and ``PYTHONPATH`` at the
image's ``/root`` (where `add_local_python_source` put the trainkit sources) and only the
environment the app declares. It does what Modal's container entrypoint does for a
function shipped with ``serialized=True``: load the pickled function or class with
modal's own deserializer (modal is installed in every image), hydrate the app from
its layout (`_App._init_container`, so the web API's runner starts jobs in its own app
through `trainkit_modal.own_app`, as on Modal), run the class's ``@modal.enter``
methods, call the function or method. The only stand-ins are the SDK
objects that would talk to Modal's servers or its container runtime (`Dict`, `Volume`,
`Function`, `Cls`, `FunctionCall`, `App.lookup`, `current_function_call_id`, `Cluster`),
replaced by the fakes of ``fake_modal.py`` sharing the test's state, and the volumes' mount
paths, redirected to the fake volumes' folders (`modal_patch`); the processes the job starts
(torchrun's ranks) get the same stand-ins when they start.

    python entrypoint.py SIM_JSON NAME CALL_ID      # one input (call record under FAKE_MODAL_ROOT)
    python entrypoint.py SIM_JSON web --serve PORT  # the ASGI app on 127.0.0.1:PORT
"""

from __future__ import annotations

import inspect
import json
import os
import pickle
import sys
from pathlib import Path

# Not this folder (the test tree): a container's sys.path is its image's and /root.
sys.path.pop(0)


def _load(sim: dict, name: str):
    from modal._serialization import deserialize

    sys.path.append(str(Path(__file__).resolve().parent))
    import modal_patch

    sys.path.pop()
    modal_patch.patch(sim)
    modal_patch.hand_down(Path(sys.argv[1]))
    return deserialize(Path(sim["payloads"], f"{name}.pkl").read_bytes(), None)


def _enter_app(app_id: str) -> None:
    """Like Modal's container entrypoint (modal 1.6.4 `hydrate_function`): the function's app is
    hydrated from its app's layout (`_App._init_container`); for a serialized function that app
    is a fresh `_App()`. Inside, `modal.App._get_container_app()` is that app, as on Modal."""
    import fake_modal
    from modal.app import _App
    from modal.running_app import RunningApp

    record = fake_modal._read_json(fake_modal._app_id_path(app_id))
    ids = {**record["functions"], **record["classes"]}
    layout = RunningApp(
        app_id,
        function_ids=dict(record["functions"]),
        class_ids=dict(record["classes"]),
        object_handle_metadata={object_id: {"tag": tag} for tag, object_id in ids.items()},
    )
    _App()._init_container(None, layout)


def _call(sim: dict, name: str, call_id: str) -> None:
    """One attempt of one input; its outcome goes to ``FAKE_MODAL_OUTCOME`` (the fake's
    scheduler decides, as Modal does, whether a failed attempt is retried). A container
    that dies writes none."""
    root = Path(os.environ["FAKE_MODAL_ROOT"])
    record = json.loads((root / "calls" / f"{call_id}.json").read_text())
    try:
        target = _load(sim, name)
        _enter_app(record["app_id"])
        args, kwargs = list(record["args"]), dict(record["kwargs"])
        if sim["containers"][name]["kind"] == "class":
            from modal._partial_function import _find_callables_for_obj, _PartialFunctionFlags

            instance = target()
            for enter in _find_callables_for_obj(instance, _PartialFunctionFlags.ENTER_POST_SNAPSHOT).values():
                enter()
            methods = _find_callables_for_obj(instance, _PartialFunctionFlags.CALLABLE_INTERFACE)
            result = methods[kwargs.pop("__method__")](*args, **kwargs)
            if inspect.isgenerator(result):
                result = list(result)
        else:
            result = target(*args, **kwargs)
        outcome = {"state": "succeeded", "result": pickle.dumps(result).hex()}
    except BaseException as exc:
        import traceback

        traceback.print_exc()
        try:
            blob = pickle.dumps(exc)
        except Exception:
            import modal

            blob = pickle.dumps(modal.exception.RemoteError(f"{type(exc).__name__}: {exc}"))
        outcome = {"state": "failed", "error": blob.hex()}
    out = Path(os.environ["FAKE_MODAL_OUTCOME"])
    tmp = out.with_name(f".{out.name}.{os.getpid()}")
    tmp.write_text(json.dumps(outcome))
    os.replace(tmp, out)


def _serve(sim: dict, name: str, port: int) -> None:
    import uvicorn

    app = _load(sim, name)()
    import fake_modal

    _enter_app(fake_modal._read_json(fake_modal._app_path(sim["app_name"]))["app_id"])  # the deployed app
    uvicorn.run(app, host="127.0.0.1", port=port, log_level="warning")


def main() -> None:
    sim = json.loads(Path(sys.argv[1]).read_text())
    name = sys.argv[2]
    if sys.argv[3] == "--serve":
        _serve(sim, name, int(sys.argv[4]))
    else:
        _call(sim, name, sys.argv[3])


if __name__ == "__main__":
    main()

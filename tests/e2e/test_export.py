"""What a training run leaves behind, from the CLI on the `local` provider: merged
export, TensorBoard logs, kept checkpoints, and deleting the run.

One short real run (`--report-to tensorboard --keep-checkpoints 1`) is shared by the
module; the tests run in file order and the last one deletes it. Its merged export is
loaded in a bare Python (`bare_env`: only transformers, torch and what they require on
the path; peft and trainkit cannot be imported, checked in the child) and must give
the same greedy answers as `trainkit infer` on the demo dataset's eval prompts.
"""

from __future__ import annotations

import importlib.util
import json
import re
import struct
import sys
from pathlib import Path
from typing import Any

import pytest
from cli_env import Env

pytestmark = [pytest.mark.ml, pytest.mark.e2e, pytest.mark.timeout(1800)]

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(Path(__file__).parent))
import bare_env  # noqa: E402

PROMPTS = [json.loads(line)["messages"][0]["content"] for line in (REPO / "datasets/demo/eval.jsonl").open()][:3]
MAX_NEW = 24
#: `--report-to tensorboard` needs tensorboardX (the `ml-test` group installs it; a bare dev venv may not).
HAS_TENSORBOARD = importlib.util.find_spec("tensorboardX") is not None

BARE_GENERATE = """
import importlib.util, json
blocked = [n for n in ("peft", "trainkit_core", "trainkit_cli", "trl") if importlib.util.find_spec(n) is not None]
assert not blocked, f"importable in the bare environment: {blocked}"
import torch
from transformers import AutoModelForCausalLM, AutoTokenizer
folder, max_new, prompts = sys.argv[1], int(sys.argv[2]), json.loads(sys.argv[3])
tok = AutoTokenizer.from_pretrained(folder)
model = AutoModelForCausalLM.from_pretrained(folder).eval()
stops = model.generation_config.eos_token_id
answers = []
for p in prompts:
    text = tok.apply_chat_template([{"role": "user", "content": p}], add_generation_prompt=True, tokenize=False)
    ids = tok(text, add_special_tokens=False, return_tensors="pt")
    with torch.inference_mode():
        out = model.generate(**ids, max_new_tokens=max_new, do_sample=False)
    new = out[0, ids["input_ids"].shape[1]:].tolist()
    new = new[:-1] if new and new[-1] in stops else new
    answers.append(tok.decode(new, skip_special_tokens=True))
print(json.dumps({"class": type(model).__name__, "answers": answers}))
"""


@pytest.fixture(scope="module")
def env(tmp_path_factory: pytest.TempPathFactory) -> Any:
    datasets = tmp_path_factory.mktemp("datasets")
    (datasets / "demo").symlink_to(REPO / "datasets" / "demo")
    env = Env(tmp_path_factory.mktemp("home"), datasets)
    yield env
    env.end_warm_worker()


@pytest.fixture(scope="module")
def model_path(env: Env) -> str:
    """A short real run of the tiny preset (its embeddings and untied head trained in full)."""
    tracking = ("--report-to", "tensorboard") if HAS_TENSORBOARD else ()
    done = env.cli(
        *("train", "--dataset", "demo", "--model-size", "tiny", "--steps", "40", "--save-every", "10"),
        *("--keep-checkpoints", "1", *tracking),
    )
    found = re.search(r"model: (trained/run-\S+)", done.stdout)
    assert found, done.stdout
    return found.group(1)


@pytest.fixture(scope="module")
def exported(env: Env, model_path: str, tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, dict[str, Any]]:
    """`trainkit export MODEL --merged OUT`: the downloaded folder and the command's JSON."""
    out = tmp_path_factory.mktemp("export") / "merged"
    return out, json.loads(env.cli("export", model_path, "--merged", str(out), "--json").stdout)


def test_merged_export_loads_without_trainkit_or_peft_and_answers_as_infer(
    env: Env, model_path: str, exported: tuple[Path, dict[str, Any]], tmp_path: Path
) -> None:
    out, info = exported
    assert info["export_path"] == "exports/" + model_path.split("/")[1] and info["out"] == str(out)
    assert info["dtype"] == "float32" and info["architectures"] == ["Gemma3ForCausalLM"] and info["notes"] == []
    assert {p.name for p in out.iterdir()} >= {
        "config.json",
        "generation_config.json",
        "model.safetensors",
        "tokenizer.json",
        "chat_template.jinja",
        "trainkit_export.json",
    }
    assert not list(out.glob("adapter_*")), "a merged export holds no adapter"

    expected = []
    for prompt in PROMPTS:
        answer = json.loads(
            env.cli(
                "infer", "--model-path", model_path, "--prompt", prompt, "--max-new-tokens", str(MAX_NEW), "--json"
            ).stdout
        )
        expected.append(answer["text"])
    base = json.loads(
        env.cli(
            "infer",
            "--model-path",
            model_path,
            "--prompt",
            PROMPTS[0],
            "--base",
            "--max-new-tokens",
            str(MAX_NEW),
            "--json",
        ).stdout
    )

    site = bare_env.build(tmp_path / "site")
    bare = bare_env.run(site, BARE_GENERATE, str(out), str(MAX_NEW), json.dumps(PROMPTS))
    assert bare.returncode == 0, bare.stderr[-3000:]
    got = json.loads(bare.stdout.strip().splitlines()[-1])
    assert got["class"] == "Gemma3ForCausalLM"
    assert got["answers"] == expected
    assert base["text"] != expected[0]  # the trained weights, not the base's, were merged


def test_models_download_streams_an_export_or_a_trained_model(
    env: Env, model_path: str, exported: tuple[Path, dict[str, Any]], tmp_path: Path
) -> None:
    export = exported[1]["export_path"]
    listing = json.loads(env.cli("models", "--json").stdout)["models"]
    assert [m["model_path"] for m in listing] == [model_path]  # `models` still lists, now as a group

    dest = tmp_path / "export"
    got = json.loads(env.cli("models", "download", export, str(dest), "--json").stdout)
    volume = env.home / "volumes" / "trainkit-models"
    assert got["bytes"] == sum(f.stat().st_size for f in (volume / export).rglob("*") if f.is_file())
    assert sorted(p.name for p in dest.iterdir()) == sorted(p.name for p in (volume / export).iterdir())

    adapter = tmp_path / "adapter"
    env.cli("models", "download", model_path, str(adapter))
    assert (adapter / "adapter_model.safetensors").is_file() and (adapter / "checkpoints").is_dir()

    again = env.cli("models", "download", export, str(dest), check=False)
    assert again.returncode != 0 and "is not an empty folder" in again.stderr
    bad = env.cli("models", "download", "exports/../trained", str(tmp_path / "x"), check=False)
    assert bad.returncode == 2 and "malformed" in bad.stderr and not (tmp_path / "x").exists()


def _tensorboard_scalars(folder: Path) -> dict[str, dict[int, float]]:
    """Tag -> step -> value from TensorBoard event files: TFRecords (length, its CRC, the
    record, its CRC) of `Event` protos, read with the protos tensorboardX ships."""
    from tensorboardX.proto import event_pb2

    found: dict[str, dict[int, float]] = {}
    for path in sorted(folder.rglob("events.out.tfevents.*")):
        data, at = path.read_bytes(), 0
        while at < len(data):
            (size,) = struct.unpack("<Q", data[at : at + 8])
            event = event_pb2.Event.FromString(data[at + 12 : at + 12 + size])
            at += 12 + size + 4
            for value in event.summary.value:
                found.setdefault(value.tag, {})[event.step] = value.simple_value
    return found


@pytest.mark.skipif(not HAS_TENSORBOARD, reason="tensorboardX is not installed (pip install 'trainkit-core[tracking]')")
def test_tensorboard_holds_the_loss_series_of_the_run_events(env: Env, model_path: str) -> None:
    from trainkit_core import get_provider
    from trainkit_core.runs.training_run import RunStore
    from trainkit_core.settings import ProviderSettings, Settings

    run_id = model_path.split("/")[1]
    store = RunStore.for_provider(get_provider("local", Settings(provider=ProviderSettings(home=env.home))))
    events = store.events(run_id).read()
    losses = {int(step): loss for e in events if e["type"] == "progress" for step, loss in e["losses"]}
    assert sorted(losses) == list(range(1, 41))
    folder = env.home / "volumes" / "trainkit-models" / "runs" / run_id / "tensorboard"
    scalars = _tensorboard_scalars(folder)
    assert scalars["train/loss"] == pytest.approx(losses, rel=1e-6)
    shown = env.cli("runs", "show", run_id).stdout
    assert f"tensorboard: runs/{run_id}/tensorboard" in shown


def test_keep_checkpoints_keeps_the_last_and_the_best_by_eval_loss(env: Env, model_path: str) -> None:
    run_id = model_path.split("/")[1]
    record = json.loads(env.cli("runs", "show", run_id, "--json").stdout)
    steps = [c["step"] for c in record["checkpoints"]]
    scores = {int(k): v for k, v in record["metadata"]["checkpoint_eval_loss"].items()}
    assert 40 in steps and set(steps) == set(scores) and len(steps) <= 2
    if len(steps) == 2:  # an older checkpoint survives only as the best
        assert scores[steps[0]] < scores[40]
    removed = [e for e in env.cli("runs", "logs", run_id, "--json").stdout.splitlines() if "keep_checkpoints" in e]
    assert removed, "pruning is logged in the run's events"
    folder = env.home / "volumes" / "trainkit-models" / "trained" / run_id / "checkpoints"
    assert sorted(int(p.name) for p in folder.iterdir()) == steps  # nothing half-removed left behind


def test_runs_delete_from_the_cli_frees_what_it_reports(env: Env, model_path: str) -> None:
    run_id = model_path.split("/")[1]
    volume = env.home / "volumes" / "trainkit-models"

    def disk() -> int:
        return sum(f.stat().st_size for f in volume.rglob("*") if f.is_file())

    before = disk()
    dry = json.loads(env.cli("runs", "delete", run_id, "--dry-run", "--json").stdout)
    assert disk() == before and dry["dry_run"] is True
    done = json.loads(env.cli("runs", "delete", run_id, "--json").stdout)
    assert done["bytes"] == dry["bytes"] == before - disk() > 0
    assert not (volume / "trained" / run_id).exists() and not (volume / "runs" / run_id).exists()
    gone = env.cli("runs", "show", run_id, check=False)
    assert gone.returncode != 0 and "no run" in gone.stderr
    assert json.loads(env.cli("gc", "--dry-run", "--json").stdout)["dry_run"] is True

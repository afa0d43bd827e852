"""Merged export of a trained tiny model, from the CLI on the `local` provider.

One short real run is shared by the module. Its merged export is loaded in a bare
Python (`bare_env`: only transformers, torch and what they require on the path; peft
and trainkit cannot be imported, checked in the child) and must give the same greedy
answers as `trainkit infer` on the demo dataset's eval prompts.
"""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

pytestmark = [pytest.mark.ml, pytest.mark.e2e, pytest.mark.timeout(1800)]

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(Path(__file__).parent))
import bare_env  # noqa: E402

PROMPTS = [json.loads(line)["messages"][0]["content"] for line in (REPO / "datasets/demo/eval.jsonl").open()][:3]
MAX_NEW = 24

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


class Env:
    def __init__(self, home: Path, datasets: Path) -> None:
        self.home = home
        self.env = {
            **os.environ,
            "TRAINKIT_HOME": str(home),
            "TRAINKIT_DATASETS_DIR": str(datasets),
            "HF_HUB_OFFLINE": "1",
            "TRANSFORMERS_OFFLINE": "1",
            "HF_DATASETS_OFFLINE": "1",
            "COLUMNS": "200",
        }

    def cli(self, *args: str, check: bool = True, timeout: float = 900) -> subprocess.CompletedProcess[str]:
        done = subprocess.run(
            [sys.executable, "-m", "trainkit_cli", *args],
            env=self.env,
            capture_output=True,
            text=True,
            timeout=timeout,
            cwd=REPO,
            check=False,
        )
        if check and done.returncode != 0:
            raise AssertionError(f"trainkit {' '.join(args)} exited {done.returncode}:\n{done.stdout}\n{done.stderr}")
        return done

    def end_warm_worker(self) -> None:
        from trainkit_core.inference.warm import read_record
        from trainkit_core.local.runner import alive

        worker = read_record(self.home)
        if worker and alive(worker.get("pid"), worker.get("pid_start")):
            try:
                os.kill(worker["pid"], signal.SIGTERM)
            except ProcessLookupError:
                pass


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
    done = env.cli("train", "--dataset", "demo", "--model-size", "tiny", "--steps", "40", "--save-every", "20")
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

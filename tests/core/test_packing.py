"""`--packing`, torch-free: the field and flag, its refusals, and the plan's packed rows.

The training side (each example's loss unchanged in a packed row, the mask, a run that
learns) is in test_packing_ml.py.
"""

from __future__ import annotations

import json
import math
import sys
from pathlib import Path

import pytest

from trainkit_core.errors import UsageError
from trainkit_core.training.config import TrainConfig
from trainkit_core.training.packing import packed_rows, sft_arguments


@pytest.fixture
def datasets(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A chat dataset `qa` of 50 equal examples, and `pictures`, one with an image, in TRAINKIT_DATASETS_DIR."""
    for name, user in (("qa", "q " * 10), ("pictures", [{"type": "image_url", "image_url": {"url": "a.png"}}])):
        folder = tmp_path / "datasets" / name
        folder.mkdir(parents=True)
        (folder / "dataset.toml").write_text(f'name = "{name}"\nformat = "chat"\ntrain = ["train.jsonl"]\n')
        line = json.dumps(
            {"messages": [{"role": "user", "content": user}, {"role": "assistant", "content": "a " * 20}]}
        )
        (folder / "train.jsonl").write_text((line + "\n") * 50)
    monkeypatch.setenv("TRAINKIT_DATASETS_DIR", str(tmp_path / "datasets"))
    monkeypatch.setenv("TRAINKIT_HOME", str(tmp_path / "home"))
    monkeypatch.setenv("HF_HOME", str(tmp_path / "hf"))  # no real tokenizer: estimated tokens, torch-free
    return tmp_path / "datasets"


def test_packed_rows_is_best_fit_decreasing_over_whole_examples() -> None:
    assert packed_rows([], 10) == 0
    assert packed_rows([5, 5, 5], 10) == 2
    assert packed_rows([7, 7, 7], 10) == 3  # an example is never split across rows
    # Largest first, each into the fullest row it fits: 6+4, 5+3+2, (first fit in order would need 3 rows).
    assert packed_rows([2, 3, 4, 5, 6], 10) == 2
    assert packed_rows([3, 3, 3, 8, 8], 10) == 3  # 8, 8, then 3+3+3 in a third
    assert packed_rows([30, 4], 10) == 2  # longer than a row: cut to it, as trl's bfd does


def test_packing_is_off_by_default_and_on_asks_trl_for_padding_free_bfd() -> None:
    assert TrainConfig(dataset="demo").packing is False
    assert sft_arguments(False) == {"packing": False}
    assert sft_arguments(True) == {"packing": True, "packing_strategy": "bfd", "padding_free": True}


@pytest.mark.parametrize(
    ("fields", "message"),
    [
        ({"method": "dpo"}, "packing is an option of --method sft, not of dpo"),
        ({"method": "grpo"}, "packing is an option of --method sft, not of grpo"),
        ({"backend": "unsloth"}, "packing runs on the hf backend only"),
        ({"packing": "sometimes"}, "packing: Input should be a valid boolean"),
    ],
)
def test_bad_combinations_are_refused_naming_packing(fields: dict[str, str], message: str) -> None:
    with pytest.raises(UsageError, match=message):
        TrainConfig.parse({"dataset": "demo", "packing": True, **fields})


def test_an_image_dataset_is_refused_before_anything_starts(datasets: Path) -> None:
    from trainkit_core import get_provider
    from trainkit_core.settings import Settings
    from trainkit_core.training.submit import check_request

    provider = get_provider("local", Settings.from_env())
    check_request(provider, {"dataset": "pictures", "model_size": "4b"})  # accepted without packing
    with pytest.raises(UsageError, match="'pictures' has images; --packing packs text only") as refused:
        check_request(provider, {"dataset": "pictures", "model_size": "4b", "packing": True})
    assert refused.value.hint == "train without --packing"


def test_the_plan_counts_packed_rows_and_the_cli_flag_reaches_it(datasets: Path) -> None:
    sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "cli"))
    from cli_helpers import run_main

    def plan(*options: str) -> dict[str, object]:
        args = ["train", "--dataset", "qa", "--model-size", "4b", "--max-seq-length", "128", "--plan", "--json"]
        code, out = run_main(*args, *options)
        assert code == 0, out
        return json.loads(out)  # type: ignore[no-any-return]

    padded, packed = plan(), plan("--packing")
    per_example = padded["tokens_per_epoch"] // 50  # the 50 examples are equal
    rows = math.ceil(50 / (128 // per_example))
    # The 4b preset's batch 2 x accumulation 4: steps of batches of packed rows, not of examples.
    assert padded["steps_per_epoch"] == math.ceil(math.ceil(50 / 2) / 4)
    assert packed["steps_per_epoch"] == math.ceil(math.ceil(rows / 2) / 4) < padded["steps_per_epoch"]
    assert packed["tokens_per_epoch"] == padded["tokens_per_epoch"]  # the same tokens, fewer rows
    [note] = [n for n in packed["notes"] if n.startswith("--packing")]  # type: ignore[union-attr]
    assert f"50 examples in {rows} packed rows of up to 128 tokens" in note and "estimated" in note
    assert not [n for n in padded["notes"] if n.startswith("--packing")]  # type: ignore[union-attr]

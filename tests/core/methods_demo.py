"""The datasets and measures of the DPO and GRPO learning demonstrations (tests/core/test_methods_ml.py).

One task, the demo's opposites ("Opposites: hot early" -> "cold late"), learnt by a
short SFT run (the tiny preset's defaults, 400 steps), and one style rule: an answer
that ends with a full stop. The SFT data ends an answer with one in
`SFT_FULL_STOP_EVERY` examples only, so its greedy answers on unseen prompts (the
demo's eval prompts, never trained on) end without one. Then:

- DPO pairs prefer the answer with the full stop over the same answer without it;
- GRPO prompts carry the answer with its full stop as `reference`, scored by the
  built-in `exact_match` grader: the completions it samples that end with one (about
  one in ten at first) are rewarded.

Measured on the eval prompts with greedy answers of the saved model, loaded as
inference loads it.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[2]
DEMO = REPO / "datasets" / "demo"
#: Examples of the demo's train file used (the SFT run learns them; the preference and prompt sets reuse them).
SFT_EXAMPLES = 4000
PREFERENCE_EXAMPLES = 400
PROMPT_EXAMPLES = 200
#: One SFT answer in this many ends with a full stop.
SFT_FULL_STOP_EVERY = 10
EVAL_PROMPTS_N = 40


def _demo(file: str) -> list[tuple[str, str]]:
    pairs = []
    for line in (DEMO / file).read_text().splitlines():
        messages = json.loads(line)["messages"]
        pairs.append((messages[0]["content"], messages[1]["content"]))
    return pairs


TRAIN = _demo("train.jsonl")
EVAL = _demo("eval.jsonl")[:EVAL_PROMPTS_N]
EVAL_PROMPTS = [prompt for prompt, _ in EVAL]


def _user(text: str) -> dict[str, str]:
    return {"role": "user", "content": text}


def _assistant(text: str) -> dict[str, str]:
    return {"role": "assistant", "content": text}


def _write(folder: Path, spec: str, files: dict[str, list[dict[str, Any]]]) -> None:
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "dataset.toml").write_text(spec)
    for name, records in files.items():
        (folder / name).write_text("".join(json.dumps(r) + "\n" for r in records))


def write_datasets(root: Path) -> None:
    """style-sft (chat), style-pref (preference), style-prompts (prompt) under `root`."""
    sft = [
        {"messages": [_user(p), _assistant(a + "." if i % SFT_FULL_STOP_EVERY == 0 else a)]}
        for i, (p, a) in enumerate(TRAIN[:SFT_EXAMPLES])
    ]
    _write(
        root / "style-sft",
        'name = "style-sft"\nformat = "chat"\ntrain = ["train.jsonl"]\n',
        {"train.jsonl": sft},
    )

    def pair(prompt: str, answer: str) -> dict[str, Any]:
        return {
            "input": {"messages": [_user(prompt)]},
            "preferred_output": [_assistant(answer + ".")],
            "non_preferred_output": [_assistant(answer)],
        }

    _write(
        root / "style-pref",
        'name = "style-pref"\nformat = "preference"\ntrain = ["train.jsonl"]\neval = ["eval.jsonl"]\n',
        {
            "train.jsonl": [pair(p, a) for p, a in TRAIN[:PREFERENCE_EXAMPLES]],
            "eval.jsonl": [pair(p, a) for p, a in EVAL[:10]],
        },
    )
    _write(
        root / "style-prompts",
        'name = "style-prompts"\nformat = "prompt"\ntrain = ["train.jsonl"]\n',
        {"train.jsonl": [{"messages": [_user(p)], "reference": a + "."} for p, a in TRAIN[:PROMPT_EXAMPLES]]},
    )


def answers(provider: Any, model_path: str, prompts: list[str], max_new_tokens: int = 16) -> list[str]:
    """Greedy answers of a saved model (loaded as inference loads it) to `prompts`."""
    from trainkit_core.evals.scoring import _generate
    from trainkit_core.inference.loading import load_adapter_model
    from trainkit_core.models.chat_format import render_prompt
    from trainkit_core.models.trained.card import read_card
    from trainkit_core.models.trained.paths import check_model_path

    volume = provider.volume("models")
    ref = check_model_path(model_path, volume)
    card = read_card(volume, ref)
    folder = Path(volume.root) / ref.path
    hf_cache = Path(provider.volume("hf-cache").root)
    model, tokenizer, fmt = load_adapter_model(folder, card, hf_cache, device="cpu", quantize=False)
    model.eval()
    stops = fmt.stop_ids(tokenizer)
    encoded = [tokenizer(render_prompt([_user(p)], fmt), add_special_tokens=False)["input_ids"] for p in prompts]
    found = _generate(model, tokenizer, encoded, stops, max_new_tokens, "cpu")
    return [tokenizer.decode(ids, skip_special_tokens=True) for ids, _ in found]


def full_stop_rate(texts: list[str]) -> float:
    return sum(t.strip().endswith(".") for t in texts) / len(texts)


def exact_match_reward(texts: list[str]) -> float:
    """The mean of the built-in `exact_match` grader over the eval prompts (reference: the answer with its full stop)."""
    from trainkit_core.rewards.builtin import exact_match

    return sum(exact_match(t, {"reference": a + "."}) for t, (_, a) in zip(texts, EVAL, strict=True)) / len(EVAL)

"""OpenAI's per-message `weight`: a weight-0 assistant message is context, not trained.

Validation at file and line (torch-free); the loss on the real tokenizers' output
(`ml`): the tiny model's, through the same data path the train job takes
(`parse_jsonl` -> `Example.as_record` -> `encode_for_training`), and the chat
template saved with a model.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from trainkit_core.datasets.examples import parse_jsonl
from trainkit_core.datasets.validate import validate_local
from trainkit_core.models.chat_format import GEMMA3, GEMMA4, ChatFormat, check_loss_mask, encode_for_training, render

SPEC = 'name = "weights"\nformat = "{fmt}"\ntrain = ["train.jsonl"]\n'
WEIGHTED = [
    {"role": "system", "content": "You answer briefly."},
    {"role": "user", "content": "Say hello to the cat."},
    {"role": "assistant", "content": "Hello cat!", "weight": 0},
    {"role": "user", "content": "And the dog?"},
    {"role": "assistant", "content": "Hello dog.", "weight": 1},
]


def _line(messages: list[dict[str, Any]], **extra: Any) -> bytes:
    return json.dumps({"messages": messages, **extra}).encode() + b"\n"


def _turns(*weights: object, role: str = "assistant") -> list[dict[str, Any]]:
    """user/assistant pairs, the assistant (or `role`) of pair i given weights[i] (None: no weight key)."""
    found: list[dict[str, Any]] = []
    for i, weight in enumerate(weights):
        found.append({"role": "user", "content": f"q{i}"})
        found.append({"role": "assistant", "content": f"a{i}"})
        target = found[-1] if role == "assistant" else found[-2]
        if weight is not None:
            target["weight"] = weight
    return found


GOOD = _line(_turns(None))
MALFORMED = [
    ("two", _turns(2), "weight-invalid", "messages[1] weight must be 0 or 1", "got 2"),
    ("string", _turns("1"), "weight-invalid", "messages[1] weight must be 0 or 1", 'got "1"'),
    ("true", _turns(True), "weight-invalid", "messages[1] weight must be 0 or 1", "got true"),
    ("false", _turns(1, False), "weight-invalid", "messages[3] weight must be 0 or 1", "got false"),
    ("half", _turns(0.5), "weight-invalid", "messages[1] weight must be 0 or 1", "got 0.5"),
    (
        "null",
        [
            *_turns(None, None, 1),
            {"role": "user", "content": "x"},
            {"role": "assistant", "content": "y", "weight": None},
        ],
        "weight-invalid",
        "messages[7]",
        "got null",
    ),
    ("negative", _turns(-1), "weight-invalid", "messages[1]", "got -1"),
    ("list", _turns([1]), "weight-invalid", "messages[1]", "got [1]"),
    ("on-user", _turns(1, role="user"), "weight-not-assistant", "messages[0] (user) has a weight", "only assistant"),
    (
        "on-system",
        [{"role": "system", "content": "s", "weight": 0}, *_turns(None)],
        "weight-not-assistant",
        "messages[0] (system) has a weight",
        "only assistant",
    ),
    ("all-zero", _turns(0), "nothing-trained", "every assistant message has weight 0", "train nothing"),
    ("all-zero-of-three", _turns(0, 0, 0), "nothing-trained", "every assistant message", "weight 0"),
]


@pytest.mark.parametrize(("case", "messages", "code", "where", "words"), MALFORMED, ids=[c[0] for c in MALFORMED])
def test_a_bad_weight_is_reported_at_its_line(
    tmp_path: Path, case: str, messages: list[dict[str, Any]], code: str, where: str, words: str
) -> None:
    folder = tmp_path / "weights"
    folder.mkdir()
    (folder / "dataset.toml").write_text(SPEC.format(fmt="chat"))
    (folder / "train.jsonl").write_bytes(GOOD + GOOD.replace(b"q0", b"q1") + _line(messages))
    report = validate_local(folder)
    assert not report.ok()
    [problem] = [p for p in report.errors if p.code == code]
    assert (problem.file, problem.line) == ("train.jsonl", 3), report.error_text()
    assert where in problem.message and words in problem.message, problem.message


def test_weights_are_kept_and_a_weight_of_one_is_the_default() -> None:
    data = _line(WEIGHTED) + _line(_turns(None, 1, 0))
    [first, second], problems = parse_jsonl(data, "train.jsonl", "chat")
    assert problems == []
    assert first.untrained == (2,) and second.untrained == (5,)
    assert [m.get("weight") for m in first.as_record()["messages"]] == [None, None, 0, None, None]
    # The same conversation with other weights is another example (duplicates, train/eval overlap).
    [unweighted], _ = parse_jsonl(_line([{k: v for k, v in m.items() if k != "weight"} for m in WEIGHTED]), "t", "chat")
    assert unweighted.messages == first.messages and unweighted.key != first.key


def test_a_weight_in_a_prompt_is_named_and_ignored() -> None:
    pair = {
        "input": {"messages": [*_turns(0), {"role": "user", "content": "next"}]},
        "preferred_output": [{"role": "assistant", "content": "good"}],
        "non_preferred_output": [{"role": "assistant", "content": "bad"}],
    }
    [example], problems = parse_jsonl(json.dumps(pair).encode(), "pairs.jsonl", "preference")
    assert [(p.severity, p.code) for p in problems] == [("warning", "weight-in-prompt")]
    assert "input.messages[1] has a weight" in problems[0].message and example.untrained == ()


# --------------------------------------------------------------------------- the loss, on real tokenizers


@pytest.fixture(scope="module")
def tokenizer() -> Any:
    pytest.importorskip("transformers")
    from trainkit_core.models.tiny_model import build_tokenizer

    return build_tokenizer([render(WEIGHTED, GEMMA3), render(WEIGHTED, GEMMA4)])


def _trained_text(tokenizer: Any, encoded: dict[str, list[int]]) -> str:
    return tokenizer.decode(
        [t for t, label in zip(encoded["input_ids"], encoded["labels"], strict=True) if label != -100]
    )


@pytest.mark.ml
@pytest.mark.parametrize("fmt", [GEMMA3, GEMMA4], ids=lambda f: f.name)
def test_a_weight_0_answer_is_context_and_not_trained(tokenizer: Any, fmt: ChatFormat) -> None:
    # The train job's path: the file's line, the example's record, its row.
    [example], _ = parse_jsonl(_line(WEIGHTED), "train.jsonl", "chat")
    messages = example.as_record()["messages"]
    encoded = encode_for_training(tokenizer, messages, fmt)
    assert _trained_text(tokenizer, encoded) == f"Hello dog.{fmt.end_of_turn}\n"
    whole = tokenizer.decode(encoded["input_ids"])
    assert "Hello cat!" in whole  # still in the conversation the model reads
    assert whole == render(WEIGHTED, fmt)
    # The check the job runs on its tokenizer agrees, with the weight-0 answer left out of what it expects.
    assert check_loss_mask(tokenizer, fmt, messages)["trained_tokens"] == len(
        [x for x in encoded["labels"] if x != -100]
    )
    # Without the weights, both answers train.
    plain = [{k: v for k, v in m.items() if k != "weight"} for m in messages]
    both = _trained_text(tokenizer, encode_for_training(tokenizer, plain, fmt))
    assert both == f"Hello cat!{fmt.end_of_turn}\nHello dog.{fmt.end_of_turn}\n"


@pytest.mark.ml
@pytest.mark.parametrize("fmt", [GEMMA3, GEMMA4], ids=lambda f: f.name)
def test_the_chat_template_renders_a_weight_0_answer_the_same_and_leaves_it_unmarked(
    tokenizer: Any, fmt: ChatFormat
) -> None:
    tokenizer.chat_template = fmt.chat_template
    assert tokenizer.apply_chat_template(WEIGHTED, tokenize=False) == render(WEIGHTED, fmt)
    out = tokenizer.apply_chat_template(WEIGHTED, tokenize=True, return_dict=True, return_assistant_tokens_mask=True)
    marked = [t for t, m in zip(out["input_ids"], out["assistant_masks"], strict=True) if m]
    assert tokenizer.decode(marked) == f"Hello dog.{fmt.end_of_turn}\n"

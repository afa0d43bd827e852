"""Generate the tool-calling demo dataset (shipped in trainkit-core, ``trainkit_core/data/datasets/demo-tools``).

A unit converter with two tools, ``convert_length`` and ``convert_weight``: the user asks
in words ("How many miles is 37 km?"), the assistant calls the right tool with the number
and the units' codes, the tool answers, and the assistant says the result. What the
model must learn is the agent's part: choose the function by the kind of unit, copy the
number, map unit words (kilometres, km, kilometers) to codes, and read the tool's answer
back. The eval split holds values that never occur in train, so a right call there is a
copied number, not a remembered one.

Run ``python scripts/make_tools_dataset.py`` to (re)write the folder; the output is the
same byte for byte on every run (seeded).
"""

from __future__ import annotations

import argparse
import json
import random
from pathlib import Path

LENGTH = {"km": 1000.0, "mi": 1609.344, "m": 1.0, "ft": 0.3048}
WEIGHT = {"kg": 1000.0, "lb": 453.59237, "g": 1.0, "oz": 28.349523125}
WORDS = {
    "km": ("km", "kilometres", "kilometers"),
    "mi": ("miles", "mi"),
    "m": ("metres", "meters", "m"),
    "ft": ("feet", "ft"),
    "kg": ("kg", "kilograms", "kilos"),
    "lb": ("pounds", "lb", "lbs"),
    "g": ("grams", "g"),
    "oz": ("ounces", "oz"),
}
QUESTIONS = (
    "How many {to} is {value} {frm}?",
    "Convert {value} {frm} to {to}.",
    "What is {value} {frm} in {to}?",
    "{value} {frm} in {to}, please.",
    "Please turn {value} {frm} into {to}.",
    "I have {value} {frm}. How much is that in {to}?",
)
SYSTEM = "You are a unit converter. Use the tools for every conversion and say the result in one sentence."


def _tool(name: str, kind: str, units: dict[str, float]) -> dict[str, object]:
    codes = sorted(units)
    return {
        "type": "function",
        "function": {
            "name": name,
            "description": f"Convert a {kind} from one unit to another.",
            "parameters": {
                "type": "object",
                "properties": {
                    "value": {"type": "number", "description": f"The {kind} to convert."},
                    "from_unit": {"type": "string", "enum": codes},
                    "to_unit": {"type": "string", "enum": codes},
                },
                "required": ["value", "from_unit", "to_unit"],
            },
        },
    }


TOOLS = [_tool("convert_length", "length", LENGTH), _tool("convert_weight", "weight", WEIGHT)]


def _number(value: float) -> str:
    """The number as JSON writes it (what the call and the tool's answer hold): 37, 12.5, 166468.4."""
    return json.dumps(int(value) if float(value).is_integer() else value)


def conversation(rng: random.Random, value: float, index: int) -> dict[str, object]:
    name, units = rng.choice((("convert_length", LENGTH), ("convert_weight", WEIGHT)))
    frm, to = rng.sample(sorted(units), 2)
    question = rng.choice(QUESTIONS).format(value=_number(value), frm=rng.choice(WORDS[frm]), to=rng.choice(WORDS[to]))
    result = round(value * units[frm] / units[to], 2)
    arguments = {"value": int(value) if value.is_integer() else value, "from_unit": frm, "to_unit": to}
    call_id = f"call_{index}"
    messages: list[dict[str, object]] = []
    if rng.random() < 0.5:
        messages.append({"role": "system", "content": SYSTEM})
    messages += [
        {"role": "user", "content": question},
        {
            "role": "assistant",
            "content": None,
            "tool_calls": [
                {"id": call_id, "type": "function", "function": {"name": name, "arguments": json.dumps(arguments)}}
            ],
        },
        {"role": "tool", "tool_call_id": call_id, "content": json.dumps({"result": result, "unit": to})},
        {"role": "assistant", "content": f"{_number(value)} {frm} is {_number(result)} {to}."},
    ]
    return {"tools": TOOLS, "messages": messages}


def values(rng: random.Random) -> list[float]:
    """Whole numbers 1-999 and some halves: each value is drawn for train or eval, never both."""
    pool = [float(v) for v in range(1, 1000)] + [v + 0.5 for v in range(1, 100)]
    rng.shuffle(pool)
    return pool


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument(
        "--out", type=Path, default=Path("packages/trainkit-core/src/trainkit_core/data/datasets/demo-tools")
    )
    parser.add_argument("--train", type=int, default=400)
    parser.add_argument("--eval", type=int, default=50)
    args = parser.parse_args()
    rng = random.Random(20261205)
    pool = values(rng)
    held_out, rest = pool[: args.eval], pool[args.eval :]
    train = [conversation(rng, rest[i % len(rest)], i) for i in range(args.train)]
    evals = [conversation(rng, held_out[i], args.train + i) for i in range(args.eval)]
    args.out.mkdir(parents=True, exist_ok=True)
    for name, rows in (("train.jsonl", train), ("eval.jsonl", evals)):
        (args.out / name).write_text("".join(json.dumps(row) + "\n" for row in rows), encoding="utf-8")
    (args.out / "dataset.toml").write_text(
        'name = "demo-tools"\n'
        'description = "A unit converter: the assistant calls convert_length or convert_weight with the number and '
        'unit codes, then says the result (eval holds values never seen in train)."\n'
        'format = "chat"\n'
        'train = ["train.jsonl"]\n'
        'eval = ["eval.jsonl"]\n',
        encoding="utf-8",
    )
    print(f"wrote {len(train)} train and {len(evals)} eval conversations to {args.out}")


if __name__ == "__main__":
    main()

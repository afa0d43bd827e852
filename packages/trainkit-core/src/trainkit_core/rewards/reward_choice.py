"""`--reward NAME[=WEIGHT]`: how a run names its graders (checked in `TrainConfig` and by the registry)."""

from __future__ import annotations

import math
import re

#: A grader's name, and an optional weight.
REWARD_PATTERN = re.compile(r"([A-Za-z_][A-Za-z0-9_.-]{0,99})(?:=(.+))?")


def parse_reward(text: str) -> tuple[str, float]:
    """(name, weight) of a ``NAME[=WEIGHT]`` grader; `ValueError` saying what is wrong."""
    match = REWARD_PATTERN.fullmatch(text.strip())
    if match is None:
        raise ValueError(f"reward {text!r} is not NAME or NAME=WEIGHT")
    name, weight_text = match.group(1), match.group(2)
    if weight_text is None:
        return name, 1.0
    try:
        weight = float(weight_text)
    except ValueError:
        raise ValueError(f"reward {text!r}: weight {weight_text!r} is not a number") from None
    if not math.isfinite(weight):
        raise ValueError(f"reward {text!r}: weight must be a finite number")
    return name, weight

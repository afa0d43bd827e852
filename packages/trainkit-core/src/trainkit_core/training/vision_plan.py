"""What the plan needs to know about a dataset's images: how many each example has, and its text alone.

Why apart from `trainkit_core.training.plan`: the plan counts text tokens with the
text path's own encoder; an image's tokens come from the processor, whose count per
image is a property of the model (`Preset.image_tokens`), not of the picture (the
processor resizes every picture to its own size).
"""

from __future__ import annotations

from typing import Any


def image_counts(records: list[dict[str, Any]]) -> list[int]:
    """Images in each record (OpenAI-form messages)."""
    return [
        sum(
            1
            for m in record["messages"]
            if isinstance(m["content"], list)
            for part in m["content"]
            if part.get("type") == "image_url"
        )
        for record in records
    ]


def text_only(records: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The records with each list content reduced to its text parts (joined by newlines)."""
    return [
        {
            "messages": [
                {
                    "role": m["role"],
                    "content": m["content"]
                    if isinstance(m["content"], str)
                    else "\n".join(p["text"] for p in m["content"] if p.get("type") == "text"),
                }
                for m in record["messages"]
            ]
        }
        for record in records
    ]

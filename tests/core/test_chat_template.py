"""The Jinja template saved with every model renders exactly what trainkit trains on.

transformers' `apply_chat_template` against `chat_format.render` (and `render_prompt`),
on the tiny model's tokenizer, for both formats: plain conversations, weights, tool
calls and answers, thinking kept and dropped, and prompts that continue after a tool's
answer. The `{% generation %}` marks cover exactly the trained pieces.
"""

from __future__ import annotations

import json
from typing import Any

import pytest
from test_chat_format import CALLING, TOOLS

from trainkit_core.errors import UsageError
from trainkit_core.models.chat_format import GEMMA3, GEMMA4, PROBE, ChatFormat, render, render_prompt, segments

pytestmark = pytest.mark.ml


def _objects(messages: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Calls with their arguments as objects: the form both renderers take (`Example.as_record`'s)."""
    out = []
    for m in messages:
        if m.get("tool_calls"):
            calls = [
                {**c, "function": {**c["function"], "arguments": json.loads(c["function"]["arguments"])}}
                for c in m["tool_calls"]
            ]
            m = {**m, "tool_calls": calls}
        out.append(m)
    return out


TWO_ANSWERS = [
    {"role": "system", "content": "Convert."},
    {"role": "user", "content": "1 and 2 km?"},
    {
        "role": "assistant",
        "content": "Both at once.",
        "tool_calls": [
            {
                "id": f"c{i}",
                "type": "function",
                "function": {"name": "convert", "arguments": {"value": i, "unit": "km", "exact": i == 1, "note": None}},
            }
            for i in (1, 2)
        ],
        "weight": 0,
    },
    {"role": "tool", "tool_call_id": "c1", "content": "0.62"},
    {"role": "tool", "tool_call_id": "c2", "content": '{"miles": 1.24}'},
    {"role": "assistant", "content": "0.62 and 1.24 miles."},
    {"role": "user", "content": "Thanks."},
    {"role": "assistant", "content": "You are welcome."},
]
CASES = {
    "plain": (PROBE, None),
    "calling": (_objects(CALLING), TOOLS),
    "two-answers-weight-0": (TWO_ANSWERS, TOOLS),
}


@pytest.fixture(scope="module")
def tokenizer() -> Any:
    from trainkit_core.models.tiny_model import build_tokenizer

    return build_tokenizer(["hello"])


def _keeps(fmt: ChatFormat) -> list[bool]:
    return [True, False] if fmt.native_tools else [False]


@pytest.mark.parametrize("case", list(CASES))
@pytest.mark.parametrize("fmt", [GEMMA3, GEMMA4], ids=lambda f: f.name)
def test_the_template_renders_what_trainkit_trains_on_and_marks_the_same_pieces(
    tokenizer: Any, fmt: ChatFormat, case: str
) -> None:
    messages, tools = CASES[case]
    tokenizer.chat_template = fmt.chat_template
    for keep in _keeps(fmt):
        text = tokenizer.apply_chat_template(messages, tools=tools, tokenize=False, keep_thinking=keep)
        assert text == render(messages, fmt, tools=tools, keep_thinking=keep)
        out = tokenizer.apply_chat_template(
            messages,
            tools=tools,
            tokenize=True,
            return_dict=True,
            return_assistant_tokens_mask=True,
            keep_thinking=keep,
        )
        marked = [t for t, m in zip(out["input_ids"], out["assistant_masks"], strict=True) if m]
        trained = "".join(t for t, is_trained in segments(messages, fmt, tools=tools, keep_thinking=keep) if is_trained)
        assert tokenizer.decode(marked) == trained


@pytest.mark.parametrize("fmt", [GEMMA3, GEMMA4], ids=lambda f: f.name)
@pytest.mark.parametrize("upto", [2, 5, 7])
def test_the_prompt_matches_render_prompt_after_a_user_or_a_tools_answer(
    tokenizer: Any, fmt: ChatFormat, upto: int
) -> None:
    tokenizer.chat_template = fmt.chat_template
    messages = TWO_ANSWERS[:upto]  # after the user, after the tools' answers, after a later user turn
    prompt = tokenizer.apply_chat_template(messages, tools=TOOLS, tokenize=False, add_generation_prompt=True)
    assert prompt == render_prompt(messages, fmt, tools=TOOLS)


def test_thinking_asked_for_at_inference_and_earlier_thinking_left_out(tokenizer: Any) -> None:
    tokenizer.chat_template = GEMMA4.chat_template
    messages = _objects(CALLING)[:4]
    prompt = tokenizer.apply_chat_template(
        messages, tools=TOOLS, tokenize=False, add_generation_prompt=True, enable_thinking=True
    )
    assert prompt == render_prompt(messages, GEMMA4, tools=TOOLS, think=True)
    assert "<|think|>" in prompt and "Call convert." not in prompt


def test_thinking_on_gemma3_is_refused_by_trainkit_and_left_out_by_the_template(tokenizer: Any) -> None:
    """The template never raises (llama.cpp probes templates with conversations of its own)."""
    tokenizer.chat_template = GEMMA3.chat_template
    text = tokenizer.apply_chat_template(_objects(CALLING), tools=TOOLS, tokenize=False)
    assert text == render(_objects(CALLING), GEMMA3, tools=TOOLS, keep_thinking=False)
    with pytest.raises(UsageError, match="gemma3 chat format has no place"):
        render(_objects(CALLING), GEMMA3, tools=TOOLS)


@pytest.mark.parametrize("fmt", [GEMMA3, GEMMA4], ids=lambda f: f.name)
def test_plain_jinja_renders_both_templates_as_trainkit_does(fmt: ChatFormat) -> None:
    """Outside transformers, as a server would: the saved template (its generation marks removed)
    renders a tool conversation, and the GGUF's plain template a plain one, as trainkit does."""
    import re

    import jinja2
    from jinja2.sandbox import ImmutableSandboxedEnvironment

    from trainkit_core.export.gguf.writer import plain_chat_template

    def raise_exception(message: str) -> None:
        raise jinja2.TemplateError(message)

    env = ImmutableSandboxedEnvironment(trim_blocks=True, lstrip_blocks=True)
    env.filters["tojson"] = lambda x: json.dumps(x, ensure_ascii=False)
    saved = re.sub(r"\{%-?\s*(end)?generation\s*-?%\}", "", fmt.chat_template)
    messages, tools = CASES["two-answers-weight-0"]
    text = env.from_string(saved).render(messages=messages, tools=tools, bos_token="<bos>")
    assert text == render(messages, fmt, tools=tools)
    gguf = env.from_string(plain_chat_template(fmt))
    assert gguf.render(messages=PROBE, bos_token="<bos>", raise_exception=raise_exception) == render(PROBE, fmt)
    prompt = gguf.render(messages=PROBE[:4], bos_token="<bos>", add_generation_prompt=True)
    assert prompt == render_prompt(PROBE[:4], fmt)

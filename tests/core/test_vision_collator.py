"""The vision collator on the real processors of both twins: what the loss sees, token by token."""

from __future__ import annotations

import base64
import io
from pathlib import Path
from typing import Any

import pytest

pytestmark = pytest.mark.ml

TWINS = {"trainkit/tiny-gemma3mm": "gemma3", "trainkit/tiny-gemma4": "gemma4"}


def png_url(color: str, size: tuple[int, int]) -> str:
    from PIL import Image

    buffer = io.BytesIO()
    Image.new("RGB", size, color).save(buffer, format="PNG")
    return "data:image/png;base64," + base64.b64encode(buffer.getvalue()).decode()


def image_part(color: str, size: tuple[int, int] = (40, 30)) -> dict[str, Any]:
    return {"type": "image_url", "image_url": {"url": png_url(color, size)}}


EXAMPLES = [
    {  # system folded in, an image, two assistant turns
        "messages": [
            {"role": "system", "content": "Answer briefly."},
            {"role": "user", "content": [{"type": "text", "text": "What is in the picture?"}, image_part("red")]},
            {"role": "assistant", "content": "a red square"},
            {"role": "user", "content": "And its colour?"},
            {"role": "assistant", "content": "red"},
        ]
    },
    {  # two images of other sizes, image first
        "messages": [
            {
                "role": "user",
                "content": [image_part("blue", (90, 20)), {"type": "text", "text": "and"}, image_part("green")],
            },
            {"role": "assistant", "content": "blue, then green"},
        ]
    },
    {"messages": [{"role": "user", "content": "no picture here"}, {"role": "assistant", "content": "ok"}]},
]


@pytest.fixture(scope="module", params=list(TWINS), ids=list(TWINS.values()))
def twin(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> tuple[str, Path, Any]:
    from trainkit_core.models.processors import load_processor
    from trainkit_core.models.twins import ensure_twin_base

    folder = ensure_twin_base(request.param, tmp_path_factory.mktemp("hf"))
    return request.param, folder, load_processor(folder)


def test_only_assistant_text_is_trained_on_the_real_processor_output(twin: tuple[str, Path, Any]) -> None:
    from trainkit_core.datasets.vision_collator import IGNORE, VisionCollator
    from trainkit_core.models.chat_format import get_format

    base, _, processor = twin
    fmt = get_format(TWINS[base])
    batch = VisionCollator(processor, fmt)(EXAMPLES)
    tokenizer = processor.tokenizer
    image_ids = {
        tokenizer.convert_tokens_to_ids(t) for t in (tokenizer.boi_token, tokenizer.eoi_token, tokenizer.image_token)
    }
    types = batch.get("token_type_ids", batch.get("mm_token_type_ids"))
    assert types is not None, f"{type(processor).__name__} gave no token type ids; the model needs them in training"
    for row, example in enumerate(EXAMPLES):
        ids, labels = batch["input_ids"][row].tolist(), batch["labels"][row].tolist()
        mask, kinds = batch["attention_mask"][row].tolist(), types[row].tolist()
        trained = [i for i, label in enumerate(labels) if label != IGNORE]
        assert all(labels[i] == ids[i] for i in trained)
        # no image token, no padding is trained; the processor marks every image token
        assert not [i for i in trained if ids[i] in image_ids or kinds[i] != 0 or mask[i] == 0]
        image_tokens = sum(1 for t in ids if t == tokenizer.convert_tokens_to_ids(tokenizer.image_token))
        assert sum(1 for k in kinds if k != 0) == image_tokens
        assert (image_tokens > 0) == (row < 2)
        # every assistant text token, and nothing of the prompt: the trained tokens are the answers exactly
        answers = [m["content"] for m in example["messages"] if m["role"] == "assistant"]
        expected = "".join(a + fmt.end_of_turn + "\n" for a in answers)
        assert tokenizer.decode([ids[i] for i in trained]) == expected
        # and each answer is a contiguous span ending in its end-of-turn and newline
        eot = tokenizer.convert_tokens_to_ids(fmt.end_of_turn)
        assert sum(1 for i in trained if ids[i] == eot) == len(answers)
    assert int(batch["attention_mask"][2].sum()) < batch["input_ids"].shape[1]  # the text-only row is padded


def test_a_mask_that_would_train_image_tokens_is_caught(twin: tuple[str, Path, Any]) -> None:
    from trainkit_core.datasets.vision_collator import check_vision_mask
    from trainkit_core.errors import JobError
    from trainkit_core.models.chat_format import get_format

    base, _, processor = twin
    fmt = get_format(TWINS[base])
    summary = check_vision_mask(processor, fmt, EXAMPLES[0])
    assert summary["trained_tokens"] < summary["total_tokens"]
    other = get_format("gemma4" if fmt.name == "gemma3" else "gemma3")
    with pytest.raises(JobError, match="turn markers"):
        check_vision_mask(processor, other, EXAMPLES[0])  # the wrong format's markers: no turn is found


def test_a_weight_0_answer_beside_a_picture_is_context_only(twin: tuple[str, Path, Any]) -> None:
    from trainkit_core.datasets.vision_collator import IGNORE, VisionCollator, check_vision_mask
    from trainkit_core.models.chat_format import get_format

    base, _, processor = twin
    fmt = get_format(TWINS[base])
    example = {"messages": [dict(m) for m in EXAMPLES[0]["messages"]]}
    example["messages"][2]["weight"] = 0  # "a red square": read, not learnt
    batch = VisionCollator(processor, fmt)([example])
    ids, labels = batch["input_ids"][0].tolist(), batch["labels"][0].tolist()
    tokenizer = processor.tokenizer
    assert tokenizer.decode([t for t, label in zip(ids, labels, strict=True) if label != IGNORE]) == (
        f"red{fmt.end_of_turn}\n"
    )
    assert "a red square" in tokenizer.decode(ids)
    assert check_vision_mask(processor, fmt, example)["trained_tokens"] == sum(1 for x in labels if x != IGNORE)


COLOUR_TOOL = {
    "type": "function",
    "function": {
        "name": "colour_name",
        "description": "The name of a colour given as RGB.",
        "parameters": {"type": "object", "properties": {"rgb": {"type": "string"}}, "required": ["rgb"]},
    },
}


def _tools_example(thinking: bool) -> dict[str, Any]:
    """A picture, a call to a declared tool, its answer, then the final answer (with thinking on Gemma 4)."""
    call = {"id": "c1", "type": "function", "function": {"name": "colour_name", "arguments": '{"rgb": "255,0,0"}'}}
    first: dict[str, Any] = {"role": "assistant", "content": "", "tool_calls": [call]}
    if thinking:
        first["reasoning_content"] = "The square looks red; ask the tool."
    return {
        "tools": [COLOUR_TOOL],
        "messages": [
            {"role": "system", "content": "Name colours exactly."},
            {"role": "user", "content": [{"type": "text", "text": "Which colour is this?"}, image_part("red")]},
            first,
            {"role": "tool", "tool_call_id": "c1", "content": "crimson-ish red"},
            {"role": "assistant", "content": "It is red."},
        ],
    }


def test_pictures_with_tool_calls_train_the_calls_and_answers_only(twin: tuple[str, Path, Any]) -> None:
    """The text path's rendering with a picture in it: the calls and answers (and Gemma 4's thinking) are
    trained; the tool's answer, the declarations, the picture and the prompt are not."""
    from trainkit_core.datasets.vision_collator import (
        IGNORE,
        VisionCollator,
        check_vision_mask,
        image_placeholder,
        render_with_images,
    )
    from trainkit_core.models.chat_format import get_format

    base, _, processor = twin
    fmt = get_format(TWINS[base])
    example = _tools_example(thinking=fmt.native_tools)
    batch = VisionCollator(processor, fmt)([example, EXAMPLES[1]])  # padded beside a conversation of two pictures
    tokenizer = processor.tokenizer
    ids, labels = batch["input_ids"][0].tolist(), batch["labels"][0].tolist()
    trained = tokenizer.decode([t for t, label in zip(ids, labels, strict=True) if label != IGNORE])
    rendered = render_with_images(example["messages"], fmt, image_placeholder(processor), tools=example["tools"])
    assert len(rendered.images) == 1 and not rendered.audio
    assert trained == "".join(text for text, learnt in rendered.pieces if learnt)
    assert "255,0,0" in trained and "It is red." in trained
    assert "crimson-ish" not in trained and "colour_name" in tokenizer.decode(ids)  # declared, called, not answered
    assert ("The square looks red" in trained) == fmt.native_tools
    assert check_vision_mask(processor, fmt, example)["trained_tokens"] == sum(1 for x in labels if x != IGNORE)
    # The other row still trains its own answer, whatever the padding.
    row = zip(batch["input_ids"][1].tolist(), batch["labels"][1].tolist(), strict=True)
    assert tokenizer.decode([t for t, label in row if label != IGNORE]) == f"blue, then green{fmt.end_of_turn}\n"


def test_a_prompt_with_a_picture_declares_the_requests_tools(twin: tuple[str, Path, Any]) -> None:
    """Inference with a picture renders its prompt as the text path does: the tools declared, the model's turn open."""
    from types import SimpleNamespace

    from trainkit_core.inference.generation import image_inputs
    from trainkit_core.models.chat_format import get_format

    base, _, processor = twin
    fmt = get_format(TWINS[base])
    loaded = SimpleNamespace(processor=processor, fmt=fmt, device="cpu")
    turns = _tools_example(thinking=False)["messages"][:2]
    with_tools = processor.tokenizer.decode(image_inputs(loaded, turns, tools=[COLOUR_TOOL])["input_ids"][0])
    without = processor.tokenizer.decode(image_inputs(loaded, turns)["input_ids"][0])
    assert "colour_name" in with_tools and "colour_name" not in without
    assert with_tools.endswith(fmt.generation_prompt) and without.endswith(fmt.generation_prompt)


def wav_part(frequency: float, seconds: float) -> dict[str, Any]:
    import numpy as np
    import soundfile

    t = np.arange(int(seconds * 16_000)) / 16_000
    buffer = io.BytesIO()
    soundfile.write(buffer, (0.3 * np.sin(2 * np.pi * frequency * t)).astype(np.float32), 16_000, format="WAV")
    data = base64.b64encode(buffer.getvalue()).decode()
    return {"type": "input_audio", "input_audio": {"data": data, "format": "wav"}}


@pytest.fixture(scope="module")
def audio_twin(tmp_path_factory: pytest.TempPathFactory) -> Any:
    from trainkit_core.models.processors import load_processor
    from trainkit_core.models.twins import ensure_twin_base

    folder = ensure_twin_base("trainkit/tiny-gemma4-e", tmp_path_factory.mktemp("hf"))
    processor = load_processor(folder)
    assert processor.feature_extractor is not None, "the E twin's processor lost its audio feature extractor"
    return processor


def test_sounds_and_pictures_are_never_trained_and_their_tokens_follow_their_length(audio_twin: Any) -> None:
    """The E twin's real processor: a sound's soft tokens (one per 40 ms) sit between its markers, untrained,
    beside a picture's; only the answers train, in a batch padded beside a conversation of another length."""
    from trainkit_core.datasets.vision_collator import IGNORE, VisionCollator, check_vision_mask
    from trainkit_core.models.chat_format import GEMMA4

    processor = audio_twin
    example = {
        "messages": [
            {"role": "user", "content": [wav_part(440.0, 1.0), {"type": "text", "text": "What do you hear?"}]},
            {"role": "assistant", "content": "one middle beep"},
            {"role": "user", "content": [image_part("red"), wav_part(880.0, 0.4), {"type": "text", "text": "And?"}]},
            {"role": "assistant", "content": "a red square and a high beep"},
        ]
    }
    batch = VisionCollator(processor, GEMMA4)([example, EXAMPLES[2]])
    assert {"input_features", "input_features_mask", "pixel_values"} <= set(batch)
    tokenizer = processor.tokenizer
    ids, labels = batch["input_ids"][0].tolist(), batch["labels"][0].tolist()
    audio_id = tokenizer.convert_tokens_to_ids(processor.audio_token)
    soft = [i for i, token in enumerate(ids) if token == audio_id]
    assert len(soft) in (35, 36)  # 1.0 s and 0.4 s: 25 and 10 tokens of 40 ms (the encoder's rounding: one more)
    assert all(labels[i] == IGNORE for i in soft)
    trained = tokenizer.decode([t for t, label in zip(ids, labels, strict=True) if label != IGNORE])
    assert trained.replace("\n", "") == "one middle beep<turn|>a red square and a high beep<turn|>", trained
    assert check_vision_mask(processor, GEMMA4, example)["trained_tokens"] == sum(x != IGNORE for x in labels)
    other = [
        t
        for t, label in zip(batch["input_ids"][1].tolist(), batch["labels"][1].tolist(), strict=True)
        if label != IGNORE
    ]
    assert tokenizer.decode(other).strip() == "ok<turn|>"


def test_a_sound_on_a_model_without_an_audio_tower_is_refused(twin: tuple[str, Path, Any]) -> None:
    from trainkit_core.datasets.vision_collator import VisionCollator
    from trainkit_core.errors import UsageError
    from trainkit_core.models.chat_format import get_format

    base, _, processor = twin
    example = {"messages": [{"role": "user", "content": [wav_part(440.0, 0.3)]}, {"role": "assistant", "content": "a"}]}
    with pytest.raises(UsageError, match="has no audio tower"):
        VisionCollator(processor, get_format(TWINS[base]))([example])

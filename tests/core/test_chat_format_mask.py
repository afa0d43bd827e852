"""The loss mask on a real tokenizer, for both chat formats: answers and end-of-turn in, prompt out."""

from __future__ import annotations

import pytest

from trainkit_core.errors import JobError
from trainkit_core.models.chat_format import (
    GEMMA3,
    GEMMA4,
    PROBE,
    ChatFormat,
    check_loss_mask,
    encode_for_training,
    render,
)

pytestmark = pytest.mark.ml


@pytest.fixture(scope="module")
def tokenizer():  # type: ignore[no-untyped-def]
    from trainkit_core.models.tiny_model import build_tokenizer

    return build_tokenizer([render(PROBE, GEMMA3), render(PROBE, GEMMA4)])


@pytest.mark.parametrize("fmt", [GEMMA3, GEMMA4], ids=lambda f: f.name)
def test_mask_covers_answers_and_end_of_turn_and_nothing_of_the_prompt(tokenizer, fmt: ChatFormat) -> None:  # type: ignore[no-untyped-def]
    encoded = encode_for_training(tokenizer, PROBE, fmt)
    trained = [t for t, label in zip(encoded["input_ids"], encoded["labels"], strict=True) if label != -100]
    prompt = [t for t, label in zip(encoded["input_ids"], encoded["labels"], strict=True) if label == -100]
    assert tokenizer.decode(trained) == f"Hello cat!{fmt.end_of_turn}\nHello dog.{fmt.end_of_turn}\n"
    eot = tokenizer.convert_tokens_to_ids(fmt.end_of_turn)
    assert trained.count(eot) == 2
    prompt_text = tokenizer.decode(prompt)
    assert "Hello cat!" not in prompt_text and "Hello dog." not in prompt_text
    for piece in ("You answer briefly.", "Say hello to the cat.", "And the dog?", f"{fmt.turn_start}model\n"):
        assert piece in prompt_text
    assert prompt_text.count(fmt.end_of_turn) == 2  # the two user turns' end markers are not trained
    assert check_loss_mask(tokenizer, fmt)["trained_tokens"] == len(trained)


@pytest.mark.parametrize("fmt", [GEMMA3, GEMMA4], ids=lambda f: f.name)
def test_chat_template_renders_the_same_text_and_marks_the_same_answer(tokenizer, fmt: ChatFormat) -> None:  # type: ignore[no-untyped-def]
    tokenizer.chat_template = fmt.chat_template
    assert tokenizer.apply_chat_template(PROBE, tokenize=False) == render(PROBE, fmt)
    out = tokenizer.apply_chat_template(PROBE, tokenize=True, return_dict=True, return_assistant_tokens_mask=True)
    marked = [t for t, m in zip(out["input_ids"], out["assistant_masks"], strict=True) if m]
    assert tokenizer.decode(marked) == f"Hello cat!{fmt.end_of_turn}\nHello dog.{fmt.end_of_turn}\n"
    prompt = tokenizer.apply_chat_template(PROBE[:2], tokenize=False, add_generation_prompt=True)
    assert prompt.endswith(f"{fmt.turn_start}model\n")


def test_a_tokenizer_without_the_end_of_turn_token_is_refused() -> None:
    from tokenizers import Tokenizer, models, pre_tokenizers, trainers
    from transformers import PreTrainedTokenizerFast

    raw = Tokenizer(models.BPE(unk_token="<unk>"))
    raw.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    raw.train_from_iterator(["hello world"], trainers.BpeTrainer(vocab_size=300, special_tokens=["<unk>", "<bos>"]))
    plain = PreTrainedTokenizerFast(tokenizer_object=raw, unk_token="<unk>", bos_token="<bos>")
    with pytest.raises(JobError, match="no '<end_of_turn>' token"):
        check_loss_mask(plain, GEMMA3)

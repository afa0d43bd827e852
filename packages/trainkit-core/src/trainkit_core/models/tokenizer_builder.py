"""The one recipe for the tokenizers trainkit builds itself: the `tiny` model's and the twins'.

A byte-level BPE trained on a given corpus, with Gemma's special tokens and a chat
format's template, so that the local models tokenize the way the real ones are laid out
(turn markers as single tokens, any byte representable). Both builders share it so
they cannot drift apart. The build is deterministic: the same corpus and tokens give
the same files, which the cached builds rely on.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Any

#: The first four special tokens every tokenizer here starts with, in this order.
BASE_TOKENS = ("<pad>", "<eos>", "<bos>", "<unk>")


def build_bpe_tokenizer(
    corpus: Iterable[str],
    *,
    special_tokens: Sequence[str],
    vocab_size: int,
    chat_template: str,
    named_tokens: Mapping[str, str] | None = None,
    split_digits: bool = False,
) -> Any:
    """A `PreTrainedTokenizerFast` trained on `corpus`; `special_tokens` start with `BASE_TOKENS`.

    `named_tokens` become attributes of the tokenizer (``image_token``, ``boi_token``: what
    a processor looks up by name). `split_digits` makes every digit a token of its own, as
    Gemma's tokenizer does: a number never seen in training is then made of tokens that
    were, so a model can copy it (a tool call's arguments) digit by digit.
    """
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
    from transformers import PreTrainedTokenizerFast

    if tuple(special_tokens[: len(BASE_TOKENS)]) != BASE_TOKENS:
        raise ValueError(f"special tokens must start with {BASE_TOKENS}")
    tok = Tokenizer(models.BPE(unk_token="<unk>"))
    byte_level = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.pre_tokenizer = (  # type: ignore[assignment]
        pre_tokenizers.Sequence([pre_tokenizers.Digits(individual_digits=True), byte_level])
        if split_digits
        else byte_level
    )
    tok.decoder = decoders.ByteLevel()  # type: ignore[assignment]
    trainer = trainers.BpeTrainer(
        vocab_size=vocab_size,
        special_tokens=list(special_tokens),
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
        show_progress=False,
    )
    tok.train_from_iterator(list(corpus), trainer=trainer)
    named: dict[str, Any] = {"extra_special_tokens": dict(named_tokens)} if named_tokens else {}
    return PreTrainedTokenizerFast(
        tokenizer_object=tok,
        bos_token="<bos>",
        eos_token="<eos>",
        pad_token="<pad>",
        unk_token="<unk>",
        **named,
        additional_special_tokens=list(special_tokens[len(BASE_TOKENS) :]),
        chat_template=chat_template,
        padding_side="right",
    )

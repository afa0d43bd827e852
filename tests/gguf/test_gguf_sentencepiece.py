"""GGUF export of a Gemma 3 with a SentencePiece-style vocabulary (the real checkpoints'), run in llama.cpp.

No checkpoint is downloaded: a tokenizer shaped like Gemma 3's `tokenizer.json` is built here
(BPE with byte fallback, ``<0xNN>`` byte pieces, spaces replaced by ``▁`` with no prefix space,
merges listing every split of a piece, ranked by the piece, as transformers' Gemma converter
writes them), trained with `tokenizers` on the demo dataset's text. It sits on the tiny
``Gemma3ForCausalLM`` (seeded, untrained) behind a zero LoRA adapter, so that the answers are
those of trainkit's own `generate` (what `trainkit infer` runs). The file is written by
`write_gguf` and checked by the export job's own check in llama.cpp: the prompts' token ids
equal HF's, the greedy answers equal, the file's chat template renders the same prompt.
Texts that go through byte fallback (accents, emoji), digits and leading spaces are tokenized
by both and must agree.
"""

from __future__ import annotations

import json
import types
from pathlib import Path
from typing import Any

import pytest
from cli_env import REPO

gguf = pytest.importorskip("gguf")
xllamacpp = pytest.importorskip("xllamacpp")

pytestmark = [pytest.mark.ml, pytest.mark.gguf, pytest.mark.timeout(600)]

SPACE = "\u2581"
SPECIALS = ("<pad>", "<eos>", "<bos>", "<unk>", "<start_of_turn>", "<end_of_turn>")
#: An added token that is not special, as Gemma's tokenizer.json has many: llama.cpp's user-defined type.
USER_DEFINED = "<unused0>"
#: Texts whose ids llama.cpp must give as HF does: leading and repeated spaces, digits, byte fallback.
HARD_TEXTS = (
    " Opposites: soft win",
    "  two  spaces\tand a tab\n\nnew lines",
    "Numbers 12345 and 3.14",
    "Caf\u00e9 na\u00efve \u00fcber \u00c5ngstr\u00f6m",
    "emoji \U0001f600\U0001f680 and \u4e2d\u6587",
    "<start_of_turn>user\nhot cold<end_of_turn>\n<start_of_turn>model\n",
    f"before{USER_DEFINED} after {USER_DEFINED}",
)


def _texts() -> list[str]:
    rows = [json.loads(line) for line in (REPO / "datasets/demo/train.jsonl").open()][:400]
    return [m["content"] for row in rows for m in row["messages"]] + ["user\nmodel\n"]


def _gemma_style_tokenizer(texts: list[str], size: int) -> Any:
    """A SentencePiece-style BPE `PreTrainedTokenizerFast` laid out as Gemma 3's `tokenizer.json`."""
    from tokenizers import AddedToken, Tokenizer, decoders, models, normalizers, pre_tokenizers, trainers
    from transformers import PreTrainedTokenizerFast

    from trainkit_core.models.chat_format import GEMMA3

    learner = Tokenizer(models.BPE(unk_token="<unk>", byte_fallback=True))
    learner.normalizer = normalizers.Replace(" ", SPACE)
    learner.pre_tokenizer = pre_tokenizers.Split(SPACE, "merged_with_next")  # pieces stay inside words to learn
    n_pieces = size - len(SPECIALS) - 1 - 256
    learner.train_from_iterator(texts, trainers.BpeTrainer(vocab_size=n_pieces, show_progress=False))
    learned = sorted(learner.get_vocab().items(), key=lambda item: item[1])
    pieces = [*SPECIALS, USER_DEFINED, *(f"<0x{b:02X}>" for b in range(256)), *(p for p, _ in learned)]
    vocab = {piece: i for i, piece in enumerate(pieces)}
    # Every split of a piece into two pieces is a merge, ranked by the piece (SentencePiece's score order).
    merges = [
        (piece[:k], piece[k:])
        for piece in pieces[len(SPECIALS) + 1 + 256 :]
        for k in range(1, len(piece))
        if piece[:k] in vocab and piece[k:] in vocab
    ]
    tok = Tokenizer(models.BPE(vocab, merges, unk_token="<unk>", byte_fallback=True, fuse_unk=True))
    tok.normalizer = normalizers.Replace(" ", SPACE)
    tok.pre_tokenizer = pre_tokenizers.Split(" ", "merged_with_previous")
    tok.decoder = decoders.Sequence([decoders.Replace(SPACE, " "), decoders.ByteFallback(), decoders.Fuse()])
    tok.add_tokens([AddedToken(USER_DEFINED, special=False, normalized=False)])
    return PreTrainedTokenizerFast(
        tokenizer_object=tok,
        bos_token="<bos>",
        eos_token="<eos>",
        pad_token="<pad>",
        unk_token="<unk>",
        additional_special_tokens=list(SPECIALS[4:]),
        chat_template=GEMMA3.chat_template,
    )


def _pieces(tokenizer: Any, text: str) -> list[str]:
    return tokenizer.convert_ids_to_tokens(tokenizer(text, add_special_tokens=False)["input_ids"])  # type: ignore[no-any-return]


def _order_sensitive_texts(tokenizer: Any, count: int = 3) -> list[str]:
    """Three-character texts "abc" where "ab" and "bc" are pieces, "abc" is not, and HF joins "bc"
    first: only the merges' order gives HF's pieces (joining the leftmost pair first, or the reverse
    order, gives "ab" "c")."""
    vocab = tokenizer.get_vocab()
    chars = sorted((p for p in vocab if len(p) == 1 and p.isalpha()), key=vocab.__getitem__)  # a fixed order
    found = []
    for a in chars:
        for b in chars:
            for c in chars:
                candidate = a + b in vocab and b + c in vocab and a + b + c not in vocab and len(found) < count
                if candidate and _pieces(tokenizer, a + b + c) == [a, b + c]:
                    found.append(a + b + c)
    assert len(found) == count, found
    return found


@pytest.fixture(scope="module")
def merged(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Any, Any]:
    """A merged Gemma 3 folder with the SentencePiece-style tokenizer, and its model behind a zero adapter."""
    import torch
    from peft import LoraConfig, get_peft_model

    from trainkit_core.models.tiny_model import build_model

    folder = tmp_path_factory.mktemp("merged")
    tokenizer = _gemma_style_tokenizer(_texts(), size=640)
    model = build_model(tokenizer, seed=0, vocab_size=len(tokenizer))
    # Untrained, the model would pick byte pieces at random, and a random run of bytes is not UTF-8,
    # which HF and llama.cpp decode differently (HF writes U+FFFD for every byte of the run, llama.cpp
    # keeps its valid bytes). Zero output rows keep bytes out of greedy answers; prompts still use them.
    byte_ids = tokenizer.convert_tokens_to_ids([f"<0x{b:02X}>" for b in range(256)])
    with torch.no_grad():
        model.lm_head.weight[byte_ids] = 0.0
    model.save_pretrained(folder)
    tokenizer.save_pretrained(folder)
    peft_model = get_peft_model(model, LoraConfig(r=2, target_modules=["q_proj"]))  # B = 0: answers unchanged
    peft_model.eval()
    return folder, tokenizer, peft_model


def test_the_tokenizer_is_shaped_as_gemma_3s(merged: tuple[Path, Any, Any]) -> None:
    folder, tokenizer, _ = merged
    data = json.loads((folder / "tokenizer.json").read_text())
    assert data["model"]["type"] == "BPE" and data["model"]["byte_fallback"]
    assert data["normalizer"] == {"type": "Replace", "pattern": {"String": " "}, "content": SPACE}
    assert [d["type"] for d in data["decoder"]["decoders"]] == ["Replace", "ByteFallback", "Fuse"]
    ids = tokenizer("Caf\u00e9 \U0001f600", add_special_tokens=False)["input_ids"]
    pieces = tokenizer.convert_ids_to_tokens(ids)
    assert "<0xF0>" in pieces and any(p.startswith(SPACE) for p in pieces)  # byte fallback and ▁ pieces
    assert tokenizer.decode(ids) == "Caf\u00e9 \U0001f600"
    assert _pieces(tokenizer, f"a{USER_DEFINED}b") == ["a", USER_DEFINED, "b"]
    added = {t["content"]: t for t in data["added_tokens"]}
    assert not added[USER_DEFINED]["special"] and added["<end_of_turn>"]["special"]


def test_a_sentencepiece_style_gemma_exports_and_answers_as_infer(
    merged: tuple[Path, Any, Any], tmp_path: Path
) -> None:
    from trainkit_core.export.gguf.check import compare, generate_with_llama_cpp
    from trainkit_core.export.gguf.writer import write_gguf
    from trainkit_core.inference.generation import generate
    from trainkit_core.inference.loading import LoadedModel
    from trainkit_core.inference.request import GenerateRequest
    from trainkit_core.models.chat_format import GEMMA3, render_prompt

    folder, tokenizer, peft_model = merged
    dest = tmp_path / "model-f32.gguf"
    info = write_gguf(folder, dest, quant="f32", fmt=GEMMA3, name="spm-gemma")
    assert info["end_of_turn_id"] == tokenizer.convert_tokens_to_ids(GEMMA3.end_of_turn)

    fields = {name: field.contents() for name, field in gguf.GGUFReader(str(dest)).fields.items()}
    assert fields["tokenizer.ggml.model"] == "llama" and fields["tokenizer.ggml.add_space_prefix"] is False
    assert "tokenizer.ggml.merges" not in fields
    kinds = dict(zip(fields["tokenizer.ggml.tokens"], fields["tokenizer.ggml.token_type"], strict=True))
    assert kinds["<0x41>"] == gguf.TokenType.BYTE and kinds["<unk>"] == gguf.TokenType.UNKNOWN
    assert kinds[USER_DEFINED] == gguf.TokenType.USER_DEFINED
    assert kinds["<end_of_turn>"] == gguf.TokenType.CONTROL and kinds[f"{SPACE}hot"] == gguf.TokenType.NORMAL
    assert tokenizer.convert_ids_to_tokens(fields["tokenizer.ggml.unknown_token_id"]) == "<unk>"

    loaded = LoadedModel(
        ref=types.SimpleNamespace(path="spm-gemma", run_id="spm"),
        card=types.SimpleNamespace(base_model="tiny-spm"),
        fmt=GEMMA3,
        tokenizer=tokenizer,
        model=peft_model,
        adapter="default",
        device="cpu",
        lock=__import__("threading").Lock(),
    )
    eval_rows = [json.loads(line) for line in (REPO / "datasets/demo/eval.jsonl").open()][:4]
    conversations = [row["messages"][:1] for row in eval_rows] + [
        [{"role": "user", "content": t}] for t in (*HARD_TEXTS, *_order_sensitive_texts(tokenizer))
    ]
    reference, prompts = [], []
    for messages in conversations:
        req = GenerateRequest.parse({"model_path": "spm-gemma", "messages": messages, "max_new_tokens": 16})
        reference.append(generate(loaded, req))
        text = render_prompt(messages, GEMMA3)
        prompts.append((messages, text, tokenizer(text, add_special_tokens=False)["input_ids"]))
    answers = generate_with_llama_cpp(dest, prompts, max_new_tokens=16)
    check = compare(reference, answers, "f32")
    assert check["prompt_tokens_equal"], [a["prompt_tokens_equal"] for a in answers]
    assert check["passed"] and check["exact_match_rate"] == 1.0, check
    assert check["chat_template_equal"]


@pytest.mark.parametrize("scores", ["reversed", "equal"])
def test_with_scores_not_in_the_merges_order_llama_cpp_tokenizes_differently(
    merged: tuple[Path, Any, Any], tmp_path: Path, monkeypatch: pytest.MonkeyPatch, scores: str
) -> None:
    """The token check can fail: scores that do not follow the merges' ranks give llama.cpp other pieces;
    "equal" is what llama.cpp's converter writes from a tokenizer.json alone (-1000 for every piece)."""
    from trainkit_core.export.gguf import writer as gguf_export
    from trainkit_core.export.gguf.check import generate_with_llama_cpp
    from trainkit_core.models.chat_format import GEMMA3, render_prompt

    folder, tokenizer, _ = merged
    read = gguf_export._vocabulary

    def reversed_scores(folder: Path, n_vocab: int) -> dict[str, Any]:
        vocabulary = read(folder, n_vocab)
        if scores == "equal":
            return {**vocabulary, "scores": [-1000.0] * len(vocabulary["scores"])}
        return {**vocabulary, "scores": [-s if s < 0 else s for s in vocabulary["scores"]]}

    monkeypatch.setattr(gguf_export, "_vocabulary", reversed_scores)
    dest = tmp_path / "reversed.gguf"
    gguf_export.write_gguf(folder, dest, quant="f32", fmt=GEMMA3, name="reversed")
    prompts = []
    for text in _order_sensitive_texts(tokenizer):
        messages = [{"role": "user", "content": text}]
        rendered = render_prompt(messages, GEMMA3)
        prompts.append((messages, rendered, tokenizer(rendered, add_special_tokens=False)["input_ids"]))
    answers = generate_with_llama_cpp(dest, prompts, max_new_tokens=1)
    assert not all(a["prompt_tokens_equal"] for a in answers)  # in a prompt, the neighbours may join first

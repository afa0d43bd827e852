"""The `tiny` preset's model: a Gemma-architecture causal LM built here, never downloaded.

Why: the whole pipeline (train, checkpoint, resume, infer, eval) must run on a CPU with
no network, and a user trying `--model-size tiny` on a small task of their own must see
it learn. The model is `Gemma3ForCausalLM` from a config (`TINY_SHAPE`: hidden 128, 2
layers, 4 heads of 32 each with its own keys, an untied output head). Its weights are
random but for one skill: before any fine-tune, a short lesson on random ids teaches it
to copy a span it saw earlier (`trainkit_core.models.copying_lesson`), which a real base
model brings from pretraining and a task's answers often need (an argument taken from
the question, a word repeated). What else a pretrained model brings (a vocabulary whose
embeddings mean something) the tiny preset trains: its recipe
(`trainkit_core.models.presets`) trains the embeddings and the head in full (peft
``modules_to_save``) beside LoRA on the projections; the head is untied so that the
input and output sides of a word learn separately. ``initializer_range=0.1``: at the
default 0.02 the frozen projections are so small that LoRA barely learns. The recipes
compared, with their figures, are in ``docs/concepts/model-sizes.md``
(``bench/bench_tiny_recipes.py``).

Its tokenizer is a byte-level BPE (at most `VOCAB_SIZE` tokens) trained with
`tokenizers` on the dataset's text, with Gemma's special tokens for both chat formats
(``<start_of_turn>``/``<end_of_turn>`` and ``<|turn>``/``<turn|>``) and Gemma 4's tool
and thought tokens, always the first ids, and the run's chat template. The vocabulary is
large enough that the words of a small task become whole tokens (a word a task maps is
then one embedding row).

The base weights do not depend on the corpus (fixed seeds, a lesson on ids alone and a
fixed vocabulary of `VOCAB_SIZE` ids), so one base serves every dataset: it is built
once and cached on the hf-cache volume under ``trainkit/tiny-gemma/v<BUILD_VERSION>/``
(with a tokenizer trained on a small built-in corpus) and loads with `from_pretrained`
like any model. A training run trains its own tokenizer on its dataset (0.1 s) and saves
it with the adapter (whose embedding and head rows are trained for it); inference loads
the base from here and the tokenizer and adapter from the trained model. The build is
atomic (a temporary folder, then a rename) and deterministic on one machine (the lesson
runs on one CPU thread), so two jobs building it at once agree and an emptied cache is
rebuilt identically; another kind of CPU may round the lesson's sums differently, so a
trained adapter is served with the base of the volume it was trained on. Heavy imports
happen inside the functions.
"""

from __future__ import annotations

import json
import os
import shutil
import tempfile
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from trainkit_core.models import copying_lesson
from trainkit_core.models.chat_format import GEMMA3, GEMMA4, get_format
from trainkit_core.models.tool_syntax import GEMMA4_THINKING_TOKENS, GEMMA4_TOKENS, RESPONSE_OPEN

#: Bump when the architecture or recipe changes (v2: 1024 tokens, untied head; v3: tool and
#: thought tokens, digits split one by one as Gemma's tokenizer splits them; v4: 4 KV heads
#: and the copying lesson, `trainkit_core.models.copying_lesson`).
BUILD_VERSION = 4
#: Where the tiny base lives, relative to the hf-cache volume (HF_HOME).
TINY_BASE_PATH = f"trainkit/tiny-gemma/v{BUILD_VERSION}"
SPECIAL_TOKENS = (
    "<pad>",
    "<eos>",
    "<bos>",
    "<unk>",
    *GEMMA3.special_tokens,
    *GEMMA4.special_tokens,
    *GEMMA4_TOKENS,
    *GEMMA4_THINKING_TOKENS,
)
#: The model's vocabulary: every tokenizer built here has at most this many tokens, and
#: the special tokens always take the first ids, so one base serves every tokenizer.
VOCAB_SIZE = 1024

#: The model's shape (`Gemma3TextConfig` fields); `build_model` takes overrides (the bench compares shapes).
TINY_SHAPE: dict[str, Any] = {
    "hidden_size": 128,
    "intermediate_size": 256,
    "num_hidden_layers": 2,
    "num_attention_heads": 4,
    "num_key_value_heads": 4,
    "head_dim": 32,
    "max_position_embeddings": 1024,
    "sliding_window": 256,
    "initializer_range": 0.1,
    "tie_word_embeddings": False,
}

#: Text the tokenizer always learns from, so a model built without a dataset still tokenizes well.
DEFAULT_CORPUS = (
    "The quick brown fox jumps over the lazy dog. Hello! How are you today? I am fine, thank you.",
    "Translate, summarise, answer, uppercase, reverse: one two three four five six seven eight nine ten.",
    "abcdefghijklmnopqrstuvwxyz ABCDEFGHIJKLMNOPQRSTUVWXYZ 0123456789 .,;:!?'\"()[]{}<>-_+=*/\\|@#$%^&~`",
)


def build_tokenizer(texts: Iterable[str], chat_format: str = "gemma3", vocab_size: int = VOCAB_SIZE):  # type: ignore[no-untyped-def]
    """The tiny model's tokenizer: `DEFAULT_CORPUS` and `texts`, Gemma 3's and 4's special tokens, a format's template."""
    from trainkit_core.models.tokenizer_builder import build_bpe_tokenizer

    return build_bpe_tokenizer(
        [*DEFAULT_CORPUS, *texts],
        special_tokens=SPECIAL_TOKENS,
        vocab_size=vocab_size,
        chat_template=get_format(chat_format).chat_template,
        split_digits=True,
    )


def build_model(tokenizer, seed: int = 0, vocab_size: int = VOCAB_SIZE, **shape: Any):  # type: ignore[no-untyped-def]
    """The tiny `Gemma3ForCausalLM` of `TINY_SHAPE` (updated by `shape`), weights drawn from a fixed seed."""
    import torch
    from transformers import Gemma3ForCausalLM, Gemma3TextConfig

    eot = [tokenizer.convert_tokens_to_ids(t) for t in (GEMMA3.end_of_turn, GEMMA4.end_of_turn, RESPONSE_OPEN)]
    config = Gemma3TextConfig(
        vocab_size=vocab_size,
        **{**TINY_SHAPE, **shape},
        pad_token_id=tokenizer.pad_token_id,
        bos_token_id=tokenizer.bos_token_id,
        eos_token_id=[tokenizer.eos_token_id, *eot],
    )
    torch.manual_seed(seed)
    model = Gemma3ForCausalLM(config)
    model.generation_config.eos_token_id = [tokenizer.eos_token_id, *eot]
    model.generation_config.pad_token_id = tokenizer.pad_token_id
    return model


def ensure_tiny_base(hf_cache_dir: Path | None) -> Path:
    """The folder of the tiny base model on the hf-cache volume, built if missing.

    `hf_cache_dir` None means `HF_HOME` (as set inside a job), else ``~/.cache/huggingface``.
    With ``TRAINKIT_TINY_BASE_CACHE`` set (`VolumeSettings.tiny_base_cache`), the base is
    built once in that folder (under a lock, so that concurrent jobs wait for one build)
    and copied from there: the copying lesson costs a minute or two of CPU, which a
    machine with many homes (a test run) should pay once.
    """
    if hf_cache_dir is None:
        hf_cache_dir = Path(os.environ.get("HF_HOME") or Path.home() / ".cache" / "huggingface")
    target = Path(hf_cache_dir) / TINY_BASE_PATH
    if _is_built(target):
        return target
    from trainkit_core.settings import VolumeSettings

    shared = VolumeSettings().tiny_base_cache
    if shared is None:
        _place(target, build_base)
        return target
    source = shared / f"v{BUILD_VERSION}"
    source.parent.mkdir(parents=True, exist_ok=True)
    with _locked(source.parent / f"v{BUILD_VERSION}.lock"):
        if not _is_built(source):
            _place(source, build_base)
    _place(target, lambda folder: shutil.copytree(source, folder, dirs_exist_ok=True))
    return target


def _is_built(folder: Path) -> bool:
    return (folder / "trainkit_tiny.json").is_file()


def first_plain_id(tokenizer: Any) -> int:
    """The first id above the special tokens: the lesson draws its random spans from here up."""
    return max(tokenizer.convert_tokens_to_ids(t) for t in SPECIAL_TOKENS) + 1


def build_base(folder: Path, lesson_seed: int = copying_lesson.SEED, lesson_steps: int = copying_lesson.STEPS) -> None:
    """Build the base into `folder`: the random model of `TINY_SHAPE`, then the copying lesson.

    The lesson's seed and length are arguments for `bench/copying_base.py`, which compares lessons.
    """
    import sys

    print(
        f"trainkit: building the tiny base model (a copying lesson of {lesson_steps} steps on one CPU thread, "
        "a minute or two; once per hf-cache volume)",
        file=sys.stderr,
        flush=True,
    )
    tokenizer = build_tokenizer(())
    model = build_model(tokenizer)
    lesson = copying_lesson.teach_copying(
        model, first_plain_id(tokenizer), VOCAB_SIZE, tokenizer.bos_token_id, seed=lesson_seed, steps=lesson_steps
    )
    model.save_pretrained(folder)
    tokenizer.save_pretrained(folder)
    if not (folder / "config.json").is_file():  # transformers saves nothing on a distributed rank other than 0
        raise RuntimeError("the tiny model was built but not saved (built on a distributed rank other than 0?)")
    info = {
        "kind": "trainkit-tiny-gemma",
        "build_version": BUILD_VERSION,
        "vocab_size": VOCAB_SIZE,
        "copying_lesson": lesson,
    }
    (folder / "trainkit_tiny.json").write_text(json.dumps(info, indent=2))


def _place(target: Path, fill: Callable[[Path], object]) -> None:
    """`fill` a temporary folder beside `target`, then rename it into place: a reader sees a whole base or none.

    If another job placed it first, its copy is kept (the same seeds and recipe built it).
    """
    target.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=".tmp-", dir=target.parent))
    try:
        fill(tmp)
        try:
            os.rename(tmp, target)
        except OSError:
            if not _is_built(target):
                raise
    finally:
        if tmp.exists():
            shutil.rmtree(tmp, ignore_errors=True)


@contextmanager
def _locked(path: Path) -> Iterator[None]:
    """An exclusive lock on `path` (a file) for as long as the block runs; no lock where fcntl is missing."""
    try:
        import fcntl
    except ImportError:  # Windows: two builds may run at once, and `_place` keeps the first
        yield
        return
    with open(path, "a") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)

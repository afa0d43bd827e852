"""Model presets: what `--model-size tiny|4b|12b|31b` means. Data only, no logic beyond lookup.

Each preset names the base model (a Hugging Face id, or ``trainkit/tiny-gemma`` for the
locally built tiny model), the Unsloth 4-bit checkpoint where one exists, the default
GPU of its training job, its chat format, maximum sequence length, and LoRA and
optimiser defaults. `modules_to_save` names whole modules trained and
saved with the adapter besides LoRA (the tiny preset's embeddings and head, which
are random, not pretrained); the GPU presets keep it empty: LoRA on frozen
pretrained weights. `TRAINKIT_GPU` overrides the GPU of every size; any Hugging Face id
can be trained instead of a preset (`TrainConfig.base_model`). Sources of each choice
are in ``docs/concepts/model-sizes.md``; the ids come from Google's model cards and Unsloth's
``unsloth/models/mapper.py``.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field, replace
from typing import Any

from trainkit_core.errors import UsageError

#: The base-model id of the tiny preset. It is never downloaded: `tiny_model` builds it.
TINY_BASE_MODEL = "trainkit/tiny-gemma"

#: LoRA targets: all seven projections of a Gemma decoder layer.
ALL_PROJECTIONS = ("q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj")


@dataclass(frozen=True)
class Preset:
    """One model size. Fields that a `TrainConfig` leaves unset come from here."""

    name: str
    base_model: str
    unsloth_model: str | None
    gpu: str
    chat_format: str
    max_seq_length: int
    lora_r: int
    lora_alpha: int
    learning_rate: float
    batch_size: int
    #: The default length: a number of steps (tiny, whose CPU time must not grow with
    #: the dataset) or, for the GPU presets, of epochs (see docs/concepts/model-sizes.md).
    steps: int | None
    description: str
    epochs: float | None = None
    lora_dropout: float = 0.0
    grad_accum: int = 1
    warmup_steps: int = 0
    lr_scheduler: str = "constant"
    weight_decay: float = 0.0
    target_modules: tuple[str, ...] = field(default=ALL_PROJECTIONS)
    load_in_4bit: bool = True
    #: What the plan of a run of this size says besides the numbers (what is and is not trained).
    plan_notes: tuple[str, ...] = ()
    #: Modules trained in full and saved with the adapter (peft ``modules_to_save``).
    modules_to_save: tuple[str, ...] = ()
    #: On image datasets, train the vision tower and projector too (the twins' are random).
    finetune_vision_layers: bool = False
    #: On audio datasets, train the audio tower and its projection too (off everywhere by default).
    finetune_audio_layers: bool = False
    #: Whether the model has an audio tower (Gemma 4 E2B/E4B): audio datasets train only these.
    audio: bool = False
    #: Learning rate of the towers when they train (None: `learning_rate`).
    #: A tower trained from random weights at LoRA's rate learns colours but not shapes.
    vision_learning_rate: float | None = None
    #: Tokens one image takes in the prompt, markers included (the processor's figure:
    #: Gemma 3 256 soft tokens + begin/end + two blank lines; Gemma 4 up to 280 + begin/end).
    image_tokens: int = 260

    def as_dict(self) -> dict[str, Any]:
        data = asdict(self)
        data["target_modules"] = list(self.target_modules)
        data["modules_to_save"] = list(self.modules_to_save)
        return data


_E2B = Preset(
    name="e2b",
    base_model="google/gemma-4-E2B-it",
    unsloth_model="unsloth/gemma-4-E2B-it-unsloth-bnb-4bit",
    gpu="A10G",
    chat_format="gemma4",
    max_seq_length=4096,
    lora_r=8,
    lora_alpha=8,
    learning_rate=2e-4,
    batch_size=2,
    grad_accum=4,
    warmup_steps=5,
    lr_scheduler="linear",
    steps=None,
    epochs=1.0,
    image_tokens=282,
    audio=True,
    description="Gemma 4 E2B instruct (per-layer embeddings, audio tower), 4-bit QLoRA on an A10G (24 GB; ~8 GB).",
)

PRESETS: dict[str, Preset] = {
    "tiny": Preset(
        name="tiny",
        base_model=TINY_BASE_MODEL,
        unsloth_model=None,
        gpu="",  # runs anywhere, CPU included
        chat_format="gemma3",
        max_seq_length=256,
        lora_r=8,
        lora_alpha=16,
        # Its embeddings and head are random, so they train in full beside LoRA; a warm-up
        # and a cosine decay let the last steps settle on exact answers; a length in steps
        # (not epochs) bounds the time on a CPU whatever the dataset's size. Chosen with
        # bench/bench_tiny_recipes.py (figures in docs/concepts/model-sizes.md). The query and
        # key norms train too: frozen at their built weights they cap every attention score
        # at 2 (head_dim 32 over query_pre_attn_scalar 256), too soft to copy a token from a
        # given place; trained, the task suite's mean and worst family rise (research log).
        modules_to_save=("embed_tokens", "lm_head", "q_norm", "k_norm"),
        learning_rate=1e-2,
        lr_scheduler="cosine",
        warmup_steps=20,
        batch_size=16,
        steps=400,
        load_in_4bit=False,
        description="A 2-layer Gemma 3 architecture model built locally (542k parameters): the CPU demo.",
    ),
    "4b": Preset(
        name="4b",
        base_model="google/gemma-3-4b-it",
        unsloth_model="unsloth/gemma-3-4b-it-unsloth-bnb-4bit",
        gpu="A10G",
        chat_format="gemma3",
        max_seq_length=2048,
        lora_r=16,
        lora_alpha=16,
        learning_rate=2e-4,
        batch_size=2,
        grad_accum=4,
        warmup_steps=5,
        lr_scheduler="linear",
        # One pass over the dataset, whatever its size: Unsloth's "full training run";
        # --steps or --epochs override it (docs/concepts/model-sizes.md gives the anchors).
        steps=None,
        epochs=1.0,
        description="Gemma 3 4B instruct, 4-bit QLoRA on an A10G (24 GB).",
    ),
    "12b": Preset(
        name="12b",
        base_model="google/gemma-3-12b-it",
        unsloth_model="unsloth/gemma-3-12b-it-unsloth-bnb-4bit",
        gpu="A100",
        chat_format="gemma3",
        max_seq_length=2048,
        lora_r=16,
        lora_alpha=16,
        learning_rate=2e-4,
        batch_size=2,
        grad_accum=4,
        warmup_steps=5,
        lr_scheduler="linear",
        # One pass over the dataset, whatever its size: Unsloth's "full training run";
        # --steps or --epochs override it (docs/concepts/model-sizes.md gives the anchors).
        steps=None,
        epochs=1.0,
        description="Gemma 3 12B instruct, 4-bit QLoRA on an A100 (40 GB).",
    ),
    "31b": Preset(
        name="31b",
        base_model="google/gemma-4-31B-it",
        unsloth_model="unsloth/gemma-4-31B-it-unsloth-bnb-4bit",
        gpu="A100-80GB",
        chat_format="gemma4",
        max_seq_length=8192,
        lora_r=8,
        lora_alpha=8,
        learning_rate=2e-4,
        batch_size=1,
        grad_accum=8,
        warmup_steps=5,
        lr_scheduler="linear",
        # One pass over the dataset, whatever its size: Unsloth's "full training run";
        # --steps or --epochs override it (docs/concepts/model-sizes.md gives the anchors).
        steps=None,
        epochs=1.0,
        image_tokens=282,
        description="Gemma 4 31B instruct, 4-bit QLoRA on an A100-80GB (Unsloth's notebook: 18.6 GB reserved).",
    ),
    # Gemma 4's small and mixture-of-experts sizes. Memory figures are Unsloth's (its Gemma 4
    # docs, 2026-04: E2B about 8 GB, E4B 10-17 GB in 4-bit QLoRA; 26B-A4B LoRA over 40 GB,
    # its pages disagree between versions): the GPU leaves room for the sequence length.
    # The recipe is the 31b's (Unsloth's Gemma 4 notebooks: r 8, alpha 8, lr 2e-4).
    "e2b": _E2B,
    # E2B's recipe on the larger checkpoint, still in an A10G's 24 GB.
    "e4b": replace(
        _E2B,
        name="e4b",
        base_model="google/gemma-4-E4B-it",
        unsloth_model="unsloth/gemma-4-E4B-it-unsloth-bnb-4bit",
        description="Gemma 4 E4B instruct (per-layer embeddings, audio tower), 4-bit QLoRA on an A10G (24 GB; 10-17 GB).",
    ),
    "26b-a4b": Preset(
        name="26b-a4b",
        base_model="google/gemma-4-26B-A4B-it",
        # No pre-quantised Unsloth checkpoint of this layout was found in its mapper: the hf
        # backend loads the real weights (bf16 LoRA, over 40 GB).
        unsloth_model=None,
        gpu="A100-80GB",
        chat_format="gemma4",
        max_seq_length=4096,
        lora_r=8,
        lora_alpha=8,
        learning_rate=2e-4,
        batch_size=1,
        grad_accum=8,
        warmup_steps=5,
        lr_scheduler="linear",
        steps=None,
        epochs=1.0,
        image_tokens=282,
        load_in_4bit=False,
        plan_notes=(
            "26b-a4b: LoRA trains the attention and the dense MLP of each layer; its 128 experts stay as they "
            "are (their weights are fused tensors, which peft's LoRA layers do not reach)",
        ),
        description="Gemma 4 26B-A4B instruct (128 experts, ~4B active; LoRA on attention and dense MLP), on an A100-80GB.",
    ),
}

#: Hidden presets: the tiny twins of the real presets (`trainkit_core.models.twins`), test
#: fixtures that run the real presets' code path on a CPU. `--model-size` accepts them;
#: listings and error messages show only `PRESETS`.
TWIN_PRESETS: dict[str, Preset] = {
    "tiny-gemma3mm": Preset(
        name="tiny-gemma3mm",
        base_model="trainkit/tiny-gemma3mm",
        unsloth_model=None,
        gpu="",
        chat_format="gemma3",
        max_seq_length=256,
        lora_r=8,
        lora_alpha=16,
        # Its language model is random too, so embeddings and head train in full beside
        # LoRA (as tiny's); the tower learns shapes only at a rate well above the language
        # model's. The recipe is limited by how many pictures it sees: on the twin's
        # narrow language model (build 4), 1000 steps of 16 over the demo's 1800 pictures
        # named 0.875-0.955 of 200 unseen ones over four seeds (mean 0.91; the default seed
        # 0.93) in 100-114 s, since the CPU loss (training.backends) made a step some 15 %
        # cheaper; 1200 steps named 0.90-0.945 but took 133-143 s
        # (scripts/measure_shapes.py, docs/tutorials/images.md).
        modules_to_save=("embed_tokens", "lm_head"),
        learning_rate=3e-3,
        vision_learning_rate=3e-2,
        lr_scheduler="cosine",
        warmup_steps=20,
        batch_size=16,
        steps=1000,
        finetune_vision_layers=True,
        image_tokens=20,
        description="Tiny twin of 4b/12b: a Gemma3ForConditionalGeneration with a SigLIP tower, built locally.",
    ),
    "tiny-gemma4": Preset(
        name="tiny-gemma4",
        base_model="trainkit/tiny-gemma4",
        unsloth_model=None,
        gpu="",
        chat_format="gemma4",
        max_seq_length=256,
        lora_r=8,
        lora_alpha=8,
        # The shapes demo's recipe of tiny-gemma3mm (random language model and tower alike),
        # shorter: a step costs about 3.5 times as much (its tower sees some 600 patches).
        modules_to_save=("embed_tokens", "lm_head"),
        learning_rate=3e-3,
        vision_learning_rate=3e-2,
        lr_scheduler="cosine",
        warmup_steps=10,
        batch_size=16,
        steps=120,
        finetune_vision_layers=True,
        image_tokens=72,
        description="Tiny twin of 31b: a Gemma4ForConditionalGeneration (per-layer attention, vision tower), built locally.",
    ),
}
#: The twins of Gemma 4's small (E2B/E4B) and mixture-of-experts (26B-A4B) layouts: the 31B
#: twin's recipe on their models.
TWIN_PRESETS["tiny-gemma4-e"] = replace(
    TWIN_PRESETS["tiny-gemma4"],
    name="tiny-gemma4-e",
    base_model="trainkit/tiny-gemma4-e",
    description="Tiny twin of e2b/e4b: per-layer input embeddings, shared keys and values, an audio tower.",
    audio=True,
    # The audio tower stays frozen, as on the real presets: trained in full, the twin's random
    # tower learnt the tones demo's count but not its pitch (exact match 0.37 against 0.78
    # frozen) and a sweeps-and-loudness family not at all (0.17 against 0.67; chance 0.17).
    # docs/developer/research-logs.md, "Audio: the E twin's tower".
)
TWIN_PRESETS["tiny-gemma4-moe"] = replace(
    TWIN_PRESETS["tiny-gemma4"],
    name="tiny-gemma4-moe",
    base_model="trainkit/tiny-gemma4-moe",
    description="Tiny twin of 26b-a4b: a mixture-of-experts block beside the dense MLP.",
)

#: Defaults for a base model given by Hugging Face id instead of a preset.
CUSTOM_DEFAULTS = PRESETS["4b"]


def get_preset(name: str) -> Preset:
    """The preset `name` (a twin's too); `UsageError` listing the known sizes otherwise."""
    try:
        return PRESETS[name] if name in PRESETS else TWIN_PRESETS[name]
    except KeyError:
        raise UsageError(
            f"unknown model size {name!r}; known sizes: {', '.join(PRESETS)}",
            hint="or give any Hugging Face id with --base-model",
        ) from None


def chat_format_for_model(model_id: str) -> str:
    """The chat format of a Hugging Face id that is not a preset: Gemma 4 ids use `gemma4`."""
    return "gemma4" if "gemma-4" in model_id.lower() else "gemma3"

"""Tiny twins of the real presets: the model class and configuration structure of each, at toy size.

Why: `tiny` is a text-only `Gemma3ForCausalLM`, kinder than the real checkpoints. The
real presets load as other classes: `google/gemma-3-{4b,12b}-it` as
`Gemma3ForConditionalGeneration` (a SigLIP vision tower beside the language model),
`google/gemma-4-31B-it` as `Gemma4ForConditionalGeneration` (per-layer heterogeneous
attention: reading ``config.head_dim`` on its text config raises
`AmbiguousGlobalPerLayerAttributeError`). A twin has its real model's class, its
configuration class and structure (layer types and their order, sliding window,
soft-capping, tied embeddings, rope settings per layer type, the towers the real one
has, the special tokens of its tokenizer incl. the image ones) with tiny dimensions,
so that every code path a real preset takes runs on a CPU. ``docs/concepts/model-sizes.md``
lists what each twin shares with its real model and what it does not.

Unlike `tiny`, a twin is built like a downloaded checkpoint: the weights, a fixed
tokenizer (byte-level BPE, 512 ids, trained on a built-in corpus) and the processor
are saved together in one folder on the hf-cache volume
(``trainkit/twins/<name>/v<BUILD_VERSION>``), and the train job loads the tokenizer
from that folder exactly as it loads a real model's. Built deterministically (fixed
seed, fixed corpus) and atomically (a temporary folder, then a rename), never
downloaded. Heavy imports stay inside the functions.
"""

from __future__ import annotations

import json
import os
import shutil
import tempfile
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from trainkit_core.models.chat_format import GEMMA3, GEMMA4, ChatFormat
from trainkit_core.models.corpus import general_corpus

#: Bump when a twin's architecture or recipe changes (v2: Gemma 4's image processor;
#: v3: Gemma 3's 16 image tokens; v4: Gemma 3's language model 32 wide, the corpus's
#: picture words; v5: a general corpus instead of one holding the shapes demo's sentence;
#: v6: the E twin's last 6 of 12 layers share keys and values, as E2B's last 20 of 35 do;
#: v7: the E twin's processor holds Gemma 4's audio feature extractor).
BUILD_VERSION = 7
VOCAB_SIZE = 512
MARKER = "trainkit_twin.json"

#: What a twin's tokenizer learns from (the tokenizer is fixed, as a real model's is): general
#: text that knows no task (`trainkit_core.models.corpus`).
CORPUS = general_corpus()


@dataclass(frozen=True)
class Twin:
    """One twin: which real checkpoints it stands for and how its tokenizer names things."""

    name: str
    base_model: str  # the id a run records, like a Hugging Face id
    twin_of: tuple[str, ...]
    model_class: str
    config_class: str
    chat_format: ChatFormat
    #: Gemma's special tokens first (pad, eos, bos, unk at ids 0-3 as in the real
    #: tokenizers), then the turn markers, then the multimodal ones.
    special_tokens: tuple[str, ...]
    #: The tokenizer's named multimodal tokens (`tokenizer.image_token` etc.), as in the real tokenizer_config.json.
    named_tokens: tuple[tuple[str, str], ...]

    @property
    def path(self) -> str:
        """Where the twin lives, relative to the hf-cache volume (HF_HOME)."""
        return f"trainkit/twins/{self.name}/v{BUILD_VERSION}"


GEMMA3MM_TWIN = Twin(
    name="gemma3mm",
    base_model="trainkit/tiny-gemma3mm",
    twin_of=("google/gemma-3-4b-it", "google/gemma-3-12b-it"),
    model_class="Gemma3ForConditionalGeneration",
    config_class="Gemma3Config",
    chat_format=GEMMA3,
    special_tokens=(
        "<pad>",
        "<eos>",
        "<bos>",
        "<unk>",
        "<start_of_turn>",
        "<end_of_turn>",
        "<start_of_image>",
        "<end_of_image>",
        "<image_soft_token>",
    ),
    named_tokens=(
        ("boi_token", "<start_of_image>"),
        ("eoi_token", "<end_of_image>"),
        ("image_token", "<image_soft_token>"),
    ),
)

GEMMA4_TWIN = Twin(
    name="gemma4",
    base_model="trainkit/tiny-gemma4",
    twin_of=("google/gemma-4-31B-it",),
    model_class="Gemma4ForConditionalGeneration",
    config_class="Gemma4Config",
    chat_format=GEMMA4,
    special_tokens=(
        "<pad>",
        "<eos>",
        "<bos>",
        "<unk>",
        "<|turn>",
        "<turn|>",
        "<|image>",
        "<image|>",
        "<|image|>",
        "<|audio>",
        "<audio|>",
        "<|audio|>",
        "<|video|>",
        "<|channel>",
        "<channel|>",
        "<|think|>",
    ),
    named_tokens=(
        ("boi_token", "<|image>"),
        ("eoi_token", "<image|>"),
        ("image_token", "<|image|>"),
        ("boa_token", "<|audio>"),
        ("eoa_token", "<audio|>"),
        ("audio_token", "<|audio|>"),
    ),
)

#: Gemma 4's small sizes: per-layer input embeddings, keys and values shared across the
#: last layers, an audio tower beside the vision tower. Same tokenizer as the 31B twin's.
GEMMA4_E_TWIN = replace(
    GEMMA4_TWIN,
    name="gemma4-e",
    base_model="trainkit/tiny-gemma4-e",
    twin_of=("google/gemma-4-E2B-it", "google/gemma-4-E4B-it"),
)
#: Gemma 4's mixture of experts (26B-A4B): a routed expert block beside the dense MLP.
GEMMA4_MOE_TWIN = replace(
    GEMMA4_TWIN,
    name="gemma4-moe",
    base_model="trainkit/tiny-gemma4-moe",
    twin_of=("google/gemma-4-26B-A4B-it",),
)

#: Twins by the base-model id a run records.
TWINS: dict[str, Twin] = {t.base_model: t for t in (GEMMA3MM_TWIN, GEMMA4_TWIN, GEMMA4_E_TWIN, GEMMA4_MOE_TWIN)}


def build_tokenizer(twin: Twin):  # type: ignore[no-untyped-def]
    """The twin's fixed tokenizer: byte-level BPE over `CORPUS`, the twin's special tokens and chat template."""
    from trainkit_core.models.tokenizer_builder import build_bpe_tokenizer

    return build_bpe_tokenizer(
        CORPUS,
        special_tokens=twin.special_tokens,
        vocab_size=VOCAB_SIZE,
        chat_template=twin.chat_format.chat_template,
        named_tokens=dict(twin.named_tokens),
    )


def _ids(tokenizer: Any, *tokens: str) -> list[int]:
    return [int(tokenizer.convert_tokens_to_ids(t)) for t in tokens]


def gemma3mm_config(tokenizer: Any) -> Any:
    """`Gemma3Config` shaped like google/gemma-3-4b-it's, tiny.

    Real (4B): text 34 layers, layer types 5 sliding : 1 full (so it ends on 4 sliding
    layers), sliding window 1024, head_dim 256 = query_pre_attn_scalar, no soft-capping
    (Gemma 3 uses QK-norm), linear rope scaling x8 on full layers, theta 1e6 full / 1e4
    sliding, tied embeddings; SigLIP vision 27 layers, 896 px, patch 14, no head, 256
    tokens per image. Here: 8 layers in the same order, hidden 32 (intermediate 64), window
    16, the same rope and capping settings, a 2-layer SigLIP on 56 px with 16 tokens per
    image (one per patch, rather than pooled to 4: more room for a shape's outline). The
    language model is narrower than the tower's output would suggest because the shapes
    demo learns more per CPU second so: at hidden 64 a step cost about 1.7 times as much and
    the 120 s budget held too few pictures to reach 0.9 (docs/tutorials/images.md).
    """
    from transformers import Gemma3Config, Gemma3TextConfig, SiglipVisionConfig

    eos, eot = _ids(tokenizer, "<eos>", GEMMA3.end_of_turn)
    boi, eoi, image = _ids(tokenizer, "<start_of_image>", "<end_of_image>", "<image_soft_token>")
    text = Gemma3TextConfig(
        vocab_size=VOCAB_SIZE,
        hidden_size=32,
        intermediate_size=64,
        num_hidden_layers=8,
        num_attention_heads=2,
        num_key_value_heads=1,
        head_dim=32,
        query_pre_attn_scalar=32,
        sliding_window=16,
        sliding_window_pattern=6,
        rope_scaling={"rope_type": "linear", "factor": 8.0},
        rope_theta=1_000_000.0,
        rope_local_base_freq=10_000.0,
        final_logit_softcapping=None,
        attn_logit_softcapping=None,
        max_position_embeddings=1024,
        initializer_range=0.1,
        tie_word_embeddings=True,
        pad_token_id=tokenizer.pad_token_id,
        bos_token_id=tokenizer.bos_token_id,
        eos_token_id=[eos, eot],
    )
    vision = SiglipVisionConfig(
        hidden_size=32,
        intermediate_size=64,
        num_hidden_layers=2,
        num_attention_heads=2,
        image_size=56,
        patch_size=14,
        vision_use_head=False,
    )
    return Gemma3Config(
        text_config=text,
        vision_config=vision,
        mm_tokens_per_image=16,
        boi_token_index=boi,
        eoi_token_index=eoi,
        image_token_index=image,
        initializer_range=0.1,
        tie_word_embeddings=True,
        eos_token_id=[eos, eot],
    )


def gemma4_config(tokenizer: Any) -> Any:
    """`Gemma4Config` shaped like google/gemma-4-31B-it's, tiny.

    Real (31B): text 60 layers, 5 sliding : 1 full ending on a full layer, sliding
    window 1024, head_dim 256 on sliding layers and 512 (`global_head_dim`) on full
    ones, 16 KV heads sliding and 4 (`num_global_key_value_heads`) full, keys reused as
    values on full layers (`attention_k_eq_v`: no v_proj there), final logit
    soft-capping 30, no per-layer input embeddings, proportional rope (25 %) on full
    layers, tied embeddings; a Gemma 4 vision tower (27 layers, patch 16, pooling 3);
    no audio tower (audio is on E2B/E4B only). Here: 12 layers in the same order,
    hidden 64, head_dim 32 / 64, 2 / 1 KV heads, window 16, the same capping, rope and
    k=v settings, a 2-layer vision tower.
    """
    from transformers import Gemma4Config, Gemma4TextConfig, Gemma4VisionConfig

    eos, eot = _ids(tokenizer, "<eos>", GEMMA4.end_of_turn)
    named = dict(GEMMA4_TWIN.named_tokens)
    boi, eoi, image, boa, eoa, audio = _ids(
        tokenizer,
        named["boi_token"],
        named["eoi_token"],
        named["image_token"],
        named["boa_token"],
        named["eoa_token"],
        named["audio_token"],
    )
    (video,) = _ids(tokenizer, "<|video|>")
    text = Gemma4TextConfig(
        vocab_size=VOCAB_SIZE,
        vocab_size_per_layer_input=VOCAB_SIZE,
        hidden_size=64,
        intermediate_size=128,
        num_hidden_layers=12,
        num_attention_heads=2,
        num_key_value_heads=2,
        head_dim=32,
        global_head_dim=64,
        num_global_key_value_heads=1,
        attention_k_eq_v=True,
        hidden_size_per_layer_input=0,
        sliding_window=16,
        layer_types=(["sliding_attention"] * 5 + ["full_attention"]) * 2,
        final_logit_softcapping=30.0,
        max_position_embeddings=1024,
        initializer_range=0.1,
        tie_word_embeddings=True,
        pad_token_id=tokenizer.pad_token_id,
        bos_token_id=tokenizer.bos_token_id,
        eos_token_id=[eos, eot],
    )
    vision = Gemma4VisionConfig(
        hidden_size=32,
        intermediate_size=64,
        num_hidden_layers=2,
        num_attention_heads=2,
        num_key_value_heads=2,
        head_dim=16,
        patch_size=16,
        pooling_kernel_size=3,
        position_embedding_size=64,
        standardize=True,
    )
    return Gemma4Config(
        text_config=text,
        vision_config=vision,
        audio_config=None,
        boi_token_id=boi,
        eoi_token_id=eoi,
        image_token_id=image,
        video_token_id=video,
        boa_token_id=boa,
        eoa_token_index=eoa,
        audio_token_id=audio,
        initializer_range=0.1,
        tie_word_embeddings=True,
        eos_token_id=[eos, eot],
    )


def gemma4_e_config(tokenizer: Any) -> Any:
    """The 31B twin's config reshaped like google/gemma-4-E2B-it / E4B-it's, tiny.

    Real (E2B/E4B): per-layer input embeddings (`hidden_size_per_layer_input` 256), the
    last layers reuse the keys and values of earlier ones (`num_kv_shared_layers`), no
    keys-as-values, an audio tower (a conformer, speech in). Here: per-layer inputs 16
    wide, the last 6 of 12 layers share, a 2-layer audio tower. Six, as E2B's arrangement:
    its last layers with a cache of their own are one full (14) and one sliding (13), as the
    twin's 5 and 4 are; llama.cpp takes a sharing layer's keys by that position, so a GGUF of
    the twin is read as transformers reads it (`export.gguf.gemma4`). These are the layouts
    whose LoRA and loss peers got wrong (shared keys and values dropped once the cache is
    off or with gradient checkpointing), so the twin lets tests prove trainkit's path.
    """
    from transformers import Gemma4AudioConfig, Gemma4Config, Gemma4TextConfig

    config = gemma4_config(tokenizer)
    text = _text_fields(config)
    text.update(hidden_size_per_layer_input=16, num_kv_shared_layers=6, attention_k_eq_v=False)
    fields = _top_fields(config)
    audio = Gemma4AudioConfig(hidden_size=32, num_hidden_layers=2, num_attention_heads=2)
    return Gemma4Config(
        text_config=Gemma4TextConfig(**text), vision_config=config.vision_config, audio_config=audio, **fields
    )


def gemma4_moe_config(tokenizer: Any) -> Any:
    """The 31B twin's config with a mixture-of-experts block, as google/gemma-4-26B-A4B-it's.

    Real (26B-A4B): 128 experts, 8 routed per token (about 4B of 26B active), beside a
    dense MLP in each layer. Here: 4 experts, 2 routed, 32 wide. The experts are one
    fused parameter per layer (no Linear modules), so LoRA reaches the attention and the
    dense MLP only; the plan says so.
    """
    from transformers import Gemma4Config, Gemma4TextConfig

    config = gemma4_config(tokenizer)
    text = _text_fields(config)
    text.update(enable_moe_block=True, num_experts=4, top_k_experts=2, moe_intermediate_size=32)
    return Gemma4Config(text_config=Gemma4TextConfig(**text), vision_config=config.vision_config, **_top_fields(config))


def _text_fields(config: Any) -> dict[str, Any]:
    text = dict(config.text_config.to_dict())
    for key in ("model_type", "transformers_version", "architectures"):
        text.pop(key, None)
    return text


def _top_fields(config: Any) -> dict[str, Any]:
    names = ("boi_token_id", "eoi_token_id", "image_token_id", "video_token_id", "boa_token_id", "audio_token_id")
    fields = {name: getattr(config, name) for name in names}
    fields["eoa_token_index"] = config.eoa_token_index
    return {**fields, "initializer_range": 0.1, "tie_word_embeddings": True, "eos_token_id": config.eos_token_id}


_CONFIGS = {
    "gemma3mm": gemma3mm_config,
    "gemma4": gemma4_config,
    "gemma4-e": gemma4_e_config,
    "gemma4-moe": gemma4_moe_config,
}


def build_model(twin: Twin, tokenizer: Any, seed: int = 0) -> Any:
    """The twin's model, of its real model's class, weights drawn from a fixed seed."""
    import torch
    import transformers

    config = _CONFIGS[twin.name](tokenizer)
    torch.manual_seed(seed)
    model = getattr(transformers, twin.model_class)(config)
    eos = _ids(tokenizer, "<eos>", twin.chat_format.end_of_turn)
    model.generation_config.eos_token_id = eos
    model.generation_config.pad_token_id = tokenizer.pad_token_id
    model.generation_config.bos_token_id = tokenizer.bos_token_id
    return model


def build_processor(twin: Twin, tokenizer: Any) -> Any:
    """The processor a real checkpoint ships (image processor + tokenizer), at the twin's image size.

    The slow (PIL) image processors: the fast ones and Gemma 4's video processor need
    torchvision, never installed beside the CPU torch here (`trainkit_core.models.processors`).
    Gemma 4's keeps the real default of 280 soft tokens' patch budget out of reach of a
    tiny tower: 70, the smallest the class allows. `None` when Pillow is missing (text
    training never needs it; the weights and tokenizer are the same either way).
    """
    import importlib.util

    if importlib.util.find_spec("PIL") is None:
        return None
    if twin.name.startswith("gemma4"):
        from transformers.models.gemma4.image_processing_pil_gemma4 import Gemma4ImageProcessorPil

        from trainkit_core.models.processors import gemma4_image_text_processor

        feature_extractor = None
        if twin.name == "gemma4-e":  # the E layout's audio tower reads Gemma 4's own features
            from transformers.models.gemma4.feature_extraction_gemma4 import Gemma4AudioFeatureExtractor

            feature_extractor = Gemma4AudioFeatureExtractor()
        return gemma4_image_text_processor(
            Gemma4ImageProcessorPil(max_soft_tokens=70), tokenizer, feature_extractor=feature_extractor
        )
    from transformers import Gemma3Processor
    from transformers.models.gemma3.image_processing_pil_gemma3 import Gemma3ImageProcessorPil

    image_processor = Gemma3ImageProcessorPil(size={"height": 56, "width": 56})
    return Gemma3Processor(image_processor=image_processor, tokenizer=tokenizer, image_seq_length=16)


def ensure_twin_base(base_model: str, hf_cache_dir: Path | None) -> Path:
    """The folder of twin `base_model` on the hf-cache volume, built if missing.

    `hf_cache_dir` None means `HF_HOME` (as set inside a job), else ``~/.cache/huggingface``.
    """
    twin = TWINS[base_model]
    if hf_cache_dir is None:
        hf_cache_dir = Path(os.environ.get("HF_HOME") or Path.home() / ".cache" / "huggingface")
    target = Path(hf_cache_dir) / twin.path
    if (target / MARKER).is_file():
        return target
    target.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=".tmp-", dir=target.parent))
    try:
        tokenizer = build_tokenizer(twin)
        model = build_model(twin, tokenizer)
        model.save_pretrained(tmp)
        if not (tmp / "config.json").is_file():  # transformers saves nothing on a distributed rank other than 0
            raise RuntimeError(f"twin {twin.name} was built but not saved (built on a distributed rank other than 0?)")
        processor = build_processor(twin, tokenizer)
        if processor is not None:
            from trainkit_core.models.processors import save_processor

            save_processor(processor, tmp)
        else:
            tokenizer.save_pretrained(tmp)
        info = {
            "kind": "trainkit-twin",
            "twin": twin.name,
            "twin_of": list(twin.twin_of),
            "build_version": BUILD_VERSION,
            "processor": processor is not None,
        }
        (tmp / MARKER).write_text(json.dumps(info, indent=2))
        try:
            os.rename(tmp, target)
        except OSError:
            if not (target / MARKER).is_file():
                raise
            # another job built it first: its copy is identical (same seed, same recipe)
    finally:
        if tmp.exists():
            shutil.rmtree(tmp, ignore_errors=True)
    return target

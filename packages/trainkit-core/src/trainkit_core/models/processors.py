"""The processor (image processor + tokenizer) of a multimodal checkpoint, loaded where torchvision is missing.

Why: Gemma 4's stock processor also holds a video processor, which needs torchvision,
and torchvision cannot be installed beside the CPU torch of these machines
(`docs/tokenizers_and_processors.md`). `Gemma4ImageTextProcessor` is Gemma 4's own
processor without the video processor: its image processor, its tokenizer and, for a
model with an audio tower (E2B, E4B), its audio feature extractor (numpy only), so image
and audio placement and token counts are exactly the stock ones. Both Gemma 3 and Gemma 4 use their slow (PIL and numpy) image processors here,
which need no torchvision; a GPU image with torchvision gets the stock processors.

A processor is saved as its parts (``preprocessor_config.json``, the tokenizer files and,
with audio, the feature extractor's settings under ``feature_extractor`` in
``processor_config.json``, as transformers writes a composite processor).
Heavy imports stay inside the functions.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from trainkit_core.errors import MissingExtraError


def gemma4_image_text_processor(image_processor: Any, tokenizer: Any, feature_extractor: Any = None) -> Any:
    """Gemma 4's processor without its video part; with audio where `feature_extractor` is given."""
    try:
        from transformers import Gemma4Processor
    except ImportError as exc:
        # transformers up to 5.17 (the newest Unsloth 2026.10 allows) imports torchvision with
        # it, through its torchvision image processor; 5.24 does not.
        import transformers

        raise MissingExtraError(
            f"Gemma 4's processor cannot be loaded: transformers {transformers.__version__} imports torchvision "
            "with it, and torchvision is not installed (or does not load)",
            hint="install the torchvision build that matches your torch, or transformers 5.24 or later",
        ) from exc
    from transformers.processing_utils import ProcessorMixin

    class Gemma4ImageTextProcessor(Gemma4Processor):  # type: ignore[misc]
        # Not named `feature_extractor`: ProcessorMixin would take a parameter of that name for a required part.
        def __init__(self, image_processor: Any, tokenizer: Any, chat_template: Any = None, audio: Any = None) -> None:
            self.image_seq_length = image_processor.max_soft_tokens
            self.image_token_id = tokenizer.image_token_id
            self.boi_token, self.eoi_token = tokenizer.boi_token, tokenizer.eoi_token
            self.image_token = tokenizer.image_token
            self.video_token = "<|video|>"
            self.video_token_id = tokenizer.convert_tokens_to_ids(self.video_token)
            self.audio_token = getattr(tokenizer, "audio_token", None)
            self.audio_token_id = getattr(tokenizer, "audio_token_id", None)
            self.boa_token = getattr(tokenizer, "boa_token", None)
            self.eoa_token = getattr(tokenizer, "eoa_token", None)
            self.audio_seq_length, self.audio_ms_per_token = 750, 40
            ProcessorMixin.__init__(
                self, image_processor=image_processor, tokenizer=tokenizer, chat_template=chat_template
            )
            self.feature_extractor = audio  # None: a model without an audio tower

    return Gemma4ImageTextProcessor(image_processor, tokenizer, audio=feature_extractor)


def save_processor(processor: Any, folder: Path) -> None:
    """The processor into `folder`; Gemma 4's as its parts (image processor config and tokenizer)."""
    if type(processor).__name__ == "Gemma4ImageTextProcessor":
        processor.image_processor.save_pretrained(folder)
        processor.tokenizer.save_pretrained(folder)
        if processor.feature_extractor is not None:
            import json

            settings = processor.feature_extractor.to_dict()
            # Its arrays (mel filters, window) are computed from the settings by its constructor.
            kept = {k: v for k, v in settings.items() if not hasattr(v, "shape")}
            config = {"feature_extractor": kept}
            (folder / PROCESSOR_CONFIG).write_text(json.dumps(config, indent=2, sort_keys=True) + "\n")
    else:
        processor.save_pretrained(folder)


#: Where a composite processor's parts other than the image processor and tokenizer are saved.
PROCESSOR_CONFIG = "processor_config.json"


def _saved_feature_extractor(folder: Path) -> Any:
    """Gemma 4's audio feature extractor as saved in `folder`, or None where none is."""
    import json

    path = folder / PROCESSOR_CONFIG
    if not path.is_file():
        return None
    saved = json.loads(path.read_text()).get("feature_extractor")
    if not isinstance(saved, dict):
        return None
    from transformers.models.gemma4.feature_extraction_gemma4 import Gemma4AudioFeatureExtractor

    fields = {k: v for k, v in saved.items() if k not in ("feature_extractor_type", "processor_class")}
    return Gemma4AudioFeatureExtractor(**fields)


def load_processor(source: str | Path, *, model_type: str | None = None) -> Any:
    """The processor saved in folder `source`; None when it holds none (a text-only model).

    `model_type` says which model it serves where the folder has no ``config.json``
    (an adapter's folder).
    """
    folder = Path(source)
    if not any((folder / name).is_file() for name in ("processor_config.json", "preprocessor_config.json")):
        return None
    from transformers import AutoConfig, AutoTokenizer

    if (model_type or AutoConfig.from_pretrained(source).model_type) == "gemma4":
        from transformers.models.gemma4.image_processing_pil_gemma4 import Gemma4ImageProcessorPil

        return gemma4_image_text_processor(
            Gemma4ImageProcessorPil.from_pretrained(source),
            AutoTokenizer.from_pretrained(source),
            feature_extractor=_saved_feature_extractor(folder),
        )
    from transformers import AutoProcessor

    return AutoProcessor.from_pretrained(source, backend="pil")

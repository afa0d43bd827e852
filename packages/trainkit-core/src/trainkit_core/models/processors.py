"""The processor (image processor + tokenizer) of a multimodal checkpoint, loaded where torchvision is missing.

Why: Gemma 4's stock processor also holds a video processor and an audio feature
extractor, and its video processor needs torchvision, which cannot be installed beside
the CPU torch of these machines (`docs/tokenizers_and_processors.md`). Pictures need
neither: `Gemma4ImageTextProcessor` is Gemma 4's own processor with only its image
processor and tokenizer, so image placement and token counts are exactly the stock
ones. Both Gemma 3 and Gemma 4 use their slow (PIL and numpy) image processors here,
which need no torchvision; a GPU image with torchvision gets the stock processors.

A processor is saved as its parts (``preprocessor_config.json`` and the tokenizer
files), which the stock `AutoProcessor` reads wherever torchvision is installed.
Heavy imports stay inside the functions.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from trainkit_core.errors import MissingExtraError


def gemma4_image_text_processor(image_processor: Any, tokenizer: Any) -> Any:
    """Gemma 4's processor without its video and audio parts (see the module docstring)."""
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
        def __init__(self, image_processor: Any, tokenizer: Any, chat_template: Any = None) -> None:
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

    return Gemma4ImageTextProcessor(image_processor, tokenizer)


def save_processor(processor: Any, folder: Path) -> None:
    """The processor into `folder`; Gemma 4's as its parts (image processor config and tokenizer)."""
    if type(processor).__name__ == "Gemma4ImageTextProcessor":
        processor.image_processor.save_pretrained(folder)
        processor.tokenizer.save_pretrained(folder)
    else:
        processor.save_pretrained(folder)


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
            Gemma4ImageProcessorPil.from_pretrained(source), AutoTokenizer.from_pretrained(source)
        )
    from transformers import AutoProcessor

    return AutoProcessor.from_pretrained(source, backend="pil")

"""`--packing` against padded batches: tokens/s of one epoch of the tiny model on a dataset of mixed lengths.

The dataset: the demo's opposites, each prompt and answer repeated 1 to `--longest` times
(chosen at random), so examples run from about 15 to a few hundred tokens, as real chat
data does. Both runs train the same examples for one epoch with the hf backend, from the
same seed, through `build_trainer` (the job's own trainer): padded batches of
`--batch` examples (trl pads each batch to its longest example), and packed rows of
`--max-seq-length` tokens, as many a step as hold about `--batch` examples on average.
tokens/s counts the examples' own tokens (no padding) over the wall time of
`trainer.train()`; the runs take turns `--rounds` times, and the best of each is
printed with the packed/padded ratio, measured in the same run.

    .venv/bin/python bench/packing.py [--examples 1200] [--batch 16] [--max-seq-length 512] [--rounds 2]
"""

from __future__ import annotations

import argparse
import json
import random
import tempfile
import time
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]


def conversations(count: int, longest: int, seed: int = 0) -> list[list[dict[str, str]]]:
    rng = random.Random(seed)
    demo = [json.loads(line)["messages"] for line in (REPO / "datasets/demo/train.jsonl").read_text().splitlines()]
    chosen = []
    for i in range(count):
        user, assistant = demo[i % len(demo)]
        times = rng.randint(1, longest)
        chosen.append(
            [
                {"role": "user", "content": " ".join([user["content"]] * times)},
                {"role": "assistant", "content": " ".join([assistant["content"]] * times)},
            ]
        )
    return chosen


def one_epoch(folder: Path, tokenizer: Any, rows: list[dict[str, list[int]]], packing: bool, batch: int, length: int):  # type: ignore[no-untyped-def]
    """(seconds, mean loss, optimizer steps, positions computed: tokens plus padding) of one epoch over `rows`."""
    from trainkit_core.training.backends import build_trainer, load_hf
    from trainkit_core.training.config import TrainConfig

    config = TrainConfig(
        dataset="bench", epochs=1, batch_size=batch, max_seq_length=length, packing=packing, warmup_steps=0
    ).resolve()
    model = load_hf(str(folder), config)
    with tempfile.TemporaryDirectory() as out:
        trainer = build_trainer("hf", model, tokenizer, rows, config, Path(out), [])
        trainer.args.save_strategy = "no"
        positions = sum(int(b["input_ids"].numel()) for b in trainer.get_train_dataloader())
        start = time.perf_counter()
        result = trainer.train()
        seconds = time.perf_counter() - start
    return seconds, float(result.training_loss), int(result.global_step), positions


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--examples", type=int, default=1200)
    parser.add_argument("--longest", type=int, default=12, help="most repetitions of a prompt and answer")
    parser.add_argument("--batch", type=int, default=16, help="examples per padded batch")
    parser.add_argument("--max-seq-length", type=int, default=512)
    parser.add_argument("--rounds", type=int, default=2)
    args = parser.parse_args()

    from trainkit_core.models.chat_format import encode_for_training, get_format, render
    from trainkit_core.models.tiny_model import build_tokenizer, ensure_tiny_base
    from trainkit_core.training.packing import packed_rows

    fmt = get_format("gemma3")
    chats = conversations(args.examples, args.longest)
    tokenizer = build_tokenizer([render(c, fmt) for c in chats], fmt.name)
    rows = [encode_for_training(tokenizer, c, fmt, max_length=args.max_seq_length) for c in chats]
    lengths = [len(r["input_ids"]) for r in rows]
    tokens = sum(lengths)
    packed = packed_rows(lengths, args.max_seq_length)
    per_step = max(1, round(packed * args.batch / len(rows)))  # packed rows holding about --batch examples
    print(
        f"{len(rows)} examples, {min(lengths)}-{max(lengths)} tokens (mean {tokens / len(rows):.0f}), {tokens:,} tokens; "
        f"padded: batches of {args.batch}; packed: {packed} rows of up to {args.max_seq_length}, {per_step} a step"
    )
    best: dict[bool, tuple[float, float, int, int]] = {}
    with tempfile.TemporaryDirectory() as hf:
        folder = ensure_tiny_base(Path(hf))
        for round_ in range(args.rounds):
            for packing in (False, True):
                seconds, loss, steps, positions = one_epoch(
                    folder, tokenizer, rows, packing, per_step if packing else args.batch, args.max_seq_length
                )
                name = "packed" if packing else "padded"
                print(
                    f"round {round_ + 1} {name}: {seconds:.1f} s, {steps} steps, mean loss {loss:.3f}, "
                    f"{positions:,} positions computed ({positions / tokens - 1:.0%} padding)"
                )
                if packing not in best or seconds < best[packing][0]:
                    best[packing] = (seconds, loss, steps, positions)
    padded, packed_rate = tokens / best[False][0], tokens / best[True][0]
    print(
        f"padded: {padded:,.0f} tokens/s; packed: {packed_rate:,.0f} tokens/s; packed/padded {packed_rate / padded:.2f}x"
    )


if __name__ == "__main__":
    main()

"""Generate ``datasets/shapes``: pictures of coloured shapes a tiny vision twin learns to name.

Each picture is a shape (circle, square, triangle) in a colour (red, green, blue)
drawn with Pillow at a random size and place on a light background with a little
noise, asked about as "What is in the picture?" and answered "a red circle". The eval
pictures are drawn with other random draws (other sizes, places, shades), so an
exact match on eval shows the model reads the picture, not a memorised file.

Run ``python scripts/make_shapes_dataset.py [FOLDER]`` to (re)write the folder; the
output is the same byte for byte on every run (seeded).
"""

from __future__ import annotations

import argparse
import json
import random
from pathlib import Path

SHAPES = ("circle", "square", "triangle")
COLOURS = {"red": (220, 40, 40), "green": (40, 170, 60), "blue": (40, 70, 220)}
QUESTION = "What is in the picture?"
SIZE = 64


def draw(shape: str, colour: str, rng: random.Random) -> bytes:
    import io

    from PIL import Image, ImageDraw

    background = tuple(rng.randint(225, 255) for _ in range(3))
    image = Image.new("RGB", (SIZE, SIZE), background)
    pen = ImageDraw.Draw(image)
    side = rng.randint(SIZE // 2, SIZE - 8)
    x, y = rng.randint(2, SIZE - side - 2), rng.randint(2, SIZE - side - 2)
    fill = tuple(max(0, min(255, c + rng.randint(-25, 25))) for c in COLOURS[colour])
    box = (x, y, x + side, y + side)
    if shape == "circle":
        pen.ellipse(box, fill=fill)
    elif shape == "square":
        pen.rectangle(box, fill=fill)
    else:
        pen.polygon([(x + side // 2, y), (x, y + side), (x + side, y + side)], fill=fill)
    buffer = io.BytesIO()
    image.save(buffer, format="PNG")
    return buffer.getvalue()


#: The demo's default: the twin's recipe needs some 200 pictures of each kind to name
#: unseen ones (40 topped out near 0.85; docs/tutorials/images.md).
TRAIN_PER_CLASS = 200
EVAL_PER_CLASS = 3


def write(
    folder: Path, *, train_per_class: int = TRAIN_PER_CLASS, eval_per_class: int = EVAL_PER_CLASS, seed: int = 0
) -> Path:
    """Write the dataset into `folder` (named ``shapes`` unless given): spec, JSONL files and images/."""
    rng = random.Random(seed)
    (folder / "images").mkdir(parents=True, exist_ok=True)
    splits: dict[str, list[str]] = {"train": [], "eval": []}
    for split, count in (("train", train_per_class), ("eval", eval_per_class)):
        for index in range(count):
            for shape in SHAPES:
                for colour in COLOURS:
                    name = f"images/{split}-{colour}-{shape}-{index:03d}.png"
                    (folder / name).write_bytes(draw(shape, colour, rng))
                    parts = [{"type": "text", "text": QUESTION}, {"type": "image_url", "image_url": {"url": name}}]
                    record = {
                        "messages": [
                            {"role": "user", "content": parts},
                            {"role": "assistant", "content": f"a {colour} {shape}"},
                        ]
                    }
                    splits[split].append(json.dumps(record))
    rng.shuffle(splits["train"])
    for split, lines in splits.items():
        (folder / f"{split}.jsonl").write_text("\n".join(lines) + "\n")
    (folder / "dataset.toml").write_text(
        f'name = "{folder.name}"\n'
        'description = "Name the coloured shape in a picture (drawn with Pillow by scripts/make_shapes_dataset.py)."\n'
        'format = "chat"\ntrain = ["train.jsonl"]\neval = ["eval.jsonl"]\n'
    )
    return folder


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("folder", nargs="?", default=str(Path(__file__).resolve().parents[1] / "datasets" / "shapes"))
    parser.add_argument("--train-per-class", type=int, default=TRAIN_PER_CLASS)
    parser.add_argument("--eval-per-class", type=int, default=EVAL_PER_CLASS)
    args = parser.parse_args()
    print(write(Path(args.folder), train_per_class=args.train_per_class, eval_per_class=args.eval_per_class))


if __name__ == "__main__":
    main()

"""General text a locally built tokenizer learns from, when no dataset's text may be used.

Why: a twin stands for a real model whose tokenizer was fixed long before any user's data,
so its corpus must not know any task either. An earlier corpus held the shapes demo's own
sentence, which made that demo's words whole tokens and every other task's words pieces,
and so flattered the demo. This corpus is built from word lists of several kinds (colours,
shapes, objects, animals, positions, sizes, numbers, verbs, question words) put together in
sentence frames of several kinds, deterministically (a fixed seed), so a real tokenizer's
property is kept (common words whole, rare ones split) for every task alike.
`tests/core/test_corpus.py` fails if any bundled demo's or test's sentence appears in it.
"""

from __future__ import annotations

import random

COLOURS = [
    "red",
    "orange",
    "yellow",
    "green",
    "blue",
    "purple",
    "pink",
    "brown",
    "black",
    "white",
    "grey",
    "gold",
    "silver",
]
SHAPES = [
    "circle",
    "square",
    "triangle",
    "rectangle",
    "star",
    "heart",
    "oval",
    "diamond",
    "line",
    "dot",
    "cross",
    "ring",
]
OBJECTS = [
    "house",
    "car",
    "tree",
    "book",
    "table",
    "chair",
    "ball",
    "cup",
    "door",
    "window",
    "road",
    "river",
    "hill",
    "boat",
    "train",
    "plane",
    "phone",
    "lamp",
    "bed",
    "box",
    "bottle",
    "clock",
    "key",
    "bag",
    "shoe",
    "hat",
    "coat",
    "bread",
    "apple",
    "water",
    "fire",
    "stone",
    "paper",
    "picture",
    "letter",
    "garden",
    "city",
    "school",
]
ANIMALS = ["cat", "dog", "bird", "fish", "horse", "cow", "sheep", "mouse", "lion", "bear", "duck", "frog"]
POSITIONS = [
    "left",
    "right",
    "top",
    "bottom",
    "middle",
    "centre",
    "corner",
    "front",
    "back",
    "inside",
    "outside",
    "above",
    "below",
    "near",
    "far",
]
SIZES = ["small", "big", "large", "little", "tall", "short", "long", "wide", "thin", "thick", "round", "flat"]
NUMBERS = [
    "zero",
    "one",
    "two",
    "three",
    "four",
    "five",
    "six",
    "seven",
    "eight",
    "nine",
    "ten",
    "eleven",
    "twelve",
    "twenty",
    "thirty",
    "forty",
    "fifty",
    "hundred",
    "thousand",
]
VERBS = [
    "is",
    "are",
    "was",
    "has",
    "have",
    "see",
    "look",
    "find",
    "take",
    "give",
    "make",
    "keep",
    "open",
    "close",
    "move",
    "turn",
    "show",
    "tell",
    "ask",
    "answer",
    "write",
    "read",
    "count",
    "draw",
    "name",
    "sort",
    "place",
    "hold",
    "carry",
    "bring",
    "put",
]
QUESTIONS = ["what", "which", "where", "who", "when", "why", "how"]

FRAMES = (
    "The {size} {colour} {object} is on the {position}.",
    "{question_cap} {verb} the {animal} near the {object}?",
    "There are {number} {colour} {shape}s {position} the {object}.",
    "I {verb} a {size} {shape} and a {colour} {animal}.",
    "Please {verb} the {number} {object}s to the {position}.",
    "{question_cap} colour {verb} the {shape}? It {verb} {colour}.",
    "We {verb} {number} {animal}s by the {colour} {object} today.",
    "{number_cap} {colour} {shape}s, the {size} {object} and the {animal}s.",
)
#: Punctuation, digits and letters, so every byte sequence a user writes has short pieces too.
CHARACTERS = "abcdefghijklmnopqrstuvwxyz ABCDEFGHIJKLMNOPQRSTUVWXYZ 0123456789 .,;:!?'\"()[]{}<>-_+=*/\\|@#$%^&~`"


def general_corpus(sentences: int = 400, seed: int = 0) -> tuple[str, ...]:
    """`sentences` generated sentences (one frame filled from the word lists each), then the characters."""
    rng = random.Random(seed)
    out = []
    for _ in range(sentences):
        question = rng.choice(QUESTIONS)
        out.append(
            rng.choice(FRAMES).format(
                size=rng.choice(SIZES),
                colour=rng.choice(COLOURS),
                object=rng.choice(OBJECTS),
                position=rng.choice(POSITIONS),
                question_cap=question.capitalize(),
                verb=rng.choice(VERBS),
                animal=rng.choice(ANIMALS),
                number=rng.choice(NUMBERS),
                number_cap=rng.choice(NUMBERS).capitalize(),
                shape=rng.choice(SHAPES),
            )
        )
    return (*out, CHARACTERS)

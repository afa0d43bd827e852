"""No locally built tokenizer learns from a demo's or a test's own sentences.

A twin's tokenizer stands for a real model's, fixed before any task: if its corpus held a
demo's words, that demo would tokenize into whole words and every other task into pieces.
"""

from __future__ import annotations

import importlib.util
import json
import re
from pathlib import Path

from trainkit_core.models import corpus, tiny_model, twins

REPO = Path(__file__).resolve().parents[2]
BUNDLED = [REPO / "datasets", REPO / "packages/trainkit-core/src/trainkit_core/data/datasets"]


def _strings(value: object) -> list[str]:
    """Every message text in a row, whatever its format (chat, preference pairs, prompts)."""
    if isinstance(value, dict):
        found = []
        for key, item in value.items():
            if key in ("content", "text", "reference") and isinstance(item, str):
                found.append(item)
            else:
                found += _strings(item)
        return found
    if isinstance(value, list):
        return [s for item in value for s in _strings(item)]
    return []


def demo_sentences() -> set[str]:
    """Every user and assistant text of the bundled datasets, and the shapes demo's question and answers."""
    found: set[str] = set()
    for root in BUNDLED:
        for path in root.rglob("*.jsonl"):
            for line in path.read_text().splitlines():
                if not line.strip():
                    continue
                found.update(_strings(json.loads(line)))
    spec = importlib.util.spec_from_file_location("make_shapes_dataset", REPO / "scripts/make_shapes_dataset.py")
    assert spec and spec.loader
    shapes = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(shapes)
    found.add(shapes.QUESTION)
    found.update(f"a {colour} {shape}" for colour in shapes.COLOURS for shape in shapes.SHAPES)
    # Sentences of three words or more: shorter ones are common English any corpus has.
    return {s.strip() for s in found if len(s.split()) >= 3}


def normal(text: str) -> str:
    return re.sub(r"\s+", " ", text).casefold()


def test_the_demos_are_found() -> None:
    """The scan reaches the demos (else the test below could pass on nothing)."""
    sentences = demo_sentences()
    assert "What is in the picture?" in sentences
    assert any(s.startswith("Opposites:") for s in sentences)
    assert len(sentences) > 500


def test_no_tokenizer_corpus_holds_a_demo_sentence() -> None:
    corpora = {"twins": " \n ".join(twins.CORPUS), "tiny": " \n ".join(tiny_model.DEFAULT_CORPUS)}
    for name, text in corpora.items():
        held = sorted(s for s in demo_sentences() if normal(s) in normal(text))
        assert not held, f"the {name} tokenizer corpus holds demo sentences: {held[:5]}"


def test_the_corpus_is_general_and_fixed() -> None:
    text = " ".join(corpus.general_corpus())
    assert corpus.general_corpus() == corpus.general_corpus()
    for kind in (corpus.COLOURS, corpus.SHAPES, corpus.OBJECTS, corpus.POSITIONS, corpus.NUMBERS, corpus.VERBS):
        assert sum(word in text for word in kind) >= len(kind) * 0.8

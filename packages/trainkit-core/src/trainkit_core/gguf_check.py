"""Proof that a GGUF export answers like `trainkit infer`, by running it in llama.cpp.

Why: the two complaints about GGUF exports in every fine-tuning tool's tracker are a
conversion that silently changes the model and a chat template or stop token lost on
the way, so the model talks gibberish or never stops. Here the file is loaded with
llama.cpp (``llama-cpp-python``), the eval prompts are rendered in the chat format
and tokenized *by llama.cpp* (the tokens must equal the training tokenizer's), and it
generates greedily until its end-of-turn token; the answers are compared with
`trainkit infer`'s. `check_result` says whether the export may be handed over: an f32
or f16 file must give the same answers, every answer must end at end of turn unless
infer's did not either, and a quantised file records its exact-match rate.

``llama_cpp`` is imported inside the function (an optional, compiled dependency).
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

from trainkit_core.errors import JobError

#: Types whose answers must equal infer's; the quantised ones only report how far they are.
EXACT_TYPES = ("f32", "f16")


def generate_with_llama_cpp(
    gguf_file: Path,
    prompts: Sequence[tuple[str, list[int]]],
    *,
    stop_ids: Sequence[int],
    max_new_tokens: int,
) -> list[dict[str, Any]]:
    """Greedy answers of llama.cpp to (rendered prompt, reference token ids) pairs."""
    try:
        from llama_cpp import Llama
    except ImportError as exc:
        raise JobError(
            "GGUF export is verified with llama-cpp-python, which is not installed here",
            hint="pip install llama-cpp-python (it compiles llama.cpp with cmake and a C++ compiler)",
        ) from exc

    llm = Llama(model_path=str(gguf_file), n_ctx=1024, n_threads=2, n_batch=512, verbose=False, seed=0)
    answers = []
    try:
        for text, reference_ids in prompts:
            ids = llm.tokenize(text.encode("utf-8"), add_bos=False, special=True)
            new: list[int] = []
            stopped = False
            llm.reset()
            for token in llm.generate(ids, top_k=1, top_p=1.0, temp=0.0, repeat_penalty=1.0, reset=True):
                if token in stop_ids:
                    stopped = True
                    break
                new.append(int(token))
                if len(new) >= max_new_tokens:
                    break
            answers.append(
                {
                    "prompt_tokens_equal": list(ids) == list(reference_ids),
                    "ids": new,
                    "text": llm.detokenize(new, special=False).decode("utf-8", errors="replace"),
                    "finish_reason": "stop" if stopped else "length",
                }
            )
    finally:
        llm.close()
    return answers


def compare(reference: Sequence[dict[str, Any]], answers: Sequence[dict[str, Any]], quant: str) -> dict[str, Any]:
    """How the GGUF's answers relate to infer's, and whether the export passes."""
    same = [
        a["text"] == r["text"] and a["finish_reason"] == r["finish_reason"]
        for r, a in zip(reference, answers, strict=True)
    ]
    tokens_equal = all(a["prompt_tokens_equal"] for a in answers)
    stops = sum(a["finish_reason"] == "stop" for a in answers)
    problems = []
    if not tokens_equal:
        problems.append("llama.cpp tokenizes the prompts differently from the model's tokenizer")
    if quant in EXACT_TYPES and not all(same):
        problems.append(f"{same.count(False)} of {len(same)} {quant} answers differ from trainkit infer's")
    if answers and stops == 0 and any(r["finish_reason"] == "stop" for r in reference):
        problems.append("the GGUF never emitted its end-of-turn token")
    return {
        "type": quant,
        "prompts": len(same),
        "exact_match_rate": round(sum(same) / len(same), 4) if same else None,
        "stopped_at_end_of_turn": stops,
        "prompt_tokens_equal": tokens_equal,
        "passed": not problems,
        "problems": problems,
        "examples": [
            {"infer": r["text"], "gguf": a["text"], "gguf_finish_reason": a["finish_reason"]}
            for r, a in list(zip(reference, answers, strict=True))[:3]
        ],
    }

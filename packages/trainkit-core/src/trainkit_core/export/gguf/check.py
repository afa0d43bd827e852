"""Proof that a GGUF export answers like `trainkit infer`, by running it in llama.cpp.

Why: the two complaints about GGUF exports in every fine-tuning tool's tracker are a
conversion that silently changes the model and a chat template or stop token lost on
the way, so the model talks gibberish or never stops. Here the file is served by
llama.cpp's own server code in this process (``xllamacpp``: a prebuilt llama.cpp, no
compiler needed), which reads everything from the file as Ollama and LM Studio do:

- the eval prompts are rendered in the chat format and tokenized *by llama.cpp* (the
  tokens must equal the training tokenizer's);
- it completes them greedily and stops where *its* end-of-generation tokens, read
  from the file's metadata, say (no stop ids are passed in);
- it answers the same conversations again through its chat endpoint, rendered by the
  chat template stored in the file: the answers must be the same.

`compare` says whether the export may be handed over: an f32 or f16 file must give
infer's answers, every answer must end at end of turn unless infer's did not either,
and a quantised file records its exact-match rate. ``xllamacpp`` is imported inside
the function (an optional dependency of 34 MB).
"""

from __future__ import annotations

import json
import urllib.request
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from trainkit_core.errors import JobError

if TYPE_CHECKING:
    from trainkit_core.models.chat_format import ChatFormat

#: Types whose answers must equal infer's; the quantised ones only report how far they are.
EXACT_TYPES = ("f32", "f16")


def _answer(result: dict[str, Any], where: str) -> dict[str, Any]:
    """Text, finish reason and token count of one llama.cpp completion (the end-of-generation token not counted).

    Not the token ids: llama.cpp's server leaves a token that ends inside a UTF-8 character out of
    its per-token output (logprobs), so those ids can miss one; the text and the count are whole."""
    if "error" in result:
        raise JobError(f"llama.cpp refused the {where} request: {result['error'].get('message', result['error'])}")
    choice = result["choices"][0]
    stopped = choice["finish_reason"] == "stop"
    text = choice["text"] if "text" in choice else choice["message"]["content"]
    return {
        "text": text or "",
        "finish_reason": "stop" if stopped else "length",
        "tokens": int(result["usage"]["completion_tokens"]) - int(stopped),
        "prompt_tokens": int(result["usage"]["prompt_tokens"]),
    }


def _same_answer(chat: dict[str, Any], completion: dict[str, Any]) -> bool:
    """Whether the chat endpoint (the file's template) answered as the plain completion (trainkit's rendering).

    Same prompt length, tokens and end; the texts equal but for a character cut at the end (the
    chat endpoint drops an incomplete last UTF-8 character, the completion endpoint writes U+FFFD)."""
    keys = ("prompt_tokens", "tokens", "finish_reason")
    texts = {answer["text"].rstrip("\ufffd") for answer in (chat, completion)}
    return all(chat[k] == completion[k] for k in keys) and len(texts) == 1


def _tokenize(address: str, text: str) -> list[int]:
    """llama.cpp's tokens of `text`, special tokens parsed, nothing added: its server's /tokenize, on loopback."""
    body = json.dumps({"content": text, "add_special": False, "parse_special": True}).encode()
    request = urllib.request.Request(f"{address}/tokenize", data=body, headers={"Content-Type": "application/json"})
    with urllib.request.urlopen(request, timeout=60) as response:
        return [int(t) for t in json.loads(response.read())["tokens"]]


#: Seconds a llama.cpp server is given to stop (`release_server`) before the job goes on without it.
SERVER_STOP_S = 30.0


def release_server(held: list[Any], timeout_s: float = SERVER_STOP_S) -> None:
    """Drop the last reference to an xllamacpp server (`held`, a one-item list), waiting at most `timeout_s`.

    The server's destructor stops llama.cpp's loop and joins its thread. With xllamacpp
    2026.10 that join was seen to hang for good, once in a few dozen runs (a test stuck at
    ``del server`` with no CPU use until its timeout): an export would hang after its check.
    The destructor runs on a thread of its own, so at worst that thread, not the job, waits.
    """
    import threading

    def drop() -> None:
        held.clear()

    stopper = threading.Thread(target=drop, name="llama.cpp-server-stop", daemon=True)
    stopper.start()
    stopper.join(timeout_s)


def generate_with_llama_cpp(
    gguf_file: Path,
    prompts: Sequence[tuple[list[dict[str, str]], str, list[int]]],
    *,
    max_new_tokens: int,
    threads: int = 2,
) -> list[dict[str, Any]]:
    """Greedy answers of llama.cpp to (messages, rendered prompt, reference token ids) triples."""
    answers, _ = check_with_llama_cpp(gguf_file, prompts, max_new_tokens=max_new_tokens, threads=threads)
    return answers


def check_with_llama_cpp(
    gguf_file: Path,
    prompts: Sequence[tuple[list[dict[str, str]], str, list[int]]],
    *,
    max_new_tokens: int,
    threads: int = 2,
    fmt: ChatFormat | None = None,
) -> tuple[list[dict[str, Any]], dict[str, Any] | None]:
    """llama.cpp's greedy answers (`generate_with_llama_cpp`) and, given the chat format, its tool template's check."""
    try:
        import xllamacpp
    except ImportError as exc:
        raise JobError(
            "GGUF export is verified with llama.cpp (the xllamacpp package), which is not installed here",
            hint="pip install 'trainkit-core[gguf]' (xllamacpp is a prebuilt wheel of llama.cpp)",
        ) from exc

    params = xllamacpp.CommonParams()
    params.model.path = str(gguf_file)
    params.n_ctx = 1024
    params.n_parallel = 1
    params.cpuparams.n_threads = threads
    params.cpuparams_batch.n_threads = threads
    params.warmup = False
    # Keys and values cached in f32, not llama.cpp's default f16: the check is about the file's
    # weights, and f16 rounding of the cache flips the near ties of a briefly trained model.
    params.cache_type_k = xllamacpp.ggml_type.GGML_TYPE_F32
    params.cache_type_v = xllamacpp.ggml_type.GGML_TYPE_F32
    params.verbosity = -1
    held = [xllamacpp.Server(params)]
    server = held[0]
    # Greedy (top_k 1, temperature 0), no penalties; each prompt evaluated afresh.
    request = {
        "max_tokens": max_new_tokens,
        "temperature": 0.0,
        "top_k": 1,
        "repeat_penalty": 1.0,
        "cache_prompt": False,
    }
    answers = []
    for messages, text, reference_ids in prompts:
        completion = _answer(server.handle_completions({**request, "prompt": text}), "completion")
        chat = _answer(server.handle_chat_completions({**request, "messages": messages}), "chat completion")
        answers.append(
            {
                **completion,
                "prompt_tokens_equal": _tokenize(server.listening_address, text) == list(reference_ids),
                "chat_template_equal": _same_answer(chat, completion),
            }
        )
    tools = tool_template_check(server.listening_address, fmt) if fmt is not None else None
    del server
    release_server(held)  # stops llama.cpp's server loop and frees the model
    return answers, tools


#: A request that declares a function, for `tool_template_check`: what an agent sends first.
PROBE_TOOLS = [
    {
        "type": "function",
        "function": {
            "name": "convert",
            "description": "Convert a length between units.",
            "parameters": {
                "type": "object",
                "properties": {"value": {"type": "number"}, "unit": {"type": "string"}},
                "required": ["value", "unit"],
            },
        },
    }
]
PROBE_MESSAGES = [
    {"role": "system", "content": "Answer briefly."},
    {"role": "user", "content": "Hello."},
    {"role": "assistant", "content": "Hello! What shall I convert?"},
    {"role": "user", "content": "How many feet is 3 m?"},
]


def tool_template_check(address: str, fmt: ChatFormat) -> dict[str, Any]:
    """Whether llama.cpp renders a request that declares tools as trainkit's chat format does.

    llama.cpp renders a request with tools by the file's ``tool_use`` template (every other
    request by its default, plain template), here through its own `/apply-template`, as its
    chat endpoint would: the system text, the declarations and the turns must come out as
    `chat_format.render_prompt` writes them. Only a first request: llama.cpp (xllamacpp
    2026.10) leaves `tool` messages out of what it hands any template, so a conversation that
    goes on after a tool's answer is rendered by trainkit (or sent as a prompt), not by the file.
    """
    from trainkit_core.models.chat_format import render_prompt

    body = {"messages": PROBE_MESSAGES, "tools": PROBE_TOOLS}
    request = urllib.request.Request(
        f"{address}/apply-template", data=json.dumps(body).encode(), headers={"Content-Type": "application/json"}
    )
    with urllib.request.urlopen(request, timeout=60) as response:
        rendered = json.loads(response.read())["prompt"]
    expected = render_prompt(PROBE_MESSAGES, fmt, tools=PROBE_TOOLS)
    return {"tool_template_equal": rendered == expected, "tool_template_rendered": rendered}


def compare(
    reference: Sequence[dict[str, Any]],
    answers: Sequence[dict[str, Any]],
    quant: str,
    tools: dict[str, Any] | None = None,
) -> dict[str, Any]:
    """How the GGUF's answers (and, when checked, its tool template) relate to infer's; whether the export passes."""
    same = [
        a["text"] == r["text"] and a["finish_reason"] == r["finish_reason"]
        for r, a in zip(reference, answers, strict=True)
    ]
    tokens_equal = all(a["prompt_tokens_equal"] for a in answers)
    template_equal = all(a["chat_template_equal"] for a in answers)
    stops = sum(a["finish_reason"] == "stop" for a in answers)
    problems = []
    if not tokens_equal:
        problems.append("llama.cpp tokenizes the prompts differently from the model's tokenizer")
    if not template_equal:
        problems.append("the chat template in the file renders the conversations differently from the chat format")
    if tools is not None and not tools["tool_template_equal"]:
        problems.append(
            "the file's tool_use template renders a conversation with a tool call differently from the chat format "
            f"(llama.cpp gave {tools['tool_template_rendered'][-200:]!r})"
        )
    if quant in EXACT_TYPES and not all(same):
        first = same.index(False)
        problems.append(
            f"{same.count(False)} of {len(same)} {quant} answers differ from trainkit infer's (the first, prompt "
            f"{first + 1}: infer {reference[first]['text']!r}, {reference[first]['finish_reason']}; llama.cpp "
            f"{answers[first]['text']!r}, {answers[first]['finish_reason']})"
        )
    if answers and stops == 0 and any(r["finish_reason"] == "stop" for r in reference):
        problems.append("the GGUF never emitted its end-of-turn token")
    return {
        "type": quant,
        "verified_with": "llama.cpp (xllamacpp)",
        "prompts": len(same),
        "exact_match_rate": round(sum(same) / len(same), 4) if same else None,
        "stopped_at_end_of_turn": stops,
        "prompt_tokens_equal": tokens_equal,
        "chat_template_equal": template_equal,
        **({"tool_template_equal": tools["tool_template_equal"]} if tools is not None else {}),
        "passed": not problems,
        "problems": problems,
        "examples": [
            {"infer": r["text"], "gguf": a["text"], "gguf_finish_reason": a["finish_reason"]}
            for r, a in list(zip(reference, answers, strict=True))[:3]
        ],
    }

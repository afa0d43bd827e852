"""Eval sets on the eval volume: ``sets/<name>/examples.jsonl``, and reports under ``reports/``.

An eval example is a chat conversation ending with the reference answer:
``{"messages": [..., {"role": "user", ...}, {"role": "assistant", "content": REF}]}``,
or a ``{"prompt", "completion"}`` pair. Adding examples checks every one first and
writes the whole set at once (atomic), so bad input leaves the set as it was.
Reports: ``reports/<report id>/report.json`` (metrics) and ``examples.jsonl`` (each
example with the tuned and base answers).
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, Mapping
from typing import Any

from trainkit_core.datasets import strict_json
from trainkit_core.errors import NotFoundError, UsageError
from trainkit_core.ids import check_name, new_stamped_id
from trainkit_core.plugins.hookspecs import KVStore, Volume
from trainkit_core.toolkit.kv_lock import kv_lock

REPORT_ID_PATTERN = re.compile(r"^ev-[0-9]{8}-[0-9]{6}-[0-9a-f]{6}$")
ROLES = ("system", "user", "assistant", "tool")
#: What a message of a tool-calling conversation carries besides role and content.
TOOL_KEYS = ("tool_calls", "tool_call_id", "reasoning_content", "weight")


def set_path(name: str) -> str:
    return f"sets/{check_name(name, what='eval set name')}/examples.jsonl"


def report_dir(report_id: str) -> str:
    return f"reports/{check_report_id(report_id)}"


def new_report_id(now: float | None = None) -> str:
    return new_stamped_id("ev", now)


def check_report_id(value: str) -> str:
    if not isinstance(value, str) or not REPORT_ID_PATTERN.fullmatch(value):
        raise UsageError(f"{value!r} is not an eval report id (expected ev-YYYYMMDD-HHMMSS-xxxxxx)")
    return value


def normalize_example(record: Any, *, where: str) -> dict[str, Any]:
    """One example as ``{"messages": [...]}`` ending with the assistant's reference; `UsageError` naming `where`."""
    if not isinstance(record, Mapping):
        raise UsageError(f"{where}: an example must be a JSON object")
    if "prompt" in record or "completion" in record:
        prompt, completion = record.get("prompt"), record.get("completion")
        if not isinstance(prompt, str) or not prompt.strip() or not isinstance(completion, str):
            raise UsageError(f"{where}: 'prompt' and 'completion' must be strings (prompt non-empty)")
        return {"messages": [{"role": "user", "content": prompt}, {"role": "assistant", "content": completion}]}
    messages = record.get("messages")
    if not isinstance(messages, list) or len(messages) < 2:
        raise UsageError(f"{where}: 'messages' must be a list of at least a user and an assistant message")
    clean = []
    for i, m in enumerate(messages):
        if not isinstance(m, Mapping) or m.get("role") not in ROLES or not _content_ok(m.get("content"), m.get("role")):
            raise UsageError(
                f"{where}: message {i} needs a role ({', '.join(ROLES)}) and string content "
                "(or, in a user or system message, text, image_url and input_audio parts)"
            )
        clean.append({"role": m["role"], "content": m["content"] or ""} | {k: m[k] for k in TOOL_KEYS if k in m})
    if clean[-1]["role"] != "assistant" or clean[-2]["role"] not in ("user", "tool"):
        raise UsageError(
            f"{where}: the last two messages must be the user's question (or a tool's answer) and the "
            "assistant's reference"
        )
    tools = record.get("tools")
    if tools is not None and not (isinstance(tools, list) and all(isinstance(t, Mapping) for t in tools)):
        raise UsageError(f"{where}: 'tools' must be a list of tool definitions")
    return {"messages": clean} | ({"tools": tools} if tools else {})


def _content_ok(content: Any, role: Any) -> bool:
    """A string, or (not for the assistant) a list of text, image_url and input_audio parts as the datasets hold them."""
    if isinstance(content, str):
        return True
    if content is None and role == "assistant":
        return True  # an assistant's message of calls only (checked when rendered)
    if role == "assistant" or not isinstance(content, list) or not content:
        return False
    return all(
        isinstance(p, Mapping)
        and (
            (p.get("type") == "text" and isinstance(p.get("text"), str))
            or (p.get("type") == "image_url" and isinstance((p.get("image_url") or {}).get("url"), str))
            or (p.get("type") == "input_audio" and isinstance(p.get("input_audio"), Mapping))
        )
        for p in content
    )


def parse_jsonl(data: bytes, *, file: str) -> list[dict[str, Any]]:
    """Examples of a JSONL file; `UsageError` with file and line for the first bad one."""
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise UsageError(f"{file}: not UTF-8 ({exc.reason} at byte {exc.start})") from None
    examples = []
    for number, line in enumerate(text.splitlines(), start=1):
        if not line.strip():
            continue
        try:
            record = strict_json.loads(line)
        except strict_json.StrictJSONError as exc:
            raise UsageError(f"{file}:{number}: invalid JSON: {exc}") from None
        examples.append(normalize_example(record, where=f"{file}:{number}"))
    if not examples:
        raise UsageError(f"{file}: no examples")
    return examples


def read_set(volume: Volume, name: str) -> list[dict[str, Any]]:
    path = set_path(name)
    if not volume.exists(path):
        raise NotFoundError(f"no eval set {name!r} on volume {volume.name!r}", hint="add one with: trainkit eval add")
    return parse_jsonl(volume.read_bytes(path), file=f"{volume.name}:{path}")


def add_examples(
    volume: Volume, name: str, examples: Iterable[Any], *, replace: bool = False, lock_kv: KVStore | None = None
) -> dict[str, Any]:
    """Append (or with `replace`, set) the examples of set `name`; duplicates are skipped.

    The set is read, extended and written whole, so concurrent adders hold a lock in
    `lock_kv` around it: without one, the last writer dropped the others' examples.
    """
    set_path(name)  # the name is checked before anything is read
    new = [normalize_example(e, where=f"example {i + 1}") for i, e in enumerate(examples)]
    if not new:
        raise UsageError("no examples to add")
    with kv_lock(lock_kv, f"eval-set/{name}", busy=f"eval set {name!r} is being written by another request"):
        return _merge_into_set(volume, name, new, replace=replace)


def _merge_into_set(volume: Volume, name: str, new: list[dict[str, Any]], *, replace: bool) -> dict[str, Any]:
    path = set_path(name)
    current = [] if replace or not volume.exists(path) else read_set(volume, name)
    seen = {json.dumps(e, sort_keys=True) for e in current}
    added = 0
    for example in new:
        key = json.dumps(example, sort_keys=True)
        if key not in seen:
            seen.add(key)
            current.append(example)
            added += 1
    volume.write_bytes(path, "".join(json.dumps(e) + "\n" for e in current).encode())
    return {"set": name, "added": added, "skipped": len(new) - added, "total": len(current)}


def list_sets(volume: Volume) -> list[dict[str, Any]]:
    if not volume.exists("sets"):
        return []
    found = []
    for entry in volume.listdir("sets"):
        name = entry.path.rsplit("/", 1)[-1]
        path = f"{entry.path}/examples.jsonl"
        if entry.is_dir and volume.exists(path):
            count = sum(1 for line in volume.read_bytes(path).splitlines() if line.strip())
            found.append({"name": name, "examples": count})
    return found


def write_report(volume: Volume, report: Mapping[str, Any], rows: Iterable[Mapping[str, Any]]) -> None:
    base = report_dir(str(report["report_id"]))
    volume.write_bytes(f"{base}/examples.jsonl", "".join(json.dumps(r) + "\n" for r in rows).encode())
    volume.write_bytes(f"{base}/report.json", json.dumps(report, indent=2).encode())


def read_report(volume: Volume, report_id: str, *, examples: bool = False) -> dict[str, Any]:
    base = report_dir(report_id)
    if not volume.exists(f"{base}/report.json"):
        raise NotFoundError(f"no eval report {report_id!r} on volume {volume.name!r}")
    report: dict[str, Any] = json.loads(volume.read_bytes(f"{base}/report.json"))
    if examples and volume.exists(f"{base}/examples.jsonl"):
        report["examples"] = [json.loads(x) for x in volume.read_bytes(f"{base}/examples.jsonl").splitlines() if x]
    return report

"""Benchmark: an unchanged re-sync of a 5,000-file dataset against its full first sync.

Both are measured in the same run on the `local` provider (a temporary trainkit
home), and printed with their ratio; nothing is asserted (timings vary by machine).
An unchanged re-sync hashes the local files and reads one small ``current.json``; it
sends nothing. A 1-file change is timed too, as the common case.

    .venv/bin/python bench/bench_sync.py [--files 5000] [--lines 4]
"""

from __future__ import annotations

import argparse
import json
import os
import tempfile
import time
from pathlib import Path


def make_dataset(folder: Path, files: int, lines: int) -> None:
    folder.mkdir(parents=True)
    names = [f"part-{i:05d}.jsonl" for i in range(files)]
    (folder / "dataset.toml").write_text(
        f'name = "{folder.name}"\nformat = "chat"\ntrain = {json.dumps(names[1:])}\neval = ["{names[0]}"]\n'
    )
    for i, name in enumerate(names):
        rows = (
            json.dumps(
                {
                    "messages": [
                        {"role": "user", "content": f"q {i} {j}"},
                        {"role": "assistant", "content": f"a {i} {j}"},
                    ]
                }
            )
            for j in range(lines)
        )
        (folder / name).write_text("\n".join(rows) + "\n")


def timed(label: str, fn):  # type: ignore[no-untyped-def]
    start = time.perf_counter()
    result = fn()
    elapsed = time.perf_counter() - start
    print(f"{label:28} {elapsed:8.3f} s  sent {len(result.files_sent):5d} file(s), {result.uploaded_bytes:9d} bytes")
    return elapsed, result


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--files", type=int, default=5000)
    parser.add_argument("--lines", type=int, default=4, help="examples per file")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="bench-sync-") as tmp:
        os.environ["TRAINKIT_HOME"] = str(Path(tmp) / "home")
        os.environ["TRAINKIT_DATASETS_DIR"] = str(Path(tmp) / "datasets")
        from trainkit_core import get_provider
        from trainkit_core.datasets.sync import sync_dataset

        make_dataset(Path(tmp) / "datasets" / "bench", args.files, args.lines)
        provider = get_provider("local")
        full, first = timed("first sync (everything)", lambda: sync_dataset(provider, "bench"))
        same, again = timed("re-sync, unchanged", lambda: sync_dataset(provider, "bench"))
        assert again.unchanged and again.uploaded_bytes == 0
        with open(Path(tmp) / "datasets" / "bench" / "part-00001.jsonl", "a") as handle:
            handle.write(
                json.dumps({"messages": [{"role": "user", "content": "x"}, {"role": "assistant", "content": "y"}]})
                + "\n"
            )
        one, changed = timed("re-sync, one file changed", lambda: sync_dataset(provider, "bench"))
        assert changed.files_sent == ["part-00001.jsonl"]
        print(f"files: {args.files + 1} (with dataset.toml), {first.uploaded_bytes} bytes")
        print(f"unchanged re-sync / full first sync = {same / full:.3f}  (first sync is {full / same:.1f}x slower)")
        print(f"one-file re-sync / full first sync  = {one / full:.3f}")


if __name__ == "__main__":
    main()

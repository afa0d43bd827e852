"""Datasets: the local format, validation with file and line, and versioned sync.

Modules: `spec` (``dataset.toml``), `examples` (JSONL parsing and normalising),
`validate` (every problem, `validate_local` / `validate_synced`), `local` (listing and
hashing the local folders), `layout` (where versions live on the data volume), `sync`
(`sync_dataset`: upload only when changed, atomic switch) and `reader` (job side:
`read_synced`). Nothing here imports a heavy library or a provider SDK.
"""

from __future__ import annotations

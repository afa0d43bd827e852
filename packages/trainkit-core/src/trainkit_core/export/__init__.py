"""Exports of trained models: merged full weights (`merged`, the `export` job) and GGUF (`gguf`)."""

"""GGUF files: the writer, one architecture module per family, quantisation and the check."""

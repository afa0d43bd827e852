"""Evals: eval sets on the eval volume, metrics, and reports of tuned vs base.

`sets` (storing examples), `metrics` (exact match, token F1, perplexity) and `client`
(the entry the CLI and API call) are light; `scoring` imports torch inside functions
and runs inside the ``eval`` job and after training.
"""

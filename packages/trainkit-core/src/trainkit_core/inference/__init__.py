"""Generating with trained models.

`request` (the request model) and `client` (the entry the CLI and API call) are
light. `loading` and `generation` import torch and transformers inside their
functions; they run in a provider's warm worker, the infer job or an eval.
"""

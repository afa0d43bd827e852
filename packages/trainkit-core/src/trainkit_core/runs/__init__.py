"""Training runs: the record and its store, the index, events, reconciliation, costs, metadata and retention."""

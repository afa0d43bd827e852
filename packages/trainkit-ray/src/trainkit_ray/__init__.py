"""trainkit's Ray provider: jobs as detached Ray actors, state and volumes on shared storage."""

__version__ = "0.1.0"

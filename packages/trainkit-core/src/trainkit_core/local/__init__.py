"""The built-in `local` provider: everything on this machine, no account needed.

Volumes are directories, the key-value store is SQLite, and job functions run in
detached processes that outlive the command that started them, like cloud jobs.
It registers through the ``trainkit`` entry point (`trainkit_core.local.plugin`).
"""

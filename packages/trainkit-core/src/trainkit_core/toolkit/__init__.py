"""What any provider reuses: key-value rules and locks, folder volumes, the SQLite store,
detached job processes, staging folders and async twins. Nothing here knows trainkit's runs."""

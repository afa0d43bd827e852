"""One module per command family; each defines `register(group)`."""

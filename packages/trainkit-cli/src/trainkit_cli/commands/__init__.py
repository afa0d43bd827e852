"""One module per command family: its commands at module level, and `register(group)`, which adds them."""

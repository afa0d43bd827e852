"""The Modal provider of trainkit. Importing this package does not import modal."""

__version__ = "0.1.0"

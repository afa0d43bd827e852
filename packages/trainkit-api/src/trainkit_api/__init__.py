"""The trainkit web API."""

__version__ = "0.1.0"

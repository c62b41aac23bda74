"""The SDK and CLI version (read without importing anything else)."""

__version__ = "0.1.0"

"""vlash: real-time inference runtime for flow-matching VLA policies."""

__version__ = "0.1.0"

"""wardian: a small, durable core that lets coding agents message each other."""

__version__ = "0.1.0"

__all__ = ["__version__"]

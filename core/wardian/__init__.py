"""wardian: a small, durable core that lets coding agents message each other."""

__version__ = "0.2.0.dev0"

__all__ = ["__version__"]

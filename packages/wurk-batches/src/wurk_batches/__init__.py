"""The wurk-batches plugin."""

from wurk._version import __version__

__all__ = ["__version__"]

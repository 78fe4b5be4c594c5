"""The wurk-unique plugin: unique jobs."""

from wurk._version import __version__

__all__ = ["__version__"]

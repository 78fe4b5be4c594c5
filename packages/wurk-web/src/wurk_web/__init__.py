"""The wurk-web plugin: the dashboard."""

from wurk._version import __version__

__all__ = ["__version__"]

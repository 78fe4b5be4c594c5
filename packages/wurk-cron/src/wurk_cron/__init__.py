"""The wurk-cron plugin: periodic jobs."""

from wurk._version import __version__

__all__ = ["__version__"]

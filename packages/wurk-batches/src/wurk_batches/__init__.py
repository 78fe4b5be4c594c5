"""The wurk-batches plugin: batches of jobs. Coming: so far only the plugin's
registration exists, so ``wurk plugins`` lists it as "coming"."""

from wurk._version import __version__

__all__ = ["__version__"]

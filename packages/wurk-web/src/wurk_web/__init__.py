"""The wurk-web plugin: the dashboard. Coming: so far only the plugin's
registration (and its pool-size default) exists, so ``wurk plugins`` lists it
as "coming"."""

from wurk._version import __version__

__all__ = ["__version__"]

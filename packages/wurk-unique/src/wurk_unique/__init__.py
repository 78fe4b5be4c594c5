"""The wurk-unique plugin: unique jobs. Coming: so far only the plugin's
registration (and its claim on the ``unique_for`` / ``unique_until`` options,
which are refused until the feature lands) exists, so ``wurk plugins`` lists
it as "coming"."""

from wurk._version import __version__

__all__ = ["__version__"]

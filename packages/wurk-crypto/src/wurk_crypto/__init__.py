"""The wurk-crypto plugin: encrypted job arguments. Coming: so far only the
plugin's registration (and its claim on the ``encrypt`` option, which is
refused until the feature lands) exists, and nothing is encrypted yet, so
``wurk plugins`` lists it as "coming"."""

from wurk._version import __version__

__all__ = ["__version__"]

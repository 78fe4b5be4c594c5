"""The wurk-crypto plugin: encrypted job arguments."""

from wurk._version import __version__

__all__ = ["__version__"]

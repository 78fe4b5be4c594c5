"""The wurk-crypto plugin: encrypted job arguments. Coming: so far only the
plugin's registration (and its claim on the ``encrypt`` option, which is
refused until the feature lands) exists, and nothing is encrypted yet, so
``wurk plugins`` lists it as "coming"."""

from importlib import metadata

try:
    # This distribution's own version, not core's: they are released apart.
    __version__ = metadata.version("wurk-crypto")
except metadata.PackageNotFoundError:  # imported from a source tree, not installed
    __version__ = "0+unknown"

__all__ = ["__version__"]

"""The wurk-swarm plugin: the forking supervisor behind ``wurkswarm``. Coming:
so far only the plugin's registration (and its shutdown-grace default)
exists, so ``wurk plugins`` lists it as "coming"."""

from importlib import metadata

try:
    # This distribution's own version, not core's: they are released apart.
    __version__ = metadata.version("wurk-swarm")
except metadata.PackageNotFoundError:  # imported from a source tree, not installed
    __version__ = "0+unknown"

__all__ = ["__version__"]

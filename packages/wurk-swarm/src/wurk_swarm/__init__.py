"""The wurk-swarm plugin: the forking supervisor behind ``wurkswarm``."""

from wurk._version import __version__

__all__ = ["__version__"]

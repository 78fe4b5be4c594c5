"""The wurk-swarm plugin: the forking supervisor behind ``wurkswarm``. Coming:
so far only the plugin's registration (and its shutdown-grace default)
exists, so ``wurk plugins`` lists it as "coming"."""

from wurk._version import __version__

__all__ = ["__version__"]

"""The wurk-web plugin: the dashboard. Coming: so far only the plugin's
registration, its pool-size setting and its pool (:func:`redis_pool`) exist,
so ``wurk plugins`` lists it as "coming"."""

from importlib import metadata

from wurk_web.pool import redis_pool

try:
    # This distribution's own version, not core's: they are released apart.
    __version__ = metadata.version("wurk-web")
except metadata.PackageNotFoundError:  # imported from a source tree, not installed
    __version__ = "0+unknown"

__all__ = ["__version__", "redis_pool"]

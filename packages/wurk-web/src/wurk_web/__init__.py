"""The wurk-web plugin: the Wurk dashboard.

* :func:`create_app` builds the dashboard as one ASGI application;
* :func:`wsgi_app` is the same for WSGI hosts, and :mod:`wurk_web.mount`
  mounts either inside FastAPI, Starlette, Django or Flask;
* ``wurk web`` serves it on its own (``--host``/``--port``, 127.0.0.1 by default).

Feature packages add their pages through the ``wurk_register_web(app)`` hook
(see :mod:`wurk.plugins.web`), never by importing this package.
"""

from __future__ import annotations

from importlib import metadata
from typing import TYPE_CHECKING, Any

from wurk_web.pool import redis_pool

if TYPE_CHECKING:
    from wurk_web.mount import WSGIApp
    from wurk_web.security import ASGIApp


try:
    # This distribution's own version, not core's: they are released apart.
    __version__ = metadata.version("wurk-web")
except metadata.PackageNotFoundError:  # imported from a source tree, not installed
    __version__ = "0+unknown"


def create_app(*args: Any, **kwargs: Any) -> ASGIApp:
    """The dashboard as an ASGI application; see :func:`wurk_web.app.create_app`."""
    # Imported here so that loading the plugin (``wurk plugins``, a worker)
    # never imports the web framework.
    from wurk_web.app import create_app as build

    return build(*args, **kwargs)


def wsgi_app(**options: Any) -> WSGIApp:
    """The dashboard as a WSGI application; see :func:`wurk_web.mount.wsgi_app`."""
    from wurk_web.mount import wsgi_app as build

    return build(**options)


__all__ = ["__version__", "create_app", "redis_pool", "wsgi_app"]

"""Wurk in a Flask application: settings from ``app.config``, pushes from the
handlers, the dashboard at a prefix, and an embedded worker if asked.

::

    app = Flask(__name__)
    app.config["WURK"] = {"redis": {"url": "redis://cache:6379/0"}, "queues": ["default"]}
    wurk_ext = Wurk(app)  # or Wurk() and wurk_ext.init_app(app) in a factory
    wurk_ext.mount_dashboard(app, wurk_web.wsgi_app(config=wurk_ext.config), protect=is_admin)

``app.config["WURK"]`` takes the keys of the YAML file; a misspelt one is
refused when the extension starts. The configuration is the process default
unless one is given (``Wurk(app, config=...)``); either way a handler's
``perform_async`` pushes through it, since every request runs marked with it
(:mod:`wurk.current`).

``app.config["WURK_EMBEDDED"] = True`` (or ``Wurk(app, embedded=True)``) runs
an embedded worker in the web process: two threads beside the requests,
started by ``init_app`` and stopped (drained, the rest given back to their
queues) when the interpreter exits. It is not started under ``WURK_DISABLED=1``
nor in a gunicorn or uWSGI worker (:mod:`wurk.contrib.hosting`). Flask has no
shutdown event of its own: a process killed by SIGTERM without a handler that
exits leaves its jobs in its private list, where reliable fetch finds them.
"""

from __future__ import annotations

import atexit
from collections.abc import Callable, Iterable
from typing import TYPE_CHECKING, Any

from wurk.config.configuration import Config
from wurk.config.defaults import current_config
from wurk.contrib.hosting import configure_from, start_embedded
from wurk.current import running
from wurk.server.embedded import Embedded

if TYPE_CHECKING:
    from flask import Flask

WSGIApp = Callable[[dict[str, Any], Callable[..., Any]], Iterable[bytes]]

__all__ = ["Wurk", "mount_dashboard"]


class Wurk:
    """The Flask extension; ``app.extensions["wurk"]`` is this object."""

    def __init__(self, app: Flask | None = None, *, config: Config | None = None, embedded: bool | None = None):
        self._given = config
        self._embedded_flag = embedded
        self.config: Config | None = config
        #: The embedded worker, when one runs.
        self.embedded: Embedded | None = None
        if app is not None:
            self.init_app(app)

    def init_app(self, app: Flask) -> None:
        # Outside any worker, the configuration at hand is the process default.
        config = self._given or current_config()
        options = configure_from(config, app.config.get("WURK") or {}, 'app.config["WURK"]')
        self.config = config
        app.extensions["wurk"] = self
        app.wsgi_app = _marked(app.wsgi_app, config)  # type: ignore[method-assign, assignment]
        embedded = self._embedded_flag if self._embedded_flag is not None else app.config.get("WURK_EMBEDDED", False)
        if embedded and self.embedded is None:
            self.embedded = start_embedded(config, options)
            if self.embedded is not None:
                atexit.register(self.embedded.stop)

    def mount_dashboard(
        self, app: Flask, dashboard: WSGIApp, prefix: str = "/wurk", protect: Callable[[], object] | None = None
    ) -> None:
        """Serve ``dashboard`` at ``prefix`` of ``app``; see :func:`mount_dashboard`."""
        mount_dashboard(app, dashboard, prefix=prefix, protect=protect)


def _marked(wsgi_app: WSGIApp, config: Config) -> WSGIApp:
    """``wsgi_app``, run as ``config``: a handler's push goes through it."""

    def call(environ: dict[str, Any], start_response: Callable[..., Any]) -> Iterable[bytes]:
        with running(config):
            return wsgi_app(environ, start_response)

    return call


def mount_dashboard(
    app: Flask, dashboard: WSGIApp, *, prefix: str = "/wurk", protect: Callable[[], object] | None = None
) -> None:
    """Serve the WSGI application ``dashboard`` (``wurk_web.wsgi_app(config=...)``)
    at ``prefix`` of ``app``.

    ``protect()`` is asked before every dashboard request, inside the app's
    request context, so it can read ``flask.session``, ``flask.request`` or a
    login extension's current user; a falsey answer is a 403. Without it the
    dashboard is open to whoever reaches the prefix.
    """
    from werkzeug.exceptions import Forbidden

    if not prefix.startswith("/") or prefix == "/":
        raise ValueError(f"a mount prefix starts with / and names a path, got {prefix!r}")
    prefix = prefix.rstrip("/")
    fallback = app.wsgi_app

    def dispatch(environ: dict[str, Any], start_response: Callable[..., Any]) -> Iterable[bytes]:
        path = environ.get("PATH_INFO", "")
        if path != prefix and not path.startswith(prefix + "/"):
            return fallback(environ, start_response)
        if protect is not None:
            with app.request_context(environ):
                allowed = protect()
            if not allowed:
                return Forbidden()(environ, start_response)
        inner = {
            **environ,
            "SCRIPT_NAME": environ.get("SCRIPT_NAME", "").rstrip("/") + prefix,
            "PATH_INFO": path[len(prefix) :] or "/",
        }
        return dashboard(inner, start_response)

    app.wsgi_app = dispatch  # type: ignore[method-assign]

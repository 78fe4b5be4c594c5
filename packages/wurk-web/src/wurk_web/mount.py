"""Putting the dashboard inside another application, ASGI or WSGI.

The dashboard is an ASGI application. An ASGI host mounts it directly
(FastAPI and Starlette: ``app.mount("/wurk", create_app())``) or through
:func:`asgi` (Django's ``asgi.py``); a WSGI host (Flask, Django's
``wsgi.py``) gets it translated by :func:`wsgi_app` and mounted by
:func:`wsgi` or :func:`flask`. None of these import a web framework: they
speak ASGI and WSGI, so they work in any host.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Any, cast

from wurk_web.security import ASGIApp, Receive, Scope, Send

WSGIApp = Callable[[dict[str, Any], Callable[..., Any]], Iterable[bytes]]


def _under(path: str, prefix: str) -> bool:
    return path == prefix or path.startswith(prefix + "/")


def _prefix(prefix: str) -> str:
    if not prefix.startswith("/") or prefix == "/":
        raise ValueError(f"a mount prefix starts with / and names a path, got {prefix!r}")
    return prefix.rstrip("/")


def asgi(prefix: str, dashboard: ASGIApp, fallback: ASGIApp) -> ASGIApp:
    """An ASGI app sending paths under ``prefix`` to ``dashboard``, the rest to ``fallback``.

    For Django's ``asgi.py``::

        application = wurk_web.mount.asgi("/wurk", wurk_web.create_app(), get_asgi_application())
    """
    prefix = _prefix(prefix)

    async def dispatch(scope: Scope, receive: Receive, send: Send) -> None:
        root = str(scope.get("root_path", ""))
        path = str(scope.get("path", ""))
        relative = path[len(root) :] if root and path.startswith(root) else path
        if scope["type"] in ("http", "websocket") and _under(relative, prefix):
            # ASGI's path keeps the mount point; root_path says where the app begins.
            await dashboard({**scope, "root_path": root + prefix}, receive, send)
        else:
            await fallback(scope, receive, send)

    return dispatch


def wsgi_app(dashboard: ASGIApp | None = None, **options: Any) -> WSGIApp:
    """The dashboard as a WSGI application (``create_app(**options)`` unless given)."""
    from a2wsgi import ASGIMiddleware

    if dashboard is None:
        from wurk_web.app import create_app

        dashboard = create_app(**options)
    return cast(WSGIApp, ASGIMiddleware(dashboard))  # type: ignore[arg-type]  # a2wsgi's own ASGI alias


def wsgi(prefix: str, dashboard: WSGIApp, fallback: WSGIApp) -> WSGIApp:
    """A WSGI app sending paths under ``prefix`` to ``dashboard``, the rest to ``fallback``.

    For Django's ``wsgi.py``::

        application = wurk_web.mount.wsgi("/wurk", wurk_web.wsgi_app(), get_wsgi_application())
    """
    prefix = _prefix(prefix)

    def dispatch(environ: dict[str, Any], start_response: Callable[..., Any]) -> Iterable[bytes]:
        path = environ.get("PATH_INFO", "")
        if not _under(path, prefix):
            return fallback(environ, start_response)
        inner = {
            **environ,
            "SCRIPT_NAME": environ.get("SCRIPT_NAME", "").rstrip("/") + prefix,
            "PATH_INFO": path[len(prefix) :] or "/",
        }
        return dashboard(inner, start_response)

    return dispatch


def flask(app: Any, prefix: str = "/wurk", **options: Any) -> Any:
    """Serve the dashboard at ``prefix`` of the Flask app ``app`` (its ``wsgi_app``
    is wrapped); ``options`` go to :func:`wurk_web.create_app`. Returns ``app``."""
    app.wsgi_app = wsgi(prefix, wsgi_app(**options), app.wsgi_app)
    return app

"""What a plugin's ``wurk_register_web(app)`` receives: the dashboard's registry.

The dashboard (``wurk-web``) calls ``wurk_register_web`` once for every
enabled plugin when it builds its application, so a page appears only when
its plugin is installed and switched on. A feature package adds its pages,
JSON routes and static files through the methods below without importing
``wurk_web``, and reads each request through :class:`WebRequest`::

    from wurk.plugins.web import WebError, WebRegistry, WebRequest

    def render_reports(request: WebRequest) -> str:
        return "<h2>Reports</h2><table>…</table>"  # escape what you show

    def list_reports(request: WebRequest) -> object:
        return {"reports": [...], "cursor": request.params.get("cursor")}

    def run_report(request: WebRequest) -> object:
        name = request.path_params["name"]
        if not known(name):
            raise WebError(404, f"no report {name}")
        return {"ran": name}

    @wurk.hookimpl
    def wurk_register_web(app: WebRegistry) -> None:
        app.add_page("/reports", "Reports", render_reports, scripts=["/static/reports/reports.js"])
        app.add_api("/api/reports", list_reports)
        app.add_api("/api/reports/{name}/run", run_report, methods=("POST",))
        app.add_static("/static/reports", Path(__file__).parent / "static")

Handlers are plain synchronous functions: the dashboard runs them off its
event loop, so they may use the data API and Redis freely. Every route, a
plugin's included, passes through the dashboard's security first: the
``authorization`` hook, read-only mode (a non-GET route is refused, and the
page's ``request.read_only`` lets it hide its buttons) and the cross-site
request check, so a plugin never re-implements them.
"""

from __future__ import annotations

import html
import os
from collections.abc import Callable, Mapping, Sequence
from typing import TYPE_CHECKING, Any, Protocol

if TYPE_CHECKING:
    from wurk.config.configuration import Config


class WebRequest(Protocol):
    """One request, as a page's ``render`` or a route's ``handler`` sees it."""

    #: ``"GET"``, ``"POST"``…
    method: str
    #: The path below the dashboard's mount point (``"/api/reports/daily/run"``).
    path: str
    #: The query string's parameters (the last value of a repeated one).
    params: Mapping[str, str]
    #: The ``{name}`` parts of the route's path.
    path_params: Mapping[str, str]
    #: The decoded JSON body of a non-GET request (``None`` when there is none).
    body: Any
    #: The configuration whose Redis the dashboard shows.
    config: Config
    #: Whether the dashboard is read-only: hide controls that change anything.
    read_only: bool
    #: The URL prefix the dashboard is mounted at (``""`` or ``"/wurk"``), for links.
    root: str

    def int_param(self, name: str, default: int, low: int, high: int) -> int:
        """A whole-number query parameter clamped into ``low..high``; a 400
        :class:`WebError` when it is not a number."""
        ...


class WebError(Exception):
    """Raised by a handler to answer an HTTP error (``WebError(404, "no report daily")``)
    with ``{"error": message}`` as its JSON body."""

    def __init__(self, status: int, message: str) -> None:
        super().__init__(message)
        self.status = status
        self.message = message


class WebRegistry(Protocol):
    """The dashboard's registry object (see the module docstring)."""

    def add_page(
        self,
        path: str,
        title: str,
        render: Callable[..., str],
        *,
        nav: bool = True,
        scripts: Sequence[str] = (),
        styles: Sequence[str] = (),
    ) -> None:
        """Add an HTML page at ``path`` (``"/reports"``, ``"/reports/{name}"``)
        whose body ``render(request)`` returns, shown inside the dashboard's
        layout. ``title`` is its heading and, with ``nav``, its entry in the
        dashboard's navigation bar; ``nav=False`` for detail pages reached by
        links. The body is HTML: escape every value in it (``html.escape``).

        The dashboard's content security policy refuses inline scripts and
        styles, so a page's script and stylesheet are files served by
        :meth:`add_static`, named here by their URL below the dashboard
        (``scripts=("/static/reports/reports.js",)``): the layout loads them
        after the dashboard's own script, whose drawing helpers they may use
        (``window.WurkDashboard``, see docs/dashboard.md)."""
        ...

    def add_api(self, path: str, handler: Callable[..., object], methods: Sequence[str] = ("GET",)) -> None:
        """Add a JSON route at ``path`` (``"/api/reports"``) for the HTTP
        ``methods``; ``handler(request)`` returns a JSON-serialisable value,
        or raises :class:`WebError`. It is listed in the dashboard's OpenAPI
        document."""
        ...

    def add_static(self, prefix: str, directory: str | os.PathLike[str]) -> None:
        """Serve the files under ``directory`` at URLs starting with ``prefix``."""
        ...


def script_view(name: str) -> Callable[[WebRequest], str]:
    """A page body the browser draws: the shell the dashboard's script fills
    as the view ``name`` (``window.WurkDashboard.view(name, draw)``), with the
    page's path parameters as escaped ``data-param-*`` attributes. One shell
    for the dashboard's own pages and every plugin's, so they keep one
    contract with the script."""

    def render(request: WebRequest) -> str:
        params = "".join(
            f' data-param-{html.escape(key)}="{html.escape(value)}"'
            for key, value in sorted(request.path_params.items())
        )
        return f'<div class="view" data-view="{html.escape(name)}"{params}><p class="loading">Loading…</p></div>'

    render.__name__ = f"render_{name.replace('-', '_')}"
    return render


__all__ = ["WebError", "WebRegistry", "WebRequest", "script_view"]

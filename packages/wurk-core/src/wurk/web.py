"""What a plugin's ``wurk_register_web(app)`` receives: the dashboard's registry.

Provisional until the dashboard lands in ``wurk-web``: the methods below are
what a feature package may call to add its pages, JSON routes and static
files without importing ``wurk_web``; the arguments a page's ``render`` or a
route's ``handler`` is called with are settled by the dashboard, and may gain
keywords then. Until it lands, the hook is never called by core.

A plugin types its hook against this protocol::

    from wurk.web import WebRegistry

    @wurk.hookimpl
    def wurk_register_web(app: WebRegistry) -> None:
        app.add_page("/audit", "Audit", render_audit)
        app.add_api("/api/audit", audit_counts)
        app.add_static("/static/audit", Path(__file__).parent / "static")
"""

from __future__ import annotations

import os
from collections.abc import Callable, Sequence
from typing import Protocol


class WebRegistry(Protocol):
    """The dashboard's registry object (provisional; see the module docstring)."""

    def add_page(self, path: str, title: str, render: Callable[..., str], *, nav: bool = True) -> None:
        """Add an HTML page at ``path`` (``"/audit"``) whose body ``render``
        returns. ``title`` is its heading and, with ``nav``, its entry in the
        dashboard's navigation bar; ``nav=False`` for detail pages reached by
        links."""
        ...

    def add_api(self, path: str, handler: Callable[..., object], methods: Sequence[str] = ("GET",)) -> None:
        """Add a JSON route at ``path`` (``"/api/audit"``) for the HTTP
        ``methods``; ``handler`` returns a JSON-serialisable value."""
        ...

    def add_static(self, prefix: str, directory: str | os.PathLike[str]) -> None:
        """Serve the files under ``directory`` at URLs starting with ``prefix``."""
        ...


__all__ = ["WebRegistry"]

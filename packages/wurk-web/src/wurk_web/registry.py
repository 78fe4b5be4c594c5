"""The dashboard's registry: every page, JSON route and static directory.

One :class:`Dashboard` is filled when an application is built: first with the
dashboard's own pages (:mod:`wurk_web.builtin`), then by each enabled plugin's
``wurk_register_web(app)`` hook. It implements :class:`wurk.plugins.web.WebRegistry`,
so core's own pages and a plugin's are registered, secured and documented the
same way.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

from wurk.errors import PluginError

#: The methods a JSON route may answer; everything but GET is a mutation.
METHODS = frozenset({"GET", "POST", "PUT", "PATCH", "DELETE"})


@dataclass(frozen=True)
class Page:
    path: str
    title: str
    render: Callable[..., str]
    nav: bool
    #: URLs below the dashboard (``/static/…``) of the page's own scripts and stylesheets.
    scripts: tuple[str, ...] = ()
    styles: tuple[str, ...] = ()


@dataclass(frozen=True)
class Api:
    path: str
    handler: Callable[..., object]
    methods: tuple[str, ...]


@dataclass(frozen=True)
class Static:
    prefix: str
    directory: Path


def _checked_path(path: str, what: str) -> str:
    if not isinstance(path, str) or not path.startswith("/") or (len(path) > 1 and path.endswith("/")):
        raise PluginError(f"a dashboard {what} path starts with / and does not end with one, got {path!r}")
    return path


def _assets(page: str, what: str, urls: Sequence[str]) -> tuple[str, ...]:
    # A page's assets are the dashboard's own files: a URL elsewhere would be
    # refused by the content security policy anyway, so say so at start-up.
    if isinstance(urls, str):
        raise PluginError(f"page {page}: {what} is a list of URLs, got the string {urls!r}")
    found = tuple(urls)
    for url in found:
        if not isinstance(url, str) or not url.startswith("/static/") or ".." in url:
            raise PluginError(f"page {page}: {what} are files under /static/ (see add_static), got {url!r}")
    return found


class Dashboard:
    """What the dashboard serves; see :class:`wurk.plugins.web.WebRegistry` for each method."""

    def __init__(self) -> None:
        self.pages: list[Page] = []
        self.apis: list[Api] = []
        self.statics: list[Static] = []
        self._taken: set[tuple[str, str]] = set()

    def _claim(self, path: str, methods: Sequence[str]) -> None:
        # Two registrations of one route would make one of them dead code,
        # which one depending on plugin load order: refuse the second.
        for method in methods:
            if (method, path) in self._taken:
                raise PluginError(f"the dashboard route {method} {path} is registered twice")
        self._taken.update((method, path) for method in methods)

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
        _checked_path(path, "page")
        if path.startswith(("/api/", "/static/")):
            raise PluginError(f"a dashboard page cannot live under /api/ or /static/, got {path!r}")
        if not callable(render):
            raise PluginError(f"page {path}: render must be callable, got {render!r}")
        found_scripts, found_styles = _assets(path, "scripts", scripts), _assets(path, "styles", styles)
        self._claim(path, ["GET"])
        self.pages.append(Page(path, str(title), render, nav, found_scripts, found_styles))

    def add_api(self, path: str, handler: Callable[..., object], methods: Sequence[str] = ("GET",)) -> None:
        _checked_path(path, "API")
        if not path.startswith("/api/"):
            raise PluginError(f"a dashboard API route lives under /api/, got {path!r}")
        if not callable(handler):
            raise PluginError(f"route {path}: handler must be callable, got {handler!r}")
        wanted = tuple(str(method).upper() for method in methods)
        unknown = sorted(set(wanted) - METHODS)
        if not wanted or unknown:
            raise PluginError(f"route {path}: methods must be among {sorted(METHODS)}, got {list(methods)!r}")
        self._claim(path, wanted)
        self.apis.append(Api(path, handler, wanted))

    def add_static(self, prefix: str, directory: str | os.PathLike[str]) -> None:
        _checked_path(prefix, "static")
        if not prefix.startswith("/static/"):
            raise PluginError(f"static files live under /static/, got {prefix!r}")
        folder = Path(directory)
        if not folder.is_dir():
            raise PluginError(f"static {prefix}: {folder} is not a directory")
        self._claim(prefix, ["STATIC"])
        self.statics.append(Static(prefix, folder))

    def nav(self) -> list[Page]:
        """The pages listed in the navigation bar, in registration order."""
        return [page for page in self.pages if page.nav]

"""The dashboard's registry protocol, reached through the typed hook caller."""

from __future__ import annotations

import inspect
import os
from collections.abc import Callable, Sequence
from pathlib import Path

import wurk
from wurk.plugins.manager import Plugins
from wurk.plugins.web import WebRegistry


class MemoryWebRegistry:
    """An in-memory stand-in for the dashboard's registry, for this test only."""

    def __init__(self) -> None:
        self.pages: dict[str, tuple[str, Callable[..., str], bool]] = {}
        self.apis: dict[str, tuple[Callable[..., object], tuple[str, ...]]] = {}
        self.statics: dict[str, str] = {}

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
        self.pages[path] = (title, render, nav)

    def add_api(self, path: str, handler: Callable[..., object], methods: Sequence[str] = ("GET",)) -> None:
        self.apis[path] = (handler, tuple(methods))

    def add_static(self, prefix: str, directory: str | os.PathLike[str]) -> None:
        self.statics[prefix] = os.fspath(directory)


def render_reports() -> str:
    return "<h1>Reports</h1>"


def list_reports() -> list[str]:
    return ["daily"]


class ReportsPlugin:
    """A feature that adds dashboard pages knowing only core's protocol."""

    @wurk.hookimpl
    def wurk_register_web(self, app: WebRegistry) -> None:
        app.add_page("/reports", "Reports", render_reports)
        app.add_page("/reports/detail", "Report", render_reports, nav=False)
        app.add_api("/api/reports", list_reports)
        app.add_api("/api/reports/run", list_reports, methods=("POST",))
        app.add_static("/static/reports", Path("/srv/reports"))


def test_the_memory_registry_matches_the_protocol() -> None:
    registry: WebRegistry = MemoryWebRegistry()  # checked statically, and by signature here
    for name in ("add_page", "add_api", "add_static"):
        assert inspect.signature(getattr(registry, name)) == inspect.signature(
            getattr(WebRegistry, name).__get__(registry)
        )


def test_register_web_goes_through_the_typed_caller_into_the_registry() -> None:
    plugins = Plugins(entry_points=False, environ={})
    plugins.register(ReportsPlugin(), name="reports")
    registry = MemoryWebRegistry()

    assert plugins.call.register_web(registry) is None

    assert registry.pages == {
        "/reports": ("Reports", render_reports, True),
        "/reports/detail": ("Report", render_reports, False),
    }
    assert registry.apis == {
        "/api/reports": (list_reports, ("GET",)),
        "/api/reports/run": (list_reports, ("POST",)),
    }
    assert registry.statics == {"/static/reports": "/srv/reports"}


def test_register_web_without_implementations_registers_nothing() -> None:
    plugins = Plugins(entry_points=False, environ={})
    registry = MemoryWebRegistry()
    plugins.call.register_web(registry)
    assert (registry.pages, registry.apis, registry.statics) == ({}, {}, {})

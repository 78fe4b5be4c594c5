"""The HTML around every page: navigation, header, and the page's body.

Nothing here inserts a value unescaped: titles and paths go through
``html.escape``, and the page body is the page's own ``render`` (the
dashboard's views are empty shells its script fills with text).
"""

from __future__ import annotations

import html
from dataclasses import dataclass, field
from pathlib import Path

from wurk_web.registry import Page

#: The dashboard's stylesheet and script, under ``/static/wurk/``.
ASSETS = ("static/wurk/app.css", "static/wurk/app.js")
#: Its icon, linked from every page (relative, so a mount point is followed)
#: and served at ``favicon.ico`` too.
ICON = "static/wurk/favicon.svg"
FAVICON = Path(__file__).parent / "static" / "favicon.svg"


def nav_link(page: Page, current: Page) -> str:
    href = "./" if page.path == "/" else page.path.lstrip("/")
    here = ' aria-current="page"' if page is current else ""
    return f'<li><a href="{html.escape(href)}"{here}>{html.escape(page.title)}</a></li>'


@dataclass(frozen=True)
class ShardChoice:
    """The shard selector: the configured shards' ``names``, the ``current``
    one (None for the main Redis), the dashboard's ``mount`` point without
    any shard prefix, and the page's ``path`` below it, kept when switching."""

    names: list[str] = field(default_factory=list)
    current: str | None = None
    mount: str = ""
    path: str = "/"


def shard_selector(choice: ShardChoice) -> str:
    """Links to this page on the main Redis (``default``) and on each shard;
    nothing without shards. Absolute paths: the page's ``<base>`` carries the
    current shard's prefix, which a relative link would keep."""
    if not choice.names:
        return ""
    items: list[tuple[str, str | None, str]] = [("default", None, choice.mount + choice.path)]
    items += [(name, name, f"{choice.mount}/shard/{name}{choice.path}") for name in choice.names]
    links = ""
    for label, name, href in items:
        here = ' aria-current="true"' if name == choice.current else ""
        links += f'<li><a href="{html.escape(href)}"{here}>{html.escape(label)}</a></li>'
    return f'<nav class="shards" aria-label="Shards"><span>Redis</span><ul>{links}</ul></nav>'


def render_page(
    page: Page,
    body: str,
    *,
    nav: list[Page],
    root: str,
    read_only: bool,
    version: str,
    poll_seconds: float,
    shards: ShardChoice | None = None,
) -> str:
    """The whole document for ``page`` mounted at ``root`` (``""`` or ``"/wurk"``,
    and ``/shard/<name>`` after it for a shard's page)."""
    links = "".join(nav_link(item, page) for item in nav)
    choice = shards or ShardChoice()
    selector = shard_selector(choice)
    where = f" · {html.escape(choice.current)}" if choice.current else ""
    banner = '<p class="banner" role="status">Read-only: changes are switched off.</p>' if read_only else ""
    css, script = ASSETS
    # Relative to <base>, like the dashboard's own assets, so a mount point is followed.
    extra = "".join(f'<link rel="stylesheet" href="{html.escape(url.lstrip("/"))}">\n' for url in page.styles)
    extra += "".join(f'<script src="{html.escape(url.lstrip("/"))}" defer></script>\n' for url in page.scripts)
    return f"""<!doctype html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<base href="{html.escape(root)}/">
<title>{html.escape(page.title)}{where} · Wurk</title>
<link rel="icon" href="{ICON}" type="image/svg+xml">
<link rel="stylesheet" href="{css}">
<script src="{script}" defer></script>
{extra}</head>
<body data-read-only="{int(read_only)}" data-poll="{poll_seconds:g}">
<a class="skip" href="#main">Skip to content</a>
<header>
<a class="brand" href="./">Wurk</a>
<nav aria-label="Pages"><ul>{links}</ul></nav>
{selector}<span class="version">{html.escape(version)}</span>
</header>
{banner}
<main id="main" tabindex="-1">
<h1>{html.escape(page.title)}</h1>
{body}
</main>
</body>
</html>
"""

"""The HTML around every page: navigation, header, and the page's body.

Nothing here inserts a value unescaped: titles and paths go through
``html.escape``, and the page body is the page's own ``render`` (the
dashboard's views are empty shells its script fills with text).
"""

from __future__ import annotations

import html
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


def render_page(
    page: Page, body: str, *, nav: list[Page], root: str, read_only: bool, version: str, poll_seconds: float
) -> str:
    """The whole document for ``page`` mounted at ``root`` (``""`` or ``"/wurk"``)."""
    links = "".join(nav_link(item, page) for item in nav)
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
<title>{html.escape(page.title)} · Wurk</title>
<link rel="icon" href="{ICON}" type="image/svg+xml">
<link rel="stylesheet" href="{css}">
<script src="{script}" defer></script>
{extra}</head>
<body data-read-only="{int(read_only)}" data-poll="{poll_seconds:g}">
<a class="skip" href="#main">Skip to content</a>
<header>
<a class="brand" href="./">Wurk</a>
<nav aria-label="Pages"><ul>{links}</ul></nav>
<span class="version">{html.escape(version)}</span>
</header>
{banner}
<main id="main" tabindex="-1">
<h1>{html.escape(page.title)}</h1>
{body}
</main>
</body>
</html>
"""

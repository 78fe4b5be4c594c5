"""The Profiles pages: job profiles stored by ``profile="…"`` jobs (see :mod:`wurk.server.profiler`).

Unlike the other pages, these are rendered on the server: a profile is a
table of functions and numbers, read once, so the HTML is built here with
every value through ``html.escape``, and a small script of their own
(``static/profiles.js``) only shows times in the viewer's time zone and
wires the Delete buttons. The tab is always in the navigation, as in
Sidekiq: an empty list says how to profile a job, which is what someone
opening it for the first time needs.

A Python profile's detail shows its top functions by cumulative time; a
profile written by Ruby Sidekiq (Vernier) is listed too, and can be
downloaded for the Firefox Profiler, but not opened here.
"""

from __future__ import annotations

import html
import re
from datetime import datetime
from pathlib import Path
from typing import Any
from urllib.parse import quote

from starlette.responses import Response

from wurk.api import ProfileRecord, ProfileSet
from wurk.plugins.web import WebError
from wurk_web.registry import Dashboard
from wurk_web.request import DashboardRequest

PAGE_LIMIT = 25
MAX_LIMIT = 200
TOP_FUNCTIONS = 30
#: Characters a download's file name keeps; the rest become ``_``.
UNSAFE_FILENAME = re.compile(r"[^A-Za-z0-9._-]")
STATIC = Path(__file__).parent.parent / "static" / "profiles"
SCRIPT = '<script src="static/profiles/profiles.js" defer></script>'


def _set(request: DashboardRequest) -> ProfileSet:
    return ProfileSet(config=request.config, pool=request.pool)


def _record(request: DashboardRequest) -> ProfileRecord:
    key = request.params.get("key", "")
    if not key or len(key) > 512:
        raise WebError(400, "the key parameter names a profile (1 to 512 characters)")
    record = _set(request).fetch(key)
    if record is None:
        raise WebError(404, f"no profile {key!r}: it may have expired")
    return record


def _page(request: DashboardRequest) -> tuple[list[ProfileRecord], str | None]:
    limit = request.int_param("limit", PAGE_LIMIT, 1, MAX_LIMIT)
    try:
        return _set(request).page(limit=limit, cursor=request.params.get("cursor") or None)
    except ValueError as exc:
        raise WebError(400, str(exc)) from None


def summary(record: ProfileRecord) -> dict[str, Any]:
    """A list row: the fields Sidekiq's Profiles tab shows, plus the key and format."""
    return {
        "key": record.key,
        "jid": record.jid,
        "type": record.type,
        "token": record.token,
        "size": record.size,
        "elapsed": record.elapsed,
        "started_at": record.started_at.timestamp(),
        "expires_at": record.expires_at.timestamp(),
        "format": record.format,
        "python": record.python,
    }


def _top(record: ProfileRecord, limit: int) -> list[Any]:
    """The profile's top functions; 422 when its data is not a profile Wurk
    wrote (anyone who can write Redis can store anything there)."""
    try:
        return record.top(limit)
    except ValueError as exc:
        raise WebError(422, f"profile {record.key!r}: {exc}") from None


def _timing(row: Any) -> dict[str, Any]:
    """A :class:`wurk.server.profiler.Timing` as JSON (it is a named tuple)."""
    return dict(row._asdict())


# -- JSON routes ---------------------------------------------------------------------


def list_profiles(request: DashboardRequest) -> dict[str, Any]:
    """Stored job profiles, newest first: ``limit`` after the stable ``cursor``."""
    records, cursor = _page(request)
    return {"profiles": [summary(record) for record in records], "cursor": cursor}


def profile_detail(request: DashboardRequest) -> dict[str, Any]:
    """One profile (``?key=``) and its top functions by cumulative time (``top``, Python profiles only)."""
    record = _record(request)
    top = request.int_param("top", TOP_FUNCTIONS, 1, MAX_LIMIT)
    functions = [_timing(row) for row in _top(record, top)] if record.python else None
    return {**summary(record), "functions": functions}


def profile_data(request: DashboardRequest) -> Response:
    """The profile's stored data (``?key=``) as a download: a ``.prof`` file for ``pstats``, or Vernier's JSON."""
    record = _record(request)
    name = UNSAFE_FILENAME.sub("_", record.key)
    filename, media = (
        (f"{name}.prof", "application/octet-stream") if record.python else (f"{name}.json", "application/json")
    )
    # Both formats are stored gzipped: sent as stored, the browser saves them unpacked.
    headers = {
        "content-encoding": "gzip",
        "content-disposition": f'attachment; filename="{filename}"',
        "cache-control": "no-store",
    }
    return Response(record.data, media_type=media, headers=headers)


def delete_profiles(request: DashboardRequest) -> dict[str, Any]:
    """Delete the profiles ``{"keys": [...]}`` (``ProfileSet.delete``)."""
    profiles = _set(request)
    deleted = sum(profiles.delete(key) for key in request.body_list("keys"))
    return {"deleted": deleted}


# -- Pages ---------------------------------------------------------------------------


def _e(value: object) -> str:
    return html.escape(str(value))


def _time(at: datetime) -> str:
    """A time the script rewrites in the viewer's zone; UTC until it does."""
    return f'<time datetime="{_e(at.isoformat())}">{_e(at.strftime("%Y-%m-%d %H:%M:%S UTC"))}</time>'


def _size(size: int) -> str:
    return f"{size / 1024:,.1f} KB" if size >= 1024 else f"{size} B"


def _seconds(seconds: float) -> str:
    return f"{seconds * 1000:,.1f} ms" if seconds < 1 else f"{seconds:,.3f} s"


def _row(record: ProfileRecord, read_only: bool) -> str:
    key = _e(record.key)
    href = f"profiles/entry?key={_e(_quote(record.key))}"
    download = f"api/profiles/data?key={_e(_quote(record.key))}"
    delete = "" if read_only else f' <button type="button" class="danger" data-delete-profile="{key}">Delete</button>'
    kind = "" if record.python else ' <span class="badge">Ruby</span>'
    return (
        f"<tr><td>{_time(record.started_at)}</td><td>{_e(record.type)}{kind}</td>"
        f'<td><a href="{href}">{_e(record.jid)}</a></td><td>{_e(record.token)}</td>'
        f'<td class="num">{_e(_size(record.size))}</td><td class="num">{_seconds(record.elapsed)}</td>'
        f'<td class="actions"><a href="{href}">View</a> <a href="{download}" download>Download</a>{delete}</td></tr>'
    )


def render_list(request: DashboardRequest) -> str:
    """The list, a page at a time; a link to the next page while there is one."""
    records, cursor = _page(request)
    if not records and not request.params.get("cursor"):
        return (
            '<div class="profiles"><p class="muted">No profiles stored. Push a job with '
            '<code>MyJob.set(profile="alice").perform_async(...)</code>: a worker runs it under '
            "<code>cProfile</code> and keeps its profile here for a day.</p></div>"
        )
    rows = "".join(_row(record, request.read_only) for record in records)
    heads = "".join(f'<th scope="col">{name}</th>' for name in ("Started", "Job", "JID", "Who", "Size", "Elapsed", ""))
    following = (
        f'<p class="pager"><a href="profiles?cursor={_e(_quote(cursor))}">Older profiles</a></p>' if cursor else ""
    )
    return (
        f'<div class="profiles"><div class="table-wrap"><table><thead><tr>{heads}</tr></thead>'
        f"<tbody>{rows}</tbody></table></div>{following}</div>{SCRIPT}"
    )


def render_detail(request: DashboardRequest) -> str:
    """One profile: what ran, and where its time went."""
    record = _record(request)
    download = f"api/profiles/data?key={_e(_quote(record.key))}"
    fields = [
        ("Job", _e(record.type)),
        ("JID", _e(record.jid)),
        ("Who asked", _e(record.token)),
        ("Started", _time(record.started_at)),
        ("Elapsed", _seconds(record.elapsed)),
        ("Size", _e(_size(record.size))),
        ("Expires", _time(record.expires_at)),
    ]
    facts = "".join(f"<dt>{label}</dt><dd>{value}</dd>" for label, value in fields)
    head = f'<div class="profiles"><dl class="fields">{facts}</dl><p><a href="{download}" download>Download</a></p>'
    if not record.python:
        note = (
            '<p class="notice">Written by Ruby Sidekiq with Vernier: download it and open it in the '
            "Firefox Profiler. Only Python profiles are shown here.</p>"
        )
        return f"{head}{note}</div>{SCRIPT}"
    top = request.int_param("top", TOP_FUNCTIONS, 1, MAX_LIMIT)
    return f"{head}{_functions(_top(record, top))}</div>{SCRIPT}"


def _functions(rows: list[Any]) -> str:
    heads = "".join(
        f'<th scope="col">{name}</th>' for name in ("#", "Function", "Calls", "Own time", "Cumulative time")
    )
    body = "".join(
        f'<tr><td class="num">{rank}</td><td class="args">{_e(row.function)}</td>'
        f'<td class="num">{_calls(row)}</td><td class="num">{row.own_time:.6f} s</td>'
        f'<td class="num">{row.cumulative_time:.6f} s</td></tr>'
        for rank, row in enumerate(rows, 1)
    )
    caption = f"<caption>Top {len(rows)} functions by cumulative time</caption>"
    return f'<div class="table-wrap"><table>{caption}<thead><tr>{heads}</tr></thead><tbody>{body}</tbody></table></div>'


def _calls(row: Any) -> str:
    # pstats' own notation: "total/primitive" when the function recursed.
    return f"{row.calls}" if row.calls == row.primitive_calls else f"{row.calls}/{row.primitive_calls}"


def _quote(value: str) -> str:
    return quote(value, safe="")


def register(app: Dashboard) -> None:
    """The pages, routes and script of the Profiles tab."""
    app.add_page("/profiles", "Profiles", render_list)
    app.add_page("/profiles/entry", "Profile", render_detail, nav=False)
    app.add_api("/api/profiles", list_profiles)
    app.add_api("/api/profiles/entry", profile_detail)
    app.add_api("/api/profiles/data", profile_data)
    app.add_api("/api/profiles/delete", delete_profiles, ("POST",))
    app.add_static("/static/profiles", STATIC)

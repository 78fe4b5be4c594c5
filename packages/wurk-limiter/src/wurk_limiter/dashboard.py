"""The dashboard's Limiters page, added through ``wurk_register_web``.

``/limiters`` is drawn in the browser by ``static/limiters.js`` from
``GET /api/limiters``: every name in ``lmtr-list`` with its type, options,
usage (``used`` of ``limit``, a bar, available or exhausted, when it frees
up) and, for ``concurrent``, its counters. ``POST /api/limiters/{name}/reset``
is the Reset button: :meth:`Limiter.reset`, which clears the limiter's state
and counters (a bucket's every period, the current one included) and keeps
it registered.

A limiter is rebuilt from its metadata hash (``type`` and ``options``) with
``register=False``, so reading the page writes nothing. ``lmtr-list`` is a
set that per-tenant names can grow large, so it is read a page at a time
with ``SSCAN`` (its cursor is the page's cursor; a ``substr`` filter becomes
its ``MATCH``), never whole.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

from wurk.plugins.web import WebError, WebRegistry, WebRequest, script_view
from wurk_limiter import keys
from wurk_limiter.concurrent import COUNTERS, Concurrent
from wurk_limiter.counting import Bucket, Window
from wurk_limiter.draining import Leaky, Points
from wurk_limiter.limiter import Limiter
from wurk_limiter.settings import limiter_config

if TYPE_CHECKING:
    from wurk.config.configuration import Config

STATIC = Path(__file__).parent / "static"
PAGE_LIMIT = 25
MAX_LIMIT = 200
#: ``SSCAN`` steps one page may take: a filter matching few names cannot stall it.
SCAN_STEPS = 50
GLOB_SPECIAL = frozenset("*?[]\\")

#: Per type: its class, the options passed positionally, those passed by name.
#: ``backoff`` is left out: it is stored as a callable's name, and reading a
#: limiter's state never needs it.
TYPES: dict[str, tuple[Callable[..., Limiter], tuple[str, ...], tuple[str, ...]]] = {
    "concurrent": (Concurrent, ("limit",), ("wait_timeout", "lock_timeout", "policy", "ttl")),
    "bucket": (Bucket, ("count", "interval"), ("wait_timeout", "ttl", "reschedule")),
    "window": (Window, ("count", "interval"), ("wait_timeout", "ttl", "reschedule")),
    "leaky": (Leaky, ("bucket_size", "drain"), ("wait_timeout", "ttl")),
    "points": (Points, ("initial_points", "refill_per_second"), ("ttl",)),
}


def register(app: WebRegistry) -> None:
    """The page, its routes and its script."""
    app.add_page("/limiters", "Limiters", script_view("limiters"), scripts=("/static/limiters/limiters.js",))
    app.add_api("/api/limiters", list_limiters)
    app.add_api("/api/limiters/{name}/reset", reset_limiter, methods=("POST",))
    app.add_static("/static/limiters", STATIC)


def _text(value: Any) -> str:
    return value.decode("utf-8", "replace") if isinstance(value, bytes) else str(value)


def rebuild(name: str, meta: dict[str, str], config: Config) -> Limiter:
    """The limiter ``meta`` (its ``lmtr:<name>`` hash) describes, unregistered;
    ``ValueError`` naming what is wrong with the metadata."""
    kind = meta.get("type", "")
    if kind not in TYPES:
        raise ValueError(f"unknown limiter type {kind!r}")
    try:
        options = json.loads(meta.get("options") or "{}")
    except ValueError:
        raise ValueError("its options are not JSON") from None
    if not isinstance(options, dict):
        raise ValueError("its options are not a JSON object")
    cls, positional, named = TYPES[kind]
    missing = [option for option in positional if option not in options]
    if missing:
        raise ValueError(f"its options lack {', '.join(missing)}")
    chosen = {option: options[option] for option in named if options.get(option) is not None}
    return cls(name, *(options[option] for option in positional), **chosen, register=False, config=config)


def glob(substring: str) -> str:
    """A ``MATCH`` pattern for names containing ``substring`` (case as given)."""
    return "*" + "".join("\\" + char if char in GLOB_SPECIAL else char for char in substring) + "*"


def scan_names(config: Config, cursor: int, limit: int, substring: str) -> tuple[list[str], int]:
    """About ``limit`` names of ``lmtr-list`` from the ``SSCAN`` ``cursor``, and the next cursor (0: done)."""
    pattern = glob(substring) if substring else None

    def read(conn: Any) -> tuple[list[str], int]:
        found: set[str] = set()
        position = cursor
        for _ in range(SCAN_STEPS):
            position, members = conn.sscan(keys.REGISTRY, position, match=pattern, count=limit)
            found.update(_text(member) for member in members)
            if position == 0 or len(found) >= limit:
                break
        return sorted(found), int(position)

    names, following = limiter_config(config).pool().execute(read)
    return names, following


def describe(name: str, meta: dict[str, str], config: Config) -> dict[str, Any]:
    """One row: what the limiter is and how much of it is used now."""
    try:
        options = json.loads(meta.get("options") or "{}")
    except ValueError:
        options = None
    row: dict[str, Any] = {"name": name, "type": meta.get("type"), "options": options, "error": None}
    if not meta:
        return {**row, "error": "its metadata expired or was deleted: it is no longer used"}
    try:
        limiter = rebuild(name, meta, config)
    except (TypeError, ValueError) as exc:
        return {**row, "error": f"cannot be read: {exc}"}
    status = limiter.status()
    row.update(
        used=status["used"],
        limit=status["limit"],
        reset_at=status["reset_at"],
        available=status["available"],
        counters={counter: status[counter] for counter in COUNTERS} if limiter.type == "concurrent" else None,
    )
    return row


def list_limiters(request: WebRequest) -> dict[str, Any]:
    """The registered limiters, a page from the ``SSCAN`` ``cursor``, optionally those whose name holds ``substr``."""
    limit = request.int_param("limit", PAGE_LIMIT, 1, MAX_LIMIT)
    cursor = request.int_param("cursor", 0, 0, 2**63)
    substring = request.params.get("substr", "").strip()
    names, following = scan_names(request.config, cursor, limit, substring)
    pool = limiter_config(request.config).pool()

    def read(conn: Any) -> tuple[int, list[Any]]:
        pipe = conn.pipeline(transaction=False)
        pipe.scard(keys.REGISTRY)
        for name in names:
            pipe.hgetall(keys.meta(name))
        size, *metas = pipe.execute()
        return int(size), metas

    size, metas = pool.execute(read)
    rows = [
        describe(name, {_text(k): _text(v) for k, v in meta.items()}, request.config)
        for name, meta in zip(names, metas, strict=True)
    ]
    return {"size": size, "limiters": rows, "cursor": str(following) if following else None, "substr": substring}


def reset_limiter(request: WebRequest) -> dict[str, Any]:
    """Reset the limiter ``name``: clear its state and counters, keep it registered."""
    name = request.path_params["name"]
    pool = limiter_config(request.config).pool()

    def read(conn: Any) -> list[Any]:
        pipe = conn.pipeline(transaction=False)
        pipe.sismember(keys.REGISTRY, name)
        pipe.hgetall(keys.meta(name))
        return list(pipe.execute())

    listed, meta = pool.execute(read)
    if not listed:
        raise WebError(404, f"no limiter {name!r} is registered")
    fields = {_text(k): _text(v) for k, v in meta.items()}
    if not fields:
        raise WebError(404, f"limiter {name!r}: its metadata expired or was deleted, so there is nothing to reset")
    try:
        limiter = rebuild(name, fields, request.config)
    except (TypeError, ValueError) as exc:
        raise WebError(409, f"limiter {name!r} cannot be read: {exc}") from None
    limiter.reset()
    return {"name": name, "reset": True, **describe(name, fields, request.config)}

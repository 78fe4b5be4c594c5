"""The dashboard's Cron pages, added through ``wurk_register_web``.

``/cron`` lists every registered loop (``GET /api/cron``) with its schedule,
class, queue, zone, last and next fire and paused state; ``/cron/{lid}``
shows one loop with its last fires (``GET /api/cron/{lid}/history``). The
actions are the guides' three, each the package's own function, so the
dashboard changes Redis exactly as a script would:

* ``POST /api/cron/{lid}/pause`` and ``/unpause``: :func:`wurk_cron.pause`,
  :func:`wurk_cron.unpause` (which resumes from the next slot after now);
* ``POST /api/cron/{lid}/enqueue``: :func:`wurk_cron.enqueue_now`, one run
  now, leaving the fire marks and the history alone.

There is no delete, as in the guides: removing a loop is
``wurk_cron.unregister(lid)``. The ``periodic`` set is read a page at a time
with ``SSCAN`` (a registry of a few dozen loops comes back in one page).
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import TYPE_CHECKING, Any

from wurk.client.payload import ENCRYPTED_PLACEHOLDER, is_encrypted
from wurk.plugins.web import WebError, WebRegistry, WebRequest, script_view
from wurk_cron import keys
from wurk_cron.firing import enqueue_now, history, pause, unpause
from wurk_cron.loop import Loop
from wurk_cron.manager import periodic_service
from wurk_cron.parser import Parser
from wurk_cron.registry import LoopSet, decode_fields

if TYPE_CHECKING:
    from wurk.config.configuration import Config

STATIC = Path(__file__).parent / "static"
SCRIPTS = ("/static/cron/cron.js",)
PAGE_LIMIT = 50
MAX_LIMIT = 200
#: ``SSCAN`` steps one page may take.
SCAN_STEPS = 50
POST = ("POST",)


def register(app: WebRegistry) -> None:
    """The pages, their routes and their script."""
    app.add_page("/cron", "Cron", script_view("cron"), scripts=SCRIPTS)
    app.add_page("/cron/{lid}", "Periodic job", script_view("cron-loop"), nav=False, scripts=SCRIPTS)
    app.add_api("/api/cron", list_loops)
    app.add_api("/api/cron/{lid}", loop_detail)
    app.add_api("/api/cron/{lid}/history", loop_history)
    app.add_api("/api/cron/{lid}/pause", pause_loop, POST)
    app.add_api("/api/cron/{lid}/unpause", unpause_loop, POST)
    app.add_api("/api/cron/{lid}/enqueue", enqueue_loop, POST)
    app.add_static("/static/cron", STATIC)


def redact(value: Any) -> Any:
    """``value`` with every encrypted envelope in it masked."""
    if isinstance(value, dict):
        return ENCRYPTED_PLACEHOLDER if is_encrypted(value) else {key: redact(inner) for key, inner in value.items()}
    if isinstance(value, list):
        return [redact(inner) for inner in value]
    return value


def next_fire(config: Config, loop: Loop) -> int | None:
    """The poller's ``nf`` mark; for a loop not yet ticked, the next slot from now."""
    if loop.paused or loop.next_fire_at is not None:
        return loop.next_fire_at
    try:
        zone = periodic_service(config).zones.zone(loop.tz_name)
        return Parser(loop.schedule).next_fire_at(time.time(), zone)
    except ValueError:
        return None  # a schedule this process cannot parse: the poller skips it too


def describe(config: Config, loop: Loop) -> dict[str, Any]:
    """One loop as a row; ``args`` and ``options`` redacted."""
    return {
        "lid": loop.lid,
        "schedule": loop.schedule,
        "class": loop.klass,
        "queue": loop.queue,
        "args": redact(loop.args),
        "retry": loop.retry,
        "label": loop.label,
        "options": redact({key: value for key, value in loop.options.items() if key != "args"}),
        "tz": loop.tz_name,
        "paused": loop.paused,
        "next_fire_at": next_fire(config, loop),
        "last_fired_at": loop.last_fired_at,
    }


def list_loops(request: WebRequest) -> dict[str, Any]:
    """The registered loops, a page from the ``SSCAN`` ``cursor``, by class."""
    config = request.config
    limit = request.int_param("limit", PAGE_LIMIT, 1, MAX_LIMIT)
    cursor = request.int_param("cursor", 0, 0, 2**63)

    def read(conn: Any) -> tuple[int, list[str], list[Any], int]:
        lids: set[str] = set()
        position = cursor
        for _ in range(SCAN_STEPS):
            position, members = conn.sscan(keys.PERIODIC, position, count=limit)
            lids.update(member.decode() if isinstance(member, bytes) else str(member) for member in members)
            if position == 0 or len(lids) >= limit:
                break
        pipe = conn.pipeline(transaction=False)
        pipe.scard(keys.PERIODIC)
        for lid in sorted(lids):
            pipe.hgetall(keys.loop(lid))
        size, *hashes = pipe.execute()
        return int(size), sorted(lids), hashes, int(position)

    size, lids, hashes, following = config.redis_pool.execute(read)
    loops = [Loop.from_hash(lid, decode_fields(raw), config) for lid, raw in zip(lids, hashes, strict=True) if raw]
    loops.sort(key=lambda loop: (loop.klass, loop.schedule, loop.lid))
    rows = [describe(config, loop) for loop in loops]
    return {"size": size, "loops": rows, "cursor": str(following) if following else None}


def _loop(request: WebRequest) -> Loop:
    lid = request.path_params["lid"]
    loop = LoopSet(request.config).fetch(lid)
    if loop is None:
        raise WebError(404, f"no periodic job {lid!r} is registered")
    return loop


def _fires(request: WebRequest, lid: str) -> list[dict[str, Any]]:
    return [{"fired_at": fired_at, "jid": jid} for fired_at, jid in history(lid, config=request.config)]


def loop_detail(request: WebRequest) -> dict[str, Any]:
    """One loop and its last fires, newest first."""
    loop = _loop(request)
    return {**describe(request.config, loop), "history": _fires(request, loop.lid)}


def loop_history(request: WebRequest) -> dict[str, Any]:
    """A loop's last fires (at most 25), newest first, as ``fired_at`` and ``jid``."""
    loop = _loop(request)
    return {"lid": loop.lid, "history": _fires(request, loop.lid)}


def pause_loop(request: WebRequest) -> dict[str, Any]:
    """Pause the loop: the poller skips it until it is unpaused (``wurk_cron.pause``)."""
    lid = request.path_params["lid"]
    if not pause(lid, config=request.config):
        raise WebError(404, f"no periodic job {lid!r} is registered")
    return {"lid": lid, "paused": True}


def unpause_loop(request: WebRequest) -> dict[str, Any]:
    """Resume the loop from its next slot after now (``wurk_cron.unpause``)."""
    lid = request.path_params["lid"]
    if not unpause(lid, config=request.config):
        raise WebError(404, f"no periodic job {lid!r} is registered")
    return {"lid": lid, "paused": False}


def enqueue_loop(request: WebRequest) -> dict[str, Any]:
    """Push one run of the loop now, leaving its schedule and history alone (``wurk_cron.enqueue_now``)."""
    loop = _loop(request)
    jid = enqueue_now(loop.lid, config=request.config)
    return {"lid": loop.lid, "jid": jid, "enqueued": jid is not None}

"""The dashboard's Batches pages, added through ``wurk_register_web``.

Two pages, each drawn in the browser by ``static/batches.js`` from its JSON
route, so every value reaches the page as text:

* ``/batches`` (``GET /api/batches``): the batches newest first, or with
  ``?dead=1`` those that fired death, a page at a time: bid, description,
  total, pending, failures, progress and creation time;
* ``/batches/{bid}`` (``GET /api/batches/{bid}``): one batch, as
  ``Status.data()`` describes it, plus its callbacks, its parent and
  children, its live, failing and dead jids, and the failing jobs found in
  the retry and dead sets with their errors.

Nothing here reads a whole set: the list is paged on the ``batches`` sorted
set with stable cursors (the score of the last row shown and how many rows
at that score were shown, as the Retries page does), and each jid set or
child set is sampled with a bounded ``SSCAN`` next to its exact size. A
batch has no dashboard action: its state moves only as its jobs run.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import TYPE_CHECKING, Any

from wurk.api import JobRecord, Search, page_by_score
from wurk.client.payload import ENCRYPTED_PLACEHOLDER, is_encrypted
from wurk.plugins.web import WebError, WebRegistry, WebRequest, script_view
from wurk_batches import keys
from wurk_batches.status import Status

if TYPE_CHECKING:
    from wurk.config.configuration import Config

STATIC = Path(__file__).parent / "static"
SCRIPTS = ("/static/batches/batches.js",)
PAGE_LIMIT = 25
MAX_LIMIT = 200
#: Members shown of each jid or child set (their sizes are always exact).
SAMPLE = 100
#: Failing jobs looked up in the retry and dead sets, at most.
FAILURES = 50
#: ``SSCAN`` steps spent on one sample: a set of tombstones cannot stall a page.
SCAN_STEPS = 20


def register(app: WebRegistry) -> None:
    """The pages, their routes and their script."""
    app.add_page("/batches", "Batches", script_view("batches"), scripts=SCRIPTS)
    app.add_page("/batches/{bid}", "Batch", script_view("batch"), nav=False, scripts=SCRIPTS)
    app.add_api("/api/batches", list_batches)
    app.add_api("/api/batches/{bid}", batch_detail)
    app.add_static("/static/batches", STATIC)


def _text(value: Any) -> str:
    return value.decode("utf-8", "replace") if isinstance(value, bytes) else str(value)


def redact(value: Any) -> Any:
    """``value`` with every encrypted envelope in it masked: callback options
    are shown, and they may carry what a job encrypts."""
    if isinstance(value, dict):
        return ENCRYPTED_PLACEHOLDER if is_encrypted(value) else {key: redact(inner) for key, inner in value.items()}
    if isinstance(value, list):
        return [redact(inner) for inner in value]
    return value


# -- the list -------------------------------------------------------------------------


def read_page(config: Config, key: str, cursor: str | None, limit: int) -> tuple[list[tuple[str, float]], str | None]:
    """Up to ``limit`` bids after ``cursor``, newest first, and the next cursor."""
    try:
        rows, after = config.redis_pool.execute(lambda conn: page_by_score(conn, key, cursor, limit))
    except ValueError as exc:
        raise WebError(400, str(exc)) from None
    return [(_text(bid), float(score)) for bid, score in rows], after


def summary(status: Status, complete: bool) -> dict[str, Any]:
    """A list row: the batch's numbers, read from one hash."""
    total, pending = status.total, status.pending
    return {
        "bid": status.bid,
        "exists": status.exists,
        "description": status.description,
        "total": total,
        "pending": pending,
        "failures": status.failures,
        "done": max(0, total - pending),
        "created_at": status.created_at,
        "complete_at": status.complete_at,
        "success_at": status.success_at,
        "death_at": status.death_at,
        "complete": complete,
        "invalidated": status.invalidated,
        "tags": status.tags,
        "parent_bid": status.parent_bid,
    }


def statuses(config: Config, bids: list[str]) -> list[dict[str, Any]]:
    """The summary of each of ``bids``, read in one pipeline."""

    def read(conn: Any) -> list[Any]:
        pipe = conn.pipeline(transaction=False)
        for bid in bids:
            pipe.hgetall(keys.batch(bid))
            pipe.scard(keys.jids(bid))
        return list(pipe.execute())

    replies = config.redis_pool.execute(read) if bids else []
    rows = []
    for n, bid in enumerate(bids):
        status = Status.from_hash(bid, replies[2 * n], config=config)
        # As Status.complete decides it: the flag, else jobs added and none live.
        complete = status.complete_flag or (status.total > 0 and int(replies[2 * n + 1]) == 0)
        rows.append(summary(status, complete))
    return rows


def list_batches(request: WebRequest) -> dict[str, Any]:
    """The batches, newest first (``dead=1``: those that fired death), a page from ``cursor``."""
    dead = request.params.get("dead", "") in ("1", "true")
    key = keys.DEAD_BATCHES if dead else keys.BATCHES
    limit = request.int_param("limit", PAGE_LIMIT, 1, MAX_LIMIT)
    page, cursor = read_page(request.config, key, request.params.get("cursor") or None, limit)

    def sizes_of(conn: Any) -> list[Any]:
        pipe = conn.pipeline(transaction=False)
        pipe.zcard(keys.BATCHES)
        pipe.zcard(keys.DEAD_BATCHES)
        return list(pipe.execute())

    sizes = request.config.redis_pool.execute(sizes_of)
    rows = statuses(request.config, [bid for bid, _score in page])
    for row, (_bid, score) in zip(rows, page, strict=True):
        row["listed_at"] = score  # created_at for the list, death for the dead list
    return {"dead": dead, "size": int(sizes[0]), "dead_size": int(sizes[1]), "batches": rows, "cursor": cursor}


# -- one batch ------------------------------------------------------------------------


def sample(config: Config, key: str, *, skip_prefix: str | None = None) -> dict[str, Any]:
    """Up to :data:`SAMPLE` members of a set (sorted) and its exact size."""

    def read(conn: Any) -> tuple[int, list[str]]:
        size = int(conn.scard(key))
        found: set[str] = set()
        cursor = 0
        for _ in range(SCAN_STEPS):
            cursor, members = conn.sscan(key, cursor, count=SAMPLE)
            found.update(_text(member) for member in members)
            if cursor == 0 or len(found) >= SAMPLE:
                break
        return size, sorted(found)

    size, members = config.redis_pool.execute(read)
    if skip_prefix is not None:
        kept = [member for member in members if not member.startswith(skip_prefix)]
        size -= len(members) - len(kept)  # an open jobs block's token is not a job
        members = kept
    return {"size": max(0, size), "sample": members[:SAMPLE], "more": size > min(len(members), SAMPLE)}


def callbacks(config: Config, bid: str) -> dict[str, list[dict[str, Any]]]:
    """Each event's callbacks as ``{"target", "options"}``, options redacted."""
    names = [f"cb-{event}" for event in keys.EVENTS]
    raw = config.redis_pool.execute(lambda conn: conn.hmget(keys.batch(bid), names))
    found: dict[str, list[dict[str, Any]]] = {}
    for event, value in zip(keys.EVENTS, raw, strict=True):
        try:
            entries = json.loads(value) if value else []
        except ValueError:
            entries = []
        rows = []
        for entry in entries if isinstance(entries, list) else []:
            if isinstance(entry, list) and len(entry) == 2:
                rows.append({"target": str(entry[0]), "options": redact(entry[1])})
        found[event] = rows
    return found


def failures(config: Config, bid: str) -> tuple[list[dict[str, Any]], bool]:
    """The batch's jobs in the retry and dead sets with their errors (a bounded
    search, as the dashboard's search box makes), and whether it stopped early."""
    search = Search(bid, kinds=["retry", "dead"], limit=FAILURES, config=config)
    rows = []
    for row in search.results():
        if JobRecord(row.value, config=config).bid != bid:
            continue  # the bid appeared elsewhere in the payload
        rows.append(
            {
                "kind": "retries" if row.kind == "retry" else "dead",
                "id": f"{row.score!r}|{row.jid}",
                "jid": row.jid,
                "class": row.display_class,
                "error_class": row.error_class,
                "error_message": row.error_message,
                "retry_count": row.retry_count,
                "at": row.score,
            }
        )
    return rows, search.truncated


def batch_detail(request: WebRequest) -> dict[str, Any]:
    """One batch: its numbers, callbacks, parent, children, jids and failing jobs."""
    config = request.config
    bid = request.path_params["bid"]
    status = Status(bid, config=config)
    if not status.exists:
        raise WebError(404, f"no batch {bid!r}: it never existed, was deleted or expired")
    live = sample(config, keys.jids(bid), skip_prefix="open:")
    kids = sample(config, keys.kids(bid))
    found, truncated = failures(config, bid)
    return {
        **summary(status, status.complete),
        "callback_queue": status.callback_queue,
        "callbacks": callbacks(config, bid),
        "jids": live,
        "failed_jids": sample(config, keys.failed(bid)),
        "dead_jids": sample(config, keys.died(bid)),
        "children": {**kids, "batches": statuses(config, kids["sample"])},
        "pending_children": int(config.redis_pool.execute(lambda conn: conn.scard(keys.pkids(bid)))),
        "failed_jobs": found,
        "failed_jobs_truncated": truncated,
    }

"""``wurk retries``, ``wurk dead``, ``wurk scheduled``: find a job without its jid.

A job that failed a minute ago is in the retry set, one that gave up in the
dead set; knowing its class is enough to find it. Each command lists one set,
the entries a person is looking for first, a page at a time:

* ``retries``: the newest failure first (``retried_at``, else ``failed_at``).
  The set is scored by the next attempt, which puts a job's fifth failure
  hours behind its first, so the whole set is read to order it;
* ``dead``: the newest death first (the set's own order, read a page at a time);
* ``scheduled``: the soonest due first, what will run next (read a page at a time).

``--class`` and ``--queue`` narrow the list; ``--json`` prints a JSON list of
entries for scripts (each with its ``id``, ``"<score>|<jid>"``, which the
data API's ``JobSet.fetch`` finds again). Reads go through :mod:`wurk.api`.
"""

from __future__ import annotations

import heapq
import json
import math
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

import click

from wurk.cli.ops import _table, pool_option

#: Entries a page, as the dashboard's lists.
PER_PAGE = 25
MAX_PER_PAGE = 1000
#: Entries read from Redis a round trip while walking a set.
CHUNK = 500
#: Characters of an error shown in the table (all of it in --json).
ERROR_WIDTH = 70
ARGS_WIDTH = 50


@dataclass(frozen=True)
class Listing:
    """One page of a set: its entries, how many entries match in all (when
    the walk read them all), and whether more follow."""

    entries: list[Any]
    total: int | None
    more: bool


@dataclass(frozen=True)
class Kind:
    """How one command reads its set."""

    set_name: str  # the key, as `wurk job` names it
    when: str  # the table heading of the entry's score
    factory: Callable[[], Any]
    ascending: bool = False
    #: A sort key that is not the score: the set is then read whole.
    order: Callable[[Any], float] | None = None


def _api() -> Any:
    from wurk import api

    return api


def _last_failure(entry: Any) -> float:
    """When a retrying job last failed, epoch seconds (its score when unknown)."""
    stamp = entry.retried_at or entry.failed_at
    return stamp.timestamp() if stamp is not None else float(entry.score)


KINDS = {
    "retries": Kind("retry", "NEXT TRY", lambda: _api().RetrySet(), order=_last_failure),
    "dead": Kind("dead", "DIED", lambda: _api().DeadSet()),
    "scheduled": Kind("schedule", "DUE", lambda: _api().ScheduledSet(), ascending=True),
}


def _matches(entry: Any, classes: Sequence[str], queues: Sequence[str]) -> bool:
    """``--class`` matches the wire class or the class a person sees
    (``display_class``), in full or by its last dotted part (``HardJob`` for
    ``app.jobs.HardJob``); ``--queue`` matches the payload's queue."""
    if queues and entry.queue not in queues:
        return False
    if not classes:
        return True
    names = {name for name in (entry.klass, entry.display_class) if name}
    names |= {name.rpartition(".")[2] for name in names}
    return any(wanted in names for wanted in classes)


def _walk(job_set: Any, ascending: bool) -> Iterator[Any]:
    """Every entry of the set in score order (highest first unless
    ``ascending``), read ``CHUNK`` at a time with stable page cursors."""
    api = _api()
    cursor: str | None = None
    while True:
        rows, cursor = job_set.run(
            lambda conn, after=cursor: api.page_by_score(conn, job_set.name, after, CHUNK, ascending=ascending)
        )
        for member, score in rows:
            yield api.SortedEntry(job_set, score, member)
        if cursor is None:
            return


def read_page(kind: Kind, page: int, per_page: int, classes: Sequence[str], queues: Sequence[str]) -> Listing:
    """Page ``page`` (from 1) of the entries of ``kind`` that match."""
    job_set = kind.factory()
    skip = (page - 1) * per_page
    matching = (entry for entry in _walk(job_set, kind.ascending) if _matches(entry, classes, queues))
    if kind.order is not None:
        # Read whole: keep only as many as this page needs, newest first.
        seen = 0

        def counted() -> Iterator[Any]:
            nonlocal seen
            for entry in matching:
                seen += 1
                yield entry

        order = kind.order
        top = heapq.nlargest(skip + per_page, counted(), key=lambda entry: (order(entry), entry.score))
        return Listing(top[skip:], seen, seen > skip + per_page)
    # In the set's order: read only as far as this page (and one more entry).
    wanted: list[Any] = []
    count = 0
    for entry in matching:
        if count == skip + per_page:
            return Listing(wanted, None if classes or queues else job_set.size, True)
        if count >= skip:
            wanted.append(entry)
        count += 1
    return Listing(wanted, count, False)


def _iso(moment: datetime | float | None) -> str | None:
    if moment is None:
        return None
    if not isinstance(moment, datetime):
        moment = datetime.fromtimestamp(moment, UTC)
    return moment.isoformat(timespec="seconds")


def entry_data(entry: Any, set_name: str) -> dict[str, Any]:
    """One entry for ``--json``: the wire values, times as ISO 8601 in UTC.
    ``at`` is the score: the next attempt, the death or the due time."""
    return {
        "set": set_name,
        "id": entry.id,
        "jid": entry.jid,
        "class": entry.display_class,
        "queue": entry.queue,
        "args": entry.display_args,
        "at": _iso(entry.score),
        "retry_count": entry.retry_count,
        "error_class": entry.error_class,
        "error_message": entry.error_message,
        "failed_at": _iso(entry.failed_at),
        "retried_at": _iso(entry.retried_at),
        "created_at": _iso(entry.created_at),
    }


def _ago(seconds: float) -> str:
    """A span as people say it: 42s, 3m, 5h, 2d."""
    seconds = abs(seconds)
    for unit, size in (("d", 86400), ("h", 3600), ("m", 60)):
        if seconds >= size:
            return f"{int(seconds // size)}{unit}"
    return f"{int(seconds)}s"


def relative(moment: datetime | float | None, now: float) -> str:
    if moment is None:
        return ""
    stamp = moment.timestamp() if isinstance(moment, datetime) else float(moment)
    return f"in {_ago(stamp - now)}" if stamp > now else f"{_ago(now - stamp)} ago"


def _clip(text: str, width: int) -> str:
    text = " ".join(text.split())  # a multi-line message stays on its row
    return text if len(text) <= width else text[: width - 1] + "…"


def _row(kind: Kind, entry: Any, now: float) -> tuple[str, ...]:
    who = (entry.jid or "", entry.display_class, entry.queue or "")
    if kind.set_name == "schedule":
        arguments = json.dumps(entry.display_args, ensure_ascii=False, default=str)
        return (relative(entry.score, now), *who, _clip(arguments, ARGS_WIDTH))
    error = f"{entry.error_class or ''}: {entry.error_message or ''}".strip(": ")
    retries = "" if entry.retry_count is None else str(entry.retry_count)
    when = (relative(entry.retried_at or entry.failed_at, now),) if kind.order is not None else ()
    return (*when, relative(entry.score, now), *who, retries, _clip(error, ERROR_WIDTH))


def _heading(kind: Kind) -> tuple[str, ...]:
    who = ("JID", "CLASS", "QUEUE")
    if kind.set_name == "schedule":
        return (kind.when, *who, "ARGS")
    failed = ("FAILED",) if kind.order is not None else ()
    return (*failed, kind.when, *who, "RETRY", "ERROR")


def _footer(name: str, listing: Listing, page: int, per_page: int, narrowed: bool) -> str:
    """What was shown of how many, and the command for the next page."""
    first = (page - 1) * per_page + 1
    last = first + len(listing.entries) - 1
    matching = "matching " if narrowed else ""
    if listing.total is None:
        text = f"{first}-{last} of the {matching}entries"
    elif listing.total <= per_page and page == 1:
        text = f"{listing.total} {matching}{'entry' if listing.total == 1 else 'entries'}"
    else:
        pages = max(1, math.ceil(listing.total / per_page))
        text = f"{first}-{last} of {listing.total} {matching}entries, page {page} of {pages}"
    if listing.more:
        text += f"; next: wurk {name} --page {page + 1}"
    return text


def show(name: str, page: int, per_page: int, classes: Sequence[str], queues: Sequence[str], as_json: bool) -> None:
    kind = KINDS[name]
    listing = read_page(kind, page, per_page, classes, queues)
    if as_json:
        click.echo(json.dumps([entry_data(entry, kind.set_name) for entry in listing.entries], indent=2, default=str))
        return
    narrowed = bool(classes or queues)
    if not listing.entries:
        where = "matching " if narrowed else ""
        beyond = f" on page {page}" if page > 1 else ""
        click.echo(f"no {where}entries in {kind.set_name}{beyond}")
        return
    now = time.time()
    _table([_heading(kind), *(_row(kind, entry, now) for entry in listing.entries)])
    click.echo(_footer(name, listing, page, per_page, narrowed))


def _listing_command(name: str, summary: str) -> click.Command:
    @pool_option
    @click.command(name, help=summary)
    @click.option(
        "--class",
        "classes",
        multiple=True,
        metavar="CLASS",
        help="Only jobs of this class (full name or last part); repeat for several.",
    )
    @click.option(
        "--queue", "queues", multiple=True, metavar="QUEUE", help="Only jobs of this queue; repeat for several."
    )
    @click.option("--page", default=1, show_default=True, type=click.IntRange(min=1), help="Which page, from 1.")
    @click.option(
        "--per-page",
        "--limit",
        "per_page",
        default=PER_PAGE,
        show_default=True,
        type=click.IntRange(1, MAX_PER_PAGE),
        help="Entries a page.",
    )
    @click.option("--json", "as_json", is_flag=True, help="Print a JSON list of entries for scripts.")
    def command(classes: tuple[str, ...], queues: tuple[str, ...], page: int, per_page: int, as_json: bool) -> None:
        show(name, page, per_page, classes, queues, as_json)

    return command


retries_command = _listing_command(
    "retries",
    "Failed jobs waiting to retry, newest failure first.\n\n"
    "Shows when each last failed and will run again, its jid, class, queue, retry count and error. "
    "Reads the whole retry set to order it. Act on one with 'wurk job show|retry|kill|delete JID'.",
)
dead_command = _listing_command(
    "dead",
    "Jobs that ran out of retries, newest death first.\n\n"
    "The dead set: shows when each died, its jid, class, queue, retry count and error. "
    "Act on one with 'wurk job show|retry|delete JID'.",
)
scheduled_command = _listing_command(
    "scheduled",
    "Jobs waiting for their time, soonest due first.\n\n"
    "Jobs pushed with perform_in or perform_at. Shows when each is due, its jid, class, queue and arguments. "
    "Act on one with 'wurk job show|retry|delete JID' (retry runs it now).",
)

SET_COMMANDS: tuple[click.Command, ...] = (retries_command, dead_command, scheduled_command)

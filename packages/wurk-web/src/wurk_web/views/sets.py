"""The Retries, Scheduled and Dead pages: paged newest first, filtered, acted on.

Pages use stable cursors: a cursor is the score of the last entry shown and
how many entries at exactly that score were shown (``"<score>:<seen>"``), so
the next page starts right after it with one ``ZRANGE … BYSCORE REV LIMIT``,
whatever was added or removed above it meanwhile, and never reads more than
a page, however large the set. An entry is named by the data API's id,
``"<score>|<jid>"``, which finds it again with one ``ZRANGE`` by score.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from wurk.api import DeadSet, JobSet, RetrySet, ScheduledSet, Search, SortedEntry, page_by_score
from wurk.plugins.web import WebError
from wurk_web.present import counted, entry_summary, job_detail
from wurk_web.request import DashboardRequest

PAGE_LIMIT = 25
MAX_LIMIT = 200

#: Page name: (the set's class, the search kind, actions on entries, actions on the whole set).
KINDS: dict[str, tuple[Callable[..., JobSet], str, tuple[str, ...], tuple[str, ...]]] = {
    "retries": (RetrySet, "retry", ("retry", "delete", "kill"), ("retry", "delete", "kill")),
    "scheduled": (ScheduledSet, "scheduled", ("add_to_queue", "delete"), ("add_to_queue", "delete")),
    "dead": (DeadSet, "dead", ("retry", "delete"), ("retry", "delete")),
}

#: What each entry action calls on a :class:`wurk.api.SortedEntry`.
ENTRY_ACTIONS: dict[str, Callable[[SortedEntry], object]] = {
    "retry": SortedEntry.retry,
    "delete": SortedEntry.delete,
    "kill": SortedEntry.kill,
    "add_to_queue": SortedEntry.add_to_queue,
}


#: What each action did, as the page says it once done ("Retried 3 jobs").
DONE = {
    "retry": "Retried {}",
    "delete": "Deleted {}",
    "kill": "Moved {} to the dead set",
    "add_to_queue": "Added {} to their queues",
}


def outcome(action: str, done: int, missing: int = 0, refused: int = 0) -> str:
    """The sentence an action answers with: ``Retried 2 jobs; 1 was gone already.``"""
    parts = [DONE[action].format(counted(done, "job"))]
    if missing:
        parts.append(f"{missing} {'was' if missing == 1 else 'were'} gone already")
    if refused:
        what = "is not a JSON job and stays" if refused == 1 else "are not JSON jobs and stay"
        parts.append(f"{counted(refused, 'entry', 'entries')} {what}")
    return "; ".join(parts) + "."


def _job_set(request: DashboardRequest) -> tuple[str, JobSet]:
    kind = request.path_params["kind"]
    if kind not in KINDS:
        raise WebError(404, f"no set {kind!r}: one of {', '.join(KINDS)}")
    return kind, KINDS[kind][0](config=request.config, pool=request.pool)


def read_page(job_set: JobSet, cursor: str | None, limit: int) -> tuple[list[SortedEntry], str | None]:
    """Up to ``limit`` entries after ``cursor``, highest score first, and the next cursor."""
    try:
        rows, after = job_set.run(lambda conn: page_by_score(conn, job_set.name, cursor, limit))
    except ValueError as exc:
        raise WebError(400, str(exc)) from None
    return [SortedEntry(job_set, score, member) for member, score in rows], after


def list_entries(request: DashboardRequest) -> dict[str, Any]:
    """A page of the set, newest first; with ``q``, the entries containing it (a bounded search)."""
    kind, job_set = _job_set(request)
    limit = request.int_param("limit", PAGE_LIMIT, 1, MAX_LIMIT)
    query = request.params.get("q", "").strip()
    truncated = False
    if query:
        search = Search(query, kinds=[KINDS[kind][1]], limit=limit, config=request.config, pool=request.pool)
        found = search.results()
        entries = [SortedEntry(job_set, row.score or 0.0, row.value) for row in found]
        entries.sort(key=lambda entry: entry.score, reverse=True)
        cursor, truncated = None, search.truncated
    else:
        entries, cursor = read_page(job_set, request.params.get("cursor") or None, limit)
    return {
        "kind": kind,
        "size": job_set.size,
        "entries": [entry_summary(entry) for entry in entries],
        "cursor": cursor,
        "truncated": truncated,
        "actions": list(KINDS[kind][2]),
        "set_actions": list(KINDS[kind][3]),
    }


def _find(job_set: JobSet, entry_id: str) -> SortedEntry | None:
    score, _, jid = entry_id.partition("|")
    try:
        found = job_set.fetch(score)
    except (TypeError, ValueError):
        raise WebError(400, f"not an entry id: {entry_id!r}") from None
    # Compared as the id writes it, so an entry without a jid ("…|None") is found too.
    return next((entry for entry in found if str(entry.jid) == jid), None)


def entry_detail(request: DashboardRequest) -> dict[str, Any]:
    """One entry by ``id`` (``score|jid``): the job, its error and decoded backtrace."""
    kind, job_set = _job_set(request)
    entry_id = request.params.get("id", "")
    entry = _find(job_set, entry_id)
    if entry is None:
        raise WebError(404, f"no entry {entry_id!r} in {kind}: it was retried, moved or deleted")
    return {"kind": kind, "id": entry.id, "at": entry.score, **job_detail(entry), "actions": list(KINDS[kind][2])}


def act_on_entries(request: DashboardRequest) -> dict[str, Any]:
    """Apply ``action`` to the entries ``{"ids": [...]}``; entries gone meanwhile count as missing."""
    kind, job_set = _job_set(request)
    action = request.path_params["action"]
    if action not in KINDS[kind][2]:
        raise WebError(404, f"{kind} entries offer {', '.join(KINDS[kind][2])}, not {action!r}")
    done = missing = refused = 0
    for entry_id in request.body_list("ids"):
        entry = _find(job_set, entry_id)
        try:
            acted = entry is not None and bool(ENTRY_ACTIONS[action](entry))
        except ValueError:  # not a JSON job: it cannot be enqueued, only deleted or killed
            refused += 1
            continue
        done, missing = (done + 1, missing) if acted else (done, missing + 1)
    return {
        "kind": kind,
        "action": action,
        "done": done,
        "missing": missing,
        "refused": refused,
        "message": outcome(action, done, missing, refused),
    }


def add_all_to_queue(job_set: JobSet) -> tuple[int, int]:
    """Enqueue every entry now, payload unchanged (``SortedEntry.add_to_queue``
    on each, newest first; the walk allows for the entries it removes). Entries
    that are not JSON jobs stay in the set. (enqueued, refused)."""
    done = refused = 0
    for entry in job_set:
        try:
            done += entry.add_to_queue() is not None  # None: the scheduler promoted it first
        except ValueError:
            refused += 1
    return done, refused


def act_on_set(request: DashboardRequest) -> dict[str, Any]:
    """Apply ``action`` to the whole set: ``retry`` (``retry_all``), ``kill`` (``kill_all``),
    ``add_to_queue`` (each entry's ``add_to_queue``), ``delete`` (``clear``)."""
    kind, job_set = _job_set(request)
    action = request.path_params["action"]
    if action not in KINDS[kind][3]:
        raise WebError(404, f"the whole {kind} set offers {', '.join(KINDS[kind][3])}, not {action!r}")
    refused = 0
    if action == "retry":
        done = job_set.retry_all()
    elif action == "kill":
        done = job_set.kill_all()
    elif action == "add_to_queue":
        done, refused = add_all_to_queue(job_set)
    else:
        done = job_set.size
        job_set.clear()
    message = outcome(action, done, 0, refused)
    return {"kind": kind, "action": action, "done": done, "refused": refused, "message": message}

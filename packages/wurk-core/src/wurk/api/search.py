"""The dashboard's search box: a case-insensitive substring over stored jobs.

It looks through every queue (in name order) and the ``retry``, ``schedule``
and ``dead`` sets, matching the raw JSON of each job, so a class name, a jid,
an argument or an error message all work as the query::

    search = wurk.api.Search("NoMethodError", kinds=["retry", "dead"])
    for row in search.results():
        print(row.kind, row.name, row.jid, row.klass, row.error_message)
    search.truncated    # True when a scan bound stopped it early

A keystroke must not walk a store of millions, so the scan is bounded: at
most 5,000 entries per queue or set, and 20,000 per search. When a bound
stops it with entries left unexamined, ``truncated`` is set and the results
are partial; for an exhaustive match, walk the store yourself.

The work stays cheap at any size: queues are read from the head (newest
first) with ``LRANGE`` in pages, never beyond the bound; sets are walked with
``ZSCAN ... MATCH``, so Redis itself filters out the entries that cannot
match and only candidates cross the network. The MATCH pattern folds ASCII
case (``[nN][oO]…``) and lets any other cased character match anything; the
exact case-insensitive test is then made here. A set's bound is counted in
``ZSCAN`` steps of ``COUNT`` entries, which Redis treats as a close hint.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from dataclasses import asdict, dataclass
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any, ClassVar, cast

from wurk.api._base import RedisAccess, text
from wurk.api.record import JobRecord
from wurk.redis import keys

if TYPE_CHECKING:
    from wurk.config.configuration import Config
    from wurk.redis.connection import RedisPool

__all__ = ["KINDS", "MAX_LIMIT", "Search", "SearchResult"]

KINDS = ("queues", "retry", "scheduled", "dead")
SET_KEYS = {"retry": keys.RETRY, "scheduled": keys.SCHEDULE, "dead": keys.DEAD}
DEFAULT_LIMIT = 100
MAX_LIMIT = 500
PER_STORE = 5_000
PER_SEARCH = 20_000
#: Entries per ``LRANGE`` page, and the ``COUNT`` of each ``ZSCAN`` step.
PAGE = 1_000
_GLOB_SPECIAL = frozenset("*?[]\\")


@dataclass(frozen=True)
class SearchResult:
    """One matching job and where it was found.

    ``kind`` is ``queues``, ``retry``, ``scheduled`` or ``dead``; ``name`` is
    the queue's name or the set's key; ``value`` is the payload exactly as
    stored (what a deletion matches on). ``score`` and ``at`` are set for
    sorted-set rows only.
    """

    kind: str
    name: str
    jid: str | None
    klass: str | None
    display_class: str
    args: list[Any]
    queue: str | None
    enqueued_at: datetime | None
    created_at: datetime | None
    error_class: str | None
    error_message: str | None
    retry_count: int | None
    score: float | None
    at: datetime | None
    value: str

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)


def match_pattern(substring: str) -> str:
    """A ``ZSCAN MATCH`` glob matching at least every value that contains
    ``substring`` in any letter case."""
    parts = ["*"]
    for char in substring:
        if char.isascii():
            if char.isalpha():
                parts.append(f"[{char.lower()}{char.upper()}]")
            else:
                parts.append("\\" + char if char in _GLOB_SPECIAL else char)
        elif char.lower() == char.upper():
            parts.append(char)  # no case: the same bytes either way
        elif parts[-1] != "*":
            parts.append("*")  # its other case may differ in bytes, even in length
    if parts[-1] != "*":
        parts.append("*")
    return "".join(parts)


class Search(RedisAccess):
    """One bounded search; ``results()`` runs it (once) and ``truncated`` tells how it ended."""

    #: What a search may cover, and the most results it returns.
    KINDS: ClassVar[tuple[str, ...]] = KINDS
    MAX_LIMIT: ClassVar[int] = MAX_LIMIT

    def __init__(
        self,
        substring: str,
        *,
        kinds: Iterable[str] | None = None,
        limit: int = DEFAULT_LIMIT,
        config: Config | None = None,
        pool: RedisPool | str | None = None,
    ) -> None:
        super().__init__(config, pool)
        self.substring = str(substring or "")
        chosen = [kind for kind in (kinds or ()) if kind in KINDS]
        self.kinds: tuple[str, ...] = tuple(kind for kind in KINDS if kind in chosen) or KINDS
        self.limit = max(1, min(int(limit), MAX_LIMIT))
        self.truncated = False
        self.examined = 0
        self._needle = self.substring.lower()
        self._results: list[SearchResult] = []
        self._ran = False

    def __iter__(self) -> Iterator[SearchResult]:
        return iter(self.results())

    def results(self) -> list[SearchResult]:
        """The matches, at most ``limit``: queues first (newest job first), then the sets."""
        if not self._ran:
            self._ran = True
            if self._needle:
                self._run()
        return list(self._results)

    # -- the scan ---------------------------------------------------------------

    def _stores(self) -> list[tuple[str, str, str]]:
        """(kind, name, key) of every store to search, in search order."""
        stores = []
        if "queues" in self.kinds:
            names = self.run(lambda conn: sorted({text(name) for name in conn.sscan_iter(keys.QUEUES)}))
            stores += [("queues", name, keys.queue(name)) for name in names]
        stores += [(kind, SET_KEYS[kind], SET_KEYS[kind]) for kind in self.kinds if kind in SET_KEYS]
        return stores

    def _run(self) -> None:
        stores = self._stores()
        for index, (kind, name, key) in enumerate(stores):
            budget = PER_SEARCH - self.examined
            if budget <= 0:
                self.truncated = self.truncated or self._any_left(stores[index:])
                return
            scan = self._scan_queue if kind == "queues" else self._scan_set
            examined, stopped_early = scan(kind, name, key, min(PER_STORE, budget))
            self.examined += examined
            self.truncated = self.truncated or stopped_early
            if self._full():
                return

    def _full(self) -> bool:
        return len(self._results) >= self.limit

    def _any_left(self, stores: list[tuple[str, str, str]]) -> bool:
        def sizes(conn: Any) -> list[Any]:
            pipe = conn.pipeline(transaction=False)
            for kind, _, key in stores:
                if kind == "queues":
                    pipe.llen(key)
                else:
                    pipe.zcard(key)
            replies: list[Any] = pipe.execute()
            return replies

        return any(int(size) for size in self.run(sizes))

    def _scan_queue(self, kind: str, name: str, key: str, allowance: int) -> tuple[int, bool]:
        """Read a queue from its head in pages; (entries examined, stopped with more left)."""
        examined = 0
        while examined < allowance:
            wanted = min(PAGE, allowance - examined)
            page = self._read_list(key, examined, wanted)
            for value in page:
                examined += 1
                self._consider(kind, name, value, None)
                if self._full():
                    return examined, False
            if len(page) < wanted:
                return examined, False
        return examined, int(self.run(lambda conn: conn.llen(key))) > examined

    def _scan_set(self, kind: str, name: str, key: str, allowance: int) -> tuple[int, bool]:
        """Walk a sorted set with ``ZSCAN MATCH``; (entries examined, stopped with more left)."""
        size = int(self.run(lambda conn: conn.zcard(key)))
        if not size:
            return 0, False
        pattern = match_pattern(self.substring)
        cursor, stepped, seen = 0, 0, set()
        while True:
            cursor, pairs = self._read_set(key, cursor, pattern, min(PAGE, allowance))
            stepped += min(PAGE, allowance)
            for member, score in pairs:
                if member not in seen:  # a rehash can make ZSCAN repeat a member
                    seen.add(member)
                    self._consider(kind, name, member, score)
                    if self._full():
                        return min(stepped, size), False
            if int(cursor) == 0:
                return min(stepped, size), False
            if stepped >= allowance and size > allowance:
                return stepped, True

    def _read_list(self, key: str, start: int, count: int) -> list[bytes | str]:
        """``count`` entries of a list from index ``start``."""
        return self.run(lambda conn: conn.lrange(key, start, start + count - 1))

    def _read_set(self, key: str, cursor: int, pattern: str, count: int) -> tuple[int, list[tuple[bytes | str, float]]]:
        """One ``ZSCAN`` step: the next cursor and (member, score) pairs."""
        following, pairs = self.run(lambda conn: conn.zscan(key, cursor, match=pattern, count=count))
        # redis-py's reply type also admits RESP3's [member, score] lists, where a
        # member could be any item; Wurk speaks RESP2, whose pairs are (member, score).
        return following, cast("list[tuple[bytes | str, float]]", pairs)

    def _consider(self, kind: str, name: str, value: bytes | str, score: float | None) -> None:
        raw = text(value)
        if self._needle not in raw.lower():
            return
        record = JobRecord(raw, name if kind == "queues" else None, config=self.config, pool=self._pool)
        item = record.item
        retry_count = item.get("retry_count")
        self._results.append(
            SearchResult(
                kind=kind,
                name=name,
                jid=record.jid,
                klass=record.klass,
                display_class=record.display_class,
                args=record.display_args,
                queue=record.queue,
                enqueued_at=record.enqueued_at,
                created_at=record.created_at,
                error_class=record.error_class,
                error_message=record.error_message,
                retry_count=retry_count if isinstance(retry_count, int) else None,
                score=None if score is None else float(score),
                at=None if score is None else datetime.fromtimestamp(float(score), UTC),
                value=raw,
            )
        )

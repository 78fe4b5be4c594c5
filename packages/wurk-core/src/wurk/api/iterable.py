"""Reading many iterable jobs' progress at once.

``IterableJobQuery(jids)`` reads every ``it-<jid>`` HASH in one pipelined
round trip, for an admin view or a progress report over a whole set of jobs.
A jid with no state is missing from the answer: it is not an iterable job,
it completed (a finished job deletes its state), or its state expired.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from typing import TYPE_CHECKING, Any

from wurk.api._base import RedisAccess
from wurk.api.record import IterableState, iteration_key

if TYPE_CHECKING:
    from wurk.config.configuration import Config
    from wurk.redis.connection import RedisPool


class IterableJobQuery(RedisAccess):
    """The saved progress of the iterable jobs ``jids``, read once."""

    def __init__(
        self, jids: Iterable[str] | str, config: Config | None = None, pool: RedisPool | str | None = None
    ) -> None:
        super().__init__(config, pool)
        if jids is None:
            raise TypeError("IterableJobQuery needs a jid or a list of jids, got None")
        wanted = [jids] if isinstance(jids, str) else [jid for jid in jids if jid]
        self._jids = list(dict.fromkeys(wanted))  # each once, in the order given
        self._states = self._fetch()

    def _fetch(self) -> dict[str, IterableState]:
        if not self._jids:
            return {}

        def read(conn: Any) -> list[Any]:
            pipe = conn.pipeline(transaction=False)
            for jid in self._jids:
                pipe.hgetall(iteration_key(jid))
            return list(pipe.execute())

        replies = self.run(read)
        return {jid: IterableState.from_hash(jid, raw) for jid, raw in zip(self._jids, replies, strict=True) if raw}

    def __getitem__(self, jid: str) -> IterableState | None:
        """The state of ``jid``, or ``None`` when it has none."""
        return self._states.get(jid)

    def get(self, jid: str) -> IterableState | None:
        return self._states.get(jid)

    def __iter__(self) -> Iterator[IterableState]:
        """The states found, in the order the jids were given."""
        return (self._states[jid] for jid in self._jids if jid in self._states)

    def __len__(self) -> int:
        return len(self._states)

    def __contains__(self, jid: object) -> bool:
        return jid in self._states


__all__ = ["IterableJobQuery"]

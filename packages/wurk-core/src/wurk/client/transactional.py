"""The transaction-aware client: a push that waits for the database commit.

A job enqueued inside a database transaction can run before the transaction
commits — or after it rolled back — and find nothing. The transaction-aware
client hands the Redis write to a ``defer`` function, which runs it once the
surrounding transaction commits (and drops it on rollback). The jid is
allocated at once, so code inside the transaction can record it.

``defer`` is the framework's commit hook: ``django.db.transaction.on_commit``,
or a function that registers an SQLAlchemy ``after_commit`` listener. Like the
framework hooks, it must run the callback at once when no transaction is open.

Bulk pushes are never deferred, nor pushes whose push writer declares them
not replayable (:mod:`wurk.client.writers`): such a writer books its jobs when they
are pushed, and deferring would desync what it booked. The writer is asked before the
client middleware runs, since the chain runs at the commit.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any

from wurk.client.push import Client
from wurk.client.writers import PUSH

if TYPE_CHECKING:
    from wurk.config.configuration import Config

Defer = Callable[[Callable[[], object]], object]


class TransactionAwareClient(Client):
    def __init__(self, config: Config | None = None, *, defer: Defer, **kwargs: Any) -> None:
        super().__init__(config, **kwargs)
        self.defer = defer

    def push(self, item: Mapping[str, Any], *, origin: str = PUSH) -> str | None:
        pool = self._pool_for(item)
        normed = self.normalize_item(item)  # refuse bad input now, not after the commit
        writers = self.writers
        if writers.plugged and not writers.claimant(normed, origin).replayable:
            return self.push_normalized(normed, pool, origin=origin)
        self.defer(lambda: self.push_normalized(normed, pool, origin=origin))
        return str(normed["jid"])


def transactional_push(config: Config, defer: Defer) -> None:
    """Make every job push through :class:`TransactionAwareClient` with ``defer``.

    ``Job.set(client_class=wurk.Client)`` opts one push out again.
    """
    config.register("client_class", lambda cfg: TransactionAwareClient(cfg, defer=defer))

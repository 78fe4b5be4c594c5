"""Pushes made inside ``transaction.atomic()`` wait for the commit.

:func:`defer` is the commit hook core's transaction-aware client
(:mod:`wurk.client.transactional`) takes: it hands the push to
``transaction.on_commit`` of the database whose atomic block is open, so a
rollback drops it and a worker never looks for a row that is not committed
yet; outside any atomic block the push runs at once. The jid is allocated at
the call either way.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from django.db import DEFAULT_DB_ALIAS, connections, transaction


def open_atomic_alias() -> str | None:
    """The database whose atomic block is open in this thread, the default
    database first; None in autocommit. Only connections this thread has
    used are looked at: one never opened cannot be in a transaction."""
    opened: list[Any] = connections.all(initialized_only=True)
    atomic = [str(connection.alias) for connection in opened if connection.in_atomic_block]
    if DEFAULT_DB_ALIAS in atomic:
        return str(DEFAULT_DB_ALIAS)
    return atomic[0] if atomic else None


def defer(callback: Callable[[], object]) -> object:
    """Run ``callback`` after the open transaction commits, or now if none is open."""
    alias = open_atomic_alias()
    if alias is None:
        return callback()
    transaction.on_commit(callback, using=alias)
    return None

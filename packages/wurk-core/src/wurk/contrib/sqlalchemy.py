"""Pushes that wait for an SQLAlchemy session's commit.

::

    wurk.contrib.sqlalchemy.transactional_push(SessionLocal)

    with SessionLocal() as session, session.begin():
        session.add(order)
        ReceiptJob.perform_async(order.id)  # the jid now; the job at the commit

A push made while a session of ``sessions`` (a ``sessionmaker``, a ``Session``
subclass, or ``Session`` itself for every session, the default) has a
transaction open in this context is written to Redis after that session
commits, and dropped if it rolls back: the job never runs before the row it
needs is committed, nor for a row that never was. A rollback to a savepoint
drops only the pushes made inside it. Outside any session's transaction a
push is written at once. The jid is returned at once either way, and bad
arguments fail at the call (:mod:`wurk.client.transactional`).

Which session a push belongs to: the one whose transaction began last in
this context (thread or task) and is still open. Sessions are tracked through
their own events (``after_transaction_create``, ``after_transaction_end``,
``after_commit``, ``after_rollback``, ``after_soft_rollback``), so nothing
needs to be passed around. An ``AsyncSession`` works the same way: its
events are those of the synchronous session it drives, run in the caller's
context.
"""

from __future__ import annotations

import weakref
from collections.abc import Callable
from contextvars import ContextVar
from typing import Any

from sqlalchemy import event
from sqlalchemy.orm import Session, SessionTransaction

from wurk.client.transactional import transactional_push as _install
from wurk.config.configuration import Config
from wurk.config.defaults import current_config

__all__ = ["transactional_push"]

#: Where a session keeps the pushes waiting for its commit, in ``session.info``.
PENDING = "wurk_pending"

#: The sessions with a transaction open in this context, the latest last.
#: Held weakly: a session dropped without being closed must not live on in a
#: pool thread's context.
_open: ContextVar[tuple[weakref.ref[Session], ...]] = ContextVar("wurk_sqlalchemy_open", default=())


def transactional_push(sessions: Any = Session, config: Config | None = None) -> None:
    """Make every push on ``config`` (the configuration at hand) wait for the
    commit of the session of ``sessions`` whose transaction is open."""
    target = _sync_target(sessions)
    for name, listener in (
        ("after_transaction_create", _began),
        ("after_transaction_end", _ended),
        ("after_commit", _committed),
        ("after_soft_rollback", _rolled_back),
    ):
        if not event.contains(target, name, listener):
            event.listen(target, name, listener)
    _install(config or current_config(), _defer)


def _sync_target(sessions: Any) -> Any:
    """Where the events of ``sessions`` fire. An ``AsyncSession`` drives a
    synchronous session inside, whose events are the ones SQLAlchemy fires:
    an ``async_sessionmaker`` or ``AsyncSession`` class stands for its
    synchronous session class (every session of that class)."""
    kw = getattr(sessions, "kw", None)
    if isinstance(kw, dict) and "sync_session_class" in kw:
        return kw["sync_session_class"]
    made = getattr(sessions, "class_", sessions)
    return getattr(made, "sync_session_class", sessions)


def _defer(callback: Callable[[], object]) -> None:
    for ref in reversed(_open.get()):
        session = ref()
        if session is not None and session.in_transaction():
            transaction = session.get_nested_transaction() or session.get_transaction()
            session.info.setdefault(PENDING, []).append((transaction, callback))
            return
    callback()


def _began(session: Session, transaction: SessionTransaction) -> None:
    if transaction.parent is None and all(ref() is not session for ref in _open.get()):
        _open.set((*_open.get(), weakref.ref(session)))


def _ended(session: Session, transaction: SessionTransaction) -> None:
    if transaction.parent is None:
        _open.set(tuple(ref for ref in _open.get() if ref() not in (session, None)))
        # A commit took its pushes already; what is left was never committed
        # (a session closed with its transaction still open rolls it back).
        session.info.pop(PENDING, None)


def _committed(session: Session) -> None:
    if session.in_nested_transaction():
        return  # a savepoint released: its pushes wait for the outermost commit
    # Every push waiting, savepoints' included, is now backed by committed
    # rows. One that fails (Redis down, without reliable_push) must not cost
    # the others their push; the first failure reaches the code that committed.
    failure: Exception | None = None
    for _, callback in session.info.pop(PENDING, []):
        try:
            callback()
        except Exception as exc:
            failure = failure or exc
    if failure is not None:
        raise failure


def _rolled_back(session: Session, previous_transaction: SessionTransaction) -> None:
    """Drop the pushes made inside the transaction rolled back (a savepoint's,
    or everything on the outermost one's rollback)."""
    pending = session.info.get(PENDING)
    if pending:
        session.info[PENDING] = [
            (transaction, callback)
            for transaction, callback in pending
            if not _within(transaction, previous_transaction)
        ]


def _within(transaction: SessionTransaction | None, ancestor: SessionTransaction) -> bool:
    while transaction is not None:
        if transaction is ancestor:
            return True
        transaction = transaction.parent
    return False

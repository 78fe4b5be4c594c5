"""The batch's server middleware (the ``bid`` of a job pushed inside a
``jobs`` block is stamped by the push writer, :mod:`wurk_batches.writer`).

:class:`ServerMiddleware` books each batched run as the guides'
"Failure handling" table says: a return is a success, a raise is a failure
(the jid joins the failed set), and a clean, handled exit (a shutdown, an
``Interrupted``, a ``Skip`` such as a rate limiter's reschedule) books
nothing, so the jid stays live and its next run counts once. A death is
booked when core tells the outcome (see ``plugin.wurk_job_outcome``), since
only the retry layer knows whether a failure was the last one.

The server middleware sits right inside core's ``InterruptHandler`` and
outside ``Expiry``: an expired job returns through it and counts as a
success, as the guides say.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any

import wurk
from wurk.errors import Interrupted, Shutdown
from wurk.server.retry import Handled, caused_by_shutdown, shutdown_of_task
from wurk_batches.books import Books, counted_under_testing, testing_opt_in


@testing_opt_in
class ServerMiddleware(wurk.ServerMiddleware):
    stateless = True

    def call(self, job_instance: Any, job: dict[str, Any], queue: str, call_next: Callable[[], Any]) -> Any:
        member = self._member(job_instance, job)
        if member is None:
            return call_next()
        books, bid, jid = member
        if books.invalidated(bid):
            books.ack_success(bid, jid)  # called off: counted, acked as a success without running
            return None
        try:
            result = call_next()
        except BaseException as exc:
            failed(books, bid, jid, exc)
            raise
        books.ack_success(bid, jid)
        return result

    async def call_async(
        self, job_instance: Any, job: dict[str, Any], queue: str, call_next: Callable[[], Awaitable[Any]]
    ) -> Any:
        member = self._member(job_instance, job)
        if member is None:
            return await call_next()
        books, bid, jid = member
        if books.invalidated(bid):
            books.ack_success(bid, jid)
            return None
        try:
            result = await call_next()
        except BaseException as exc:
            failed(books, bid, jid, shutdown_of_task(exc))
            raise
        books.ack_success(bid, jid)
        return result

    def _member(self, job_instance: Any, job: dict[str, Any]) -> tuple[Books, str, str] | None:
        """The batch's books, its id and the job's, for a job in a batch."""
        bid = job.get("bid")
        jid = job.get("jid")
        if not bid or not isinstance(jid, str):
            return None
        # Core sets only ``jid`` on a running job: ``bid`` (what BatchJob's
        # ``batch`` and ``valid_within_batch`` read) is the batch's to set.
        job_instance.bid = str(bid)
        return Books.of(self.config), str(bid), jid


def failed(books: Books, bid: str, jid: str, exc: BaseException) -> None:
    """Count the job's failure in its batch, unless it did not fail: booked
    already (a retry), given back (interrupted, a shutdown)."""
    if not isinstance(exc, (Handled, Interrupted, Shutdown)) and not caused_by_shutdown(exc):
        books.ack_failure(bid, jid)


__all__ = ["ServerMiddleware", "counted_under_testing"]

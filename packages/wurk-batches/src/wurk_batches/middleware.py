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

from collections.abc import Callable
from typing import Any

import wurk
from wurk.errors import Interrupted, Shutdown
from wurk.server.retry import Handled, caused_by_shutdown
from wurk_batches.books import Books, counted_under_testing, testing_opt_in


@testing_opt_in
class ServerMiddleware(wurk.ServerMiddleware):
    stateless = True

    def call(self, job_instance: Any, job: dict[str, Any], queue: str, call_next: Callable[[], Any]) -> Any:
        bid = job.get("bid")
        jid = job.get("jid")
        if not bid or not isinstance(jid, str):
            return call_next()
        # Core sets only ``jid`` on a running job: ``bid`` (what BatchJob's
        # ``batch`` and ``valid_within_batch`` read) is the batch's to set.
        job_instance.bid = str(bid)
        books = Books.of(self.config)
        if books.invalidated(str(bid)):
            # The batch was called off: the job stays counted and acks as a
            # success without running, so the batch still finishes.
            books.ack_success(str(bid), jid)
            return None
        try:
            result = call_next()
        except (Handled, Interrupted, Shutdown):
            raise
        except BaseException as exc:
            if not caused_by_shutdown(exc):
                books.ack_failure(str(bid), jid)
            raise
        books.ack_success(str(bid), jid)
        return result


__all__ = ["ServerMiddleware", "counted_under_testing"]

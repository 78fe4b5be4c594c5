"""The limiters' exceptions."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from wurk.server.retry import Skip

if TYPE_CHECKING:
    from wurk_limiter.limiter import Limiter


class OverLimit(Exception):
    """A limiter refused: no room within its ``wait_timeout`` (at once for
    ``points``).

    ``limiter`` is the limiter that refused; ``job`` is the payload of the job
    in flight, set by the server middleware (``None`` outside a job). Inside
    a job, let it propagate: the middleware reschedules the job. Outside one,
    catch it (a web request answers 429).
    """

    def __init__(self, limiter: Limiter, job: dict[str, Any] | None = None) -> None:
        super().__init__(f"limit '{limiter.name}' ({limiter.type}) reached")
        self.limiter = limiter
        self.job = job


class Rescheduled(Skip):
    """The limiter middleware put the job back (or, at the cap, into the dead
    set) itself: the processor acknowledges the run and books nothing, and an
    enclosing batch counts it neither a success nor a failure. Its ``log_as``
    is the job log's line for the run; a put-back run is ``rescheduled``, so
    the worker counts it in ``stat:rescheduled`` rather than ``stat:processed``."""

"""What a fetch hands out, and what any fetcher must provide.

A processor thread asks its fetcher for a :class:`UnitOfWork`, runs it, and
then acknowledges it (the job may leave Redis), abandons it (neither done nor
booked: give it back soon) or requeues it. :class:`Fetcher` is that contract;
:class:`wurk.server.fetch.ReliableFetcher` is Wurk's own, and
``config["fetch_class"]`` may name another.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Protocol

__all__ = ["Fetcher", "UnitOfWork"]


@dataclass(eq=False, slots=True)
class UnitOfWork:
    """One fetched job: its queue name, its exact JSON, and where it is parked."""

    queue: str
    job: str | bytes
    private: str
    fetcher: Fetcher
    #: The id of a recovered job running under suspicion ("" for an ordinary one).
    suspect: str = ""
    #: A suspect recovered twice or more: nothing else runs in this process meanwhile.
    alone: bool = False

    def acknowledge(self) -> None:
        self.fetcher.acknowledge(self)


class Fetcher(Protocol):
    """What a custom ``config["fetch_class"]`` must provide; it is built as
    ``fetch_class(capsule, identity)``. :class:`wurk.testing.fetcher_contract.FetcherContract`
    is a test suite any implementation can run against a real server."""

    #: How many jobs to claim ahead of the idle threads; the manager sets it.
    prefetch: Callable[[], int]

    def retrieve_work(self) -> UnitOfWork | None:
        """The next job, or ``None`` after about ``fetch_poll_interval``."""
        ...

    def acknowledge(self, uow: UnitOfWork) -> None:
        """The job is done (or its failure booked): it may leave Redis."""
        ...

    def flush_acks(self) -> None:
        """Send any acknowledgement still held back."""
        ...

    def abandon(self, uow: UnitOfWork) -> None:
        """Neither done nor booked: give it back to its queue soon."""
        ...

    def requeue(self, units: list[UnitOfWork]) -> int:
        """Give these claimed jobs back to their queues now."""
        ...

    def quiet(self) -> None:
        """Claim nothing more (one-way); a blocked ``retrieve_work`` returns."""
        ...

    def requeue_all(self) -> int:
        """At shutdown: give back every job claimed and not acknowledged."""
        ...

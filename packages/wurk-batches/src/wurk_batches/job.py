"""What a job can read of its batch while it runs.

Core puts only ``jid`` on a running job: in a worker, the batch server
middleware sets ``bid`` on every batched job, and this mixin also reads it
from the running payload (``wurk.server.builtin_middleware.current_job``), so
``bid`` and ``batch`` work in inline mode too, where that middleware does
not run. The batch itself, and whether it is still valid, come from this
mixin, since core knows nothing about batches::

    class ImportRowJob(wurk_batches.BatchJob, wurk.Job):
        def perform(self, row_id):
            if not self.valid_within_batch():
                return  # the batch was invalidated: skip the work
            with self.batch.jobs():  # add a sibling to my own batch
                FollowUpJob.perform_async(row_id)

There is no "current batch" outside ``jobs`` blocks: ``bid`` and ``batch``
on the job are the way in.
"""

from __future__ import annotations

from wurk.server.builtin_middleware import current_job
from wurk_batches.batch import Batch


class BatchJob:
    """Mix into a ``wurk.Job`` (before it) for ``batch`` and ``valid_within_batch()``."""

    @property
    def bid(self) -> str | None:
        """The running job's bid: the one the batch middleware set, else the payload's."""
        found = self.__dict__.get("bid")
        if found is None:
            job = current_job.get()
            found = job.get("bid") if job is not None else None
        return found if isinstance(found, str) else None

    @bid.setter
    def bid(self, value: str | None) -> None:
        self.__dict__["bid"] = value

    @property
    def batch(self) -> Batch | None:
        """The job's batch, reopened by its bid; None outside a batch."""
        return Batch(self.bid) if self.bid else None

    def valid_within_batch(self) -> bool:
        """False when the job's batch was invalidated; True outside a batch."""
        return not self.bid or Batch(self.bid).valid

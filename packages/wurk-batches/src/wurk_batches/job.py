"""What a job can read of its batch while it runs.

Core gives every job its ``bid`` (set from the payload before ``perform``);
the batch itself, and whether it is still valid, come from this mixin, since
core knows nothing about batches::

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

from wurk_batches.batch import Batch


class BatchJob:
    """Mix into a ``wurk.Job`` (before it) for ``batch`` and ``valid_within_batch()``."""

    bid: str | None = None

    @property
    def batch(self) -> Batch | None:
        """The job's batch, reopened by its bid; None outside a batch."""
        return Batch(self.bid) if self.bid else None

    def valid_within_batch(self) -> bool:
        """False when the job's batch was invalidated; True outside a batch."""
        return not self.bid or Batch(self.bid).valid

"""The numbers the guides name, under their Sidekiq Pro names."""

from __future__ import annotations

#: How long a batch lives from its first ``jobs`` block (30 days); override
#: per batch with ``Batch.expires_in``.
DEFAULT_EXPIRY_SECONDS = 30 * 24 * 3600
#: How long a batch is kept once success fired (24 hours); override per
#: batch with ``Batch.linger``.
POST_SUCCESS_EXPIRY_SECONDS = 24 * 3600
#: How long the at-most-once callback markers live (30 days).
CALLBACK_NOTIFY_TTL = 30 * 24 * 3600
#: The queue callback jobs go to unless the batch names another.
DEFAULT_CALLBACK_QUEUE = "default"
#: The wire names of the plugin's own jobs.
CALLBACK_JOB = "wurk_batches.CallbackJob"
EMPTY_JOB = "wurk_batches.Empty"
#: ``Status.join``'s polling interval, seconds.
JOIN_POLL_INTERVAL = 0.5

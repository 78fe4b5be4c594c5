"""Batches for Wurk: groups of jobs tracked as a unit, with success, complete
and death callbacks, wire-compatible with Sidekiq Pro's batches.

::

    from wurk_batches import Batch

    batch = Batch()
    batch.on("success", "app.callbacks.ImportDone", {"account_id": 42})
    with batch.jobs():
        ImportRowJob.perform_async(7)

See docs/batches.md.
"""

from importlib import metadata

from wurk_batches.batch import Batch, new_bid
from wurk_batches.callbacks import CallbackJob, Empty, UnresolvableTarget
from wurk_batches.constants import CALLBACK_NOTIFY_TTL, DEFAULT_EXPIRY_SECONDS, POST_SUCCESS_EXPIRY_SECONDS
from wurk_batches.job import BatchJob
from wurk_batches.middleware import ServerMiddleware
from wurk_batches.status import BatchSet, DeadSet, Status
from wurk_batches.web import BatchStatus, BatchStatusMiddleware

try:
    # This distribution's own version, not core's: they are released apart.
    __version__ = metadata.version("wurk-batches")
except metadata.PackageNotFoundError:  # imported from a source tree, not installed
    __version__ = "0+unknown"

__all__ = [
    "CALLBACK_NOTIFY_TTL",
    "DEFAULT_EXPIRY_SECONDS",
    "POST_SUCCESS_EXPIRY_SECONDS",
    "Batch",
    "BatchJob",
    "BatchSet",
    "BatchStatus",
    "BatchStatusMiddleware",
    "CallbackJob",
    "DeadSet",
    "Empty",
    "ServerMiddleware",
    "Status",
    "UnresolvableTarget",
    "__version__",
    "new_bid",
]

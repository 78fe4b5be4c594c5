"""wurk-unique: at most one pending copy of a job per unique key.

::

    import wurk
    import wurk_unique

    wurk_unique.enable()  # in every process that pushes or runs jobs

    class ChargeJob(wurk.Job, unique_for=600, unique_until="success"):
        def perform(self, account_id, cents): ...

    ChargeJob.perform_async(1, 2_500)   # a jid
    ChargeJob.perform_async(1, 2_500)   # None: a duplicate, dropped

The lock is ``unique:<digest>`` (Sidekiq Enterprise's key), holding the jid
that owns it for ``unique_for`` seconds. See docs/unique-jobs.md.
"""

from importlib import metadata

from wurk_unique.lock import ConfigurationError, lock_key, locked
from wurk_unique.middleware import UniqueClient, UniqueServer
from wurk_unique.state import ReleaseOnDeath, disable, enable, enabled

try:
    # This distribution's own version, not core's: they are released apart.
    __version__ = metadata.version("wurk-unique")
except metadata.PackageNotFoundError:  # imported from a source tree, not installed
    __version__ = "0+unknown"

__all__ = [
    "ConfigurationError",
    "ReleaseOnDeath",
    "UniqueClient",
    "UniqueServer",
    "__version__",
    "disable",
    "enable",
    "enabled",
    "lock_key",
    "locked",
]

"""Rate limiters for Wurk, shared through Redis: ``concurrent``, ``bucket``,
``window``, ``leaky``, ``points`` and ``unlimited`` (Sidekiq Enterprise's
limiters, on the same ``lmtr…`` keys)::

    from wurk_limiter import Limiter, OverLimit

    STRIPE = Limiter.concurrent("stripe", 50)

    with STRIPE.within_limit():
        charge()

Inside a job an :class:`OverLimit` reschedules the job (the plugin's server
middleware); elsewhere, catch it. See docs/rate-limiting.md.
"""

from importlib import metadata

from wurk_limiter.admission import Admission
from wurk_limiter.concurrent import Concurrent
from wurk_limiter.counting import Bucket, Window
from wurk_limiter.draining import Leaky, Points
from wurk_limiter.errors import OverLimit, Rescheduled
from wurk_limiter.handle import Handle
from wurk_limiter.limiter import Limiter
from wurk_limiter.middleware import LimiterMiddleware
from wurk_limiter.settings import LimiterConfig, limiter_config
from wurk_limiter.unlimited import Unlimited

try:
    # This distribution's own version, not core's: they are released apart.
    __version__ = metadata.version("wurk-limiter")
except metadata.PackageNotFoundError:  # imported from a source tree, not installed
    __version__ = "0+unknown"

__all__ = [
    "Admission",
    "Bucket",
    "Concurrent",
    "Handle",
    "Leaky",
    "Limiter",
    "LimiterConfig",
    "LimiterMiddleware",
    "OverLimit",
    "Points",
    "Rescheduled",
    "Unlimited",
    "Window",
    "__version__",
    "limiter_config",
]

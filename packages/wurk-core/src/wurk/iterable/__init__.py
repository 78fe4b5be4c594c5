"""Iterable jobs: long jobs that checkpoint a cursor and resume after a stop.

See :class:`IterableJob`, the builders in :mod:`wurk.iterable.enumerators` and
:mod:`wurk.iterable.orm`, and the state layout in :mod:`wurk.iterable.state`.
"""

from wurk.iterable.enumerators import Enumerator
from wurk.iterable.job import IterableJob
from wurk.iterable.state import CANCELLATION_PERIOD, STATE_FLUSH_INTERVAL, STATE_TTL, iteration_key

__all__ = [
    "CANCELLATION_PERIOD",
    "STATE_FLUSH_INTERVAL",
    "STATE_TTL",
    "Enumerator",
    "IterableJob",
    "iteration_key",
]

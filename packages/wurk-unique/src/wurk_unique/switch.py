"""The process-wide switch for unique jobs, on or off.

A leaf: :mod:`wurk_unique.state` turns it (and installs the middleware when
it turns it on), and the middleware reads it on every push and every job.
Kept apart from the state so that the middleware, which the state imports
to install it, reads the switch without importing the state back.
"""

from __future__ import annotations

import threading

_lock = threading.Lock()
_on = False


def is_on() -> bool:
    """Whether unique jobs are on in this process."""
    return _on


def turn(on: bool) -> None:
    """Turn unique jobs on or off in this process."""
    global _on
    with _lock:
        _on = on


__all__ = ["is_on", "turn"]

"""pytest fixtures for testing an application's jobs (loaded automatically
when wurk-core is installed; ``-p no:wurk`` turns them off).

* ``wurk_fake``: fake mode for the test; yields the fake store, emptied
  before and after.
* ``wurk_inline``: inline mode for the test.
* ``wurk_testing_middleware``: the testing server chain, restored after the test.

The mode fixtures set the mode process-wide for the test and put the previous
one back after it, rather than opening a ``with`` block: jobs pushed from
threads the code under test starts are covered too, and a test can still open
a block of another mode inside (a block inside a block would be refused).
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from wurk import testing
from wurk.client.middleware import Chain
from wurk.testing.store import Queues


@pytest.fixture
def wurk_fake() -> Iterator[Queues]:
    """Fake mode for this test; yields ``wurk.testing.queues``."""
    testing.clear_all()
    previous = testing.state.set_global_mode("fake")
    try:
        yield testing.queues
    finally:
        testing.state.set_global_mode(previous)
        testing.clear_all()


@pytest.fixture
def wurk_inline() -> Iterator[None]:
    """Inline mode for this test: every push runs its job at once."""
    previous = testing.state.set_global_mode("inline")
    try:
        yield
    finally:
        testing.state.set_global_mode(previous)


@pytest.fixture
def wurk_testing_middleware() -> Iterator[Chain]:
    """``wurk.testing.server_middleware``, put back as it was after the test."""
    saved = testing.server_middleware.entries
    try:
        yield testing.server_middleware
    finally:
        testing.server_middleware.clear()
        for entry in saved:
            testing.server_middleware.add(entry.klass, *entry.args, **entry.kwargs)

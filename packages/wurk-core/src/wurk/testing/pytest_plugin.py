"""pytest fixtures for testing an application's jobs (loaded automatically
when wurk-core is installed).

* ``wurk_fake``: fake mode for the test; yields the fake store, emptied after.
* ``wurk_inline``: inline mode for the test.
* ``wurk_testing_middleware``: the testing server chain, restored after the test.
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from wurk import testing
from wurk.middleware import Chain
from wurk.testing.store import Queues


@pytest.fixture
def wurk_fake() -> Iterator[Queues]:
    testing.queues.clear_all()
    with testing.fake():
        yield testing.queues
    testing.queues.clear_all()


@pytest.fixture
def wurk_inline() -> Iterator[None]:
    with testing.inline():
        yield


@pytest.fixture
def wurk_testing_middleware() -> Iterator[Chain]:
    saved = testing.server_middleware.entries
    yield testing.server_middleware
    testing.server_middleware.clear()
    for entry in saved:
        testing.server_middleware.add(entry.klass, *entry.args, **entry.kwargs)

"""Where the testing modes reach the client, without the client importing them.

The client sits below :mod:`wurk.testing` in the layout: testing runs jobs
through the client and the registry, so the client must not reach up for it.
Instead testing plugs itself in here, from above, in two places:

* :data:`interceptor`, set while a testing mode is switched on (``fake`` or
  ``inline``, process-wide or in a block, in any thread) and ``None`` once
  every mode is off again. ``Client.raw_push`` reads it first, so with
  testing off a push pays one attribute read;
* :data:`helpers`, the testing module itself, registered when it is imported
  (``wurk`` imports it): what ``MyJob.drain()``, ``MyJob.jobs`` and
  ``perform_inline`` call.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any, Protocol

from wurk.errors import ConfigurationError
from wurk.types import Payload

if TYPE_CHECKING:
    from wurk.client.middleware import Chain
    from wurk.client.push import Client
    from wurk.config.configuration import Config


class Interceptor(Protocol):
    """A testing mode switched on: it takes the pushes instead of Redis."""

    def enabled(self) -> bool:
        """True when a mode other than ``disable`` is in force in this context."""
        ...

    def intercept(self, payloads: Sequence[Mapping[str, Any]], client: Client) -> None:
        """Collect or run ``payloads`` instead of writing them to Redis."""
        ...


class TestingHelpers(Protocol):
    """The fake store's helpers and the inline run, as ``wurk.testing`` offers them."""

    def run_inline(
        self, job_class: Any, payload: Mapping[str, Any], chain: Chain, config: Config | None = None
    ) -> Any: ...
    def jobs(self, job_class: Any = None) -> list[Payload]: ...
    def clear(self, job_class: Any = None) -> None: ...
    def clear_all(self) -> None: ...
    def drain(self, job_class: Any = None) -> int: ...
    def drain_all(self) -> int: ...
    def perform_one(self, job_class: Any = None) -> Any: ...
    def process_job(self, job_class: Any, job: Mapping[str, Any]) -> Any: ...


#: The testing state while a mode is switched on; ``None`` while all are off.
interceptor: Interceptor | None = None
#: The testing helpers, registered by :mod:`wurk.testing` on import.
helpers: TestingHelpers | None = None


def intercepting() -> bool:
    """True when a testing mode takes pushes in this context."""
    current = interceptor
    return current is not None and current.enabled()


def testing_helpers() -> TestingHelpers:
    """The registered testing helpers; importing ``wurk`` registers them."""
    if helpers is None:
        raise ConfigurationError("the testing helpers are not loaded: import wurk.testing")
    return helpers


class FakeJobs(list[Payload]):
    """The payloads ``MyJob.jobs`` returns: a new list on each access.

    Calling it (``MyJob.jobs()``) returns the same list, so both spellings work.
    """

    def __call__(self) -> FakeJobs:
        return self


class JobsAttribute:
    """``MyJob.jobs``: the class's fake payloads; on ``wurk.Job`` itself, all of them."""

    def __get__(self, instance: object, owner: type) -> FakeJobs:
        return FakeJobs(testing_helpers().jobs(owner))

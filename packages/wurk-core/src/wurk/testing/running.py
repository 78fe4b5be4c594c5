"""Running one payload in-process, the way inline mode and draining do.

Nothing here reads the testing state: the chain to run through is passed in,
so ``Job.perform_inline`` can use the configuration's real server chain and
the testing helpers the separate testing chain.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from wurk import current
from wurk.client import payload as wire
from wurk.client.registry import defined_job_class
from wurk.server.builtin_middleware import current_job
from wurk.types import Payload

if TYPE_CHECKING:
    from wurk.client.middleware import Chain
    from wurk.config.configuration import Config


def run_inline(job_class: Any, payload: Mapping[str, Any], chain: Chain, config: Config | None = None) -> Any:
    """Instantiate ``job_class`` for ``job`` and run it through ``chain``;
    ``perform``'s return value (``None`` when a middleware skipped it). The
    job runs as ``config`` (see :mod:`wurk.current`): what it pushes or reads
    goes where a worker on that configuration would send it."""
    config = config or (chain.config if chain.config is not None else current_config())
    if chain.config is None:
        chain = chain.copy_for(config)  # so the middleware get a configuration
    job_class = unwrap(job_class)
    job = wire_copy(payload)
    instance = job_class()
    instance.jid = job.get("jid")
    result: list[Any] = [None]

    def perform() -> Any:
        result[0] = job_class.execute_job(instance, job["args"])
        return result[0]

    token = current_job.set(job)
    try:
        with current.running(getattr(config, "config", config)):  # a chain may hold a capsule
            chain.invoke(instance, job, job.get("queue"), final=perform)
    finally:
        current_job.reset(token)
    return result[0]


def wire_copy(job: Mapping[str, Any]) -> dict[str, Any]:
    """``job`` after a round trip through the wire encoding.

    The same encoding as the real write, so a payload Redis would refuse is
    refused here too, and the job gets copies, not the caller's objects.
    """
    copied: dict[str, Any] = wire.loads(wire.dumps(job))
    return copied


def stored_copy(job: Mapping[str, Any]) -> Payload:
    """``job`` as the fake store keeps it: what a worker would read back."""
    stored: Payload = wire.loads(wire.dumps(job))
    return stored


def current_config() -> Config:
    # Imported late: the configuration module pulls in most of Wurk, and
    # ``wurk.client.push`` imports this package while ``wurk`` itself is loading.
    from wurk.config.defaults import current_config

    return current_config()


def unwrap(job_class: Any) -> Any:
    """The class behind a ``@wurk.job`` function; other classes unchanged."""
    from wurk.client.job import JobFunction

    return job_class.job_class if isinstance(job_class, JobFunction) else job_class


def covers_all(job_class: Any) -> bool:
    """``None`` and ``wurk.Job`` itself mean every class."""
    from wurk.client.job import Job

    return job_class is None or job_class is Job


def resolve(name: str, config: Config | None = None) -> Any:
    """The job class a payload's ``class`` names.

    A class already defined in this process is preferred, which covers custom
    ``wire_name``s and jobs defined in a ``__main__`` script (importing the
    script again would run it twice); anything else goes through the
    configuration's registry.
    """
    defined = defined_job_class(name)
    if defined is not None:
        return defined
    return (config or current_config()).jobs.resolve(name)

"""Statsd / DogStatsD job metrics: a built-in server middleware, idle until configured.

Until ``config.dogstatsd`` names a client factory or the ``statsd`` setting
is set (:mod:`wurk.metrics.statsd_client`) it only passes the job on, so
leaving it registered costs two look-ups per job. With a client, each
job sends the metric names Sidekiq Pro uses, so existing dashboards keep
working:

* ``jobs.count``: every execution;
* ``jobs.success`` / ``jobs.failure``: how it ended (an interrupted job is
  neither);
* ``jobs.perform``: its duration in milliseconds (a timing).

Clients that take tags (DogStatsD's ``increment(name, tags=[...])``) get
``worker:<class>`` and ``queue:<queue>``; plain statsd clients
(``incr`` / ``timing``) get the bare names. A client that raises is reported
through the error handlers and never fails the job.
"""

from __future__ import annotations

import time
from collections.abc import Awaitable, Callable
from typing import Any

from wurk.client.middleware import ServerMiddleware
from wurk.errors import Interrupted
from wurk.metrics.tracking import class_name
from wurk.server.retry import Skip

COUNT = "jobs.count"
SUCCESS = "jobs.success"
FAILURE = "jobs.failure"
PERFORM = "jobs.perform"


def increment(client: Any, metric: str, tags: list[str]) -> None:
    """Add one to ``metric``, with tags when the client supports them."""
    if hasattr(client, "increment"):
        client.increment(metric, tags=tags)
    else:
        client.incr(metric)


def timing(client: Any, metric: str, ms: float, tags: list[str]) -> None:
    """Record a duration in milliseconds, with tags when the client supports them."""
    if hasattr(client, "increment"):  # the DogStatsD-style API takes tags everywhere
        client.timing(metric, ms, tags=tags)
    else:
        client.timing(metric, ms)


def discard_after_fork(client: Any) -> None:
    """Let go of a statsd client a forked child inherited from its parent.

    The child builds its own from ``config.dogstatsd`` on next use. Only a
    DogStatsD client's ``close_socket`` is called, which closes the child's
    copy of the socket and sends nothing: a ``close``/``flush`` could send
    metrics the parent still buffers, and they would be counted twice. Any
    other client's socket is closed when the object is collected.
    """
    close_socket = getattr(client, "close_socket", None)
    if callable(close_socket):
        try:
            close_socket()
        except Exception:  # a socket already gone: nothing left to let go of
            pass


class Statsd(ServerMiddleware):
    """Sends ``jobs.*`` metrics for every job to ``config.statsd``, the client of
    ``config.dogstatsd`` or of the ``statsd`` setting."""

    stateless = True

    def call(self, job_instance: Any, job: dict[str, Any], queue: str, call_next: Callable[[], Any]) -> Any:
        config = self.wurk_config
        if config is None:
            return call_next()
        client = config.statsd
        if client is None:
            return call_next()
        started = time.monotonic()
        outcome: str | None = FAILURE
        try:
            result = call_next()
            outcome = SUCCESS
            return result
        except (Skip, Interrupted):
            outcome = None
            raise
        finally:
            send(config, client, job, queue, outcome, started)

    def call_async(
        self, job_instance: Any, job: dict[str, Any], queue: str, call_next: Callable[[], Awaitable[Any]]
    ) -> Awaitable[Any]:
        # Without a statsd client the rest of the chain's awaitable is handed
        # back as it is, with no coroutine of this middleware around it (see
        # Chain.invoke_async).
        config = self.wurk_config
        client = None if config is None else config.statsd
        if config is None or client is None:
            return call_next()
        return self._sent_async(config, client, job, queue, call_next)

    async def _sent_async(
        self, config: Any, client: Any, job: dict[str, Any], queue: str, call_next: Callable[[], Awaitable[Any]]
    ) -> Any:
        started = time.monotonic()
        outcome: str | None = FAILURE
        try:
            result = await call_next()
            outcome = SUCCESS
            return result
        except (Skip, Interrupted):
            outcome = None
            raise
        finally:
            send(config, client, job, queue, outcome, started)


def send(config: Any, client: Any, job: dict[str, Any], queue: str, outcome: str | None, started: float) -> None:
    """One job's counters and timing; a statsd error is reported, never the job's."""
    tags = [f"worker:{class_name(job)}", f"queue:{queue}"]
    ms = (time.monotonic() - started) * 1000.0
    try:
        increment(client, COUNT, tags)
        if outcome is not None:
            increment(client, outcome, tags)
        timing(client, PERFORM, ms, tags)
    except Exception as exc:
        config.handle_exception(exc, {"context": "statsd", "jid": job.get("jid")})

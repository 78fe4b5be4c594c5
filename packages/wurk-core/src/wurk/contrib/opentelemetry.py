"""OpenTelemetry tracing of every push and every run, across processes.

One call switches it on for a configuration::

    import wurk.contrib.opentelemetry

    wurk.contrib.opentelemetry.instrument()  # the current configuration

Only the OpenTelemetry *API* is needed (``pip install 'wurk-core[opentelemetry]'``);
the SDK, its exporters and its sampling are the application's to set up, as
for any instrumented library. This module imports OpenTelemetry only when
:func:`instrument` is called, so ``import wurk`` never does.

What it records, in the words of OpenTelemetry's messaging conventions:

* a push is a ``PRODUCER`` span named ``"<queue> send"``, a child of whatever
  span is current where the job was pushed (a web request's). The span's
  W3C trace context is written into the payload by the configured
  propagator, as the top-level fields ``traceparent`` and ``tracestate``
  (and ``baggage`` when there is some): the fields OpenTelemetry's Ruby
  instrumentation of Sidekiq reads and writes, so a trace crosses between a
  Ruby fleet and a Python one in either direction. Sidekiq itself reads
  neither field, and a worker that is not instrumented ignores them;
* a run is a ``CONSUMER`` span named ``"<queue> process"``. A job's first run
  is a child of its push span: one trace goes from the request through the
  push to the run, in another process or on another host. A retried run
  starts a trace of its own with a link to the push span, since a retry may
  come hours or days later and would stretch the request's trace over them;
* both carry ``messaging.system`` (``"sidekiq"``, the value the Ruby
  instrumentation uses, since the two fleets' spans describe the same jobs on
  the same Redis), ``messaging.operation.type`` (``send`` / ``process``),
  ``messaging.destination.name`` (the queue), ``messaging.message.id`` (the
  jid), ``messaging.sidekiq.job_class`` (the wire class, or the wrapped one),
  and a retried run ``messaging.sidekiq.retry_count`` (the payload's
  ``retry_count``: 0 on the first retry);
* a run that raises records the exception on its span, with the status
  ``ERROR`` and ``error.type``; a run given back at a shutdown or
  interruption, or acknowledged by a middleware (``Skip``), is not an error.

A payload that already carries a ``traceparent`` is a job coming back (a
retry, a scheduled job coming due, a job a person retried from the
dashboard): its push is not traced again and its context is kept, so every
run of a job points at the one push that made it.

Without an SDK (no tracer provider set) nothing is recorded and nothing is
written into payloads; the two middleware then cost a dictionary look-up and
a clock read per job (``bench/otel_overhead.py`` measures it). A tracer
provider set after :func:`instrument` is picked up within a second.
"""

from __future__ import annotations

import time
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Any

from wurk._version import __version__
from wurk.client.middleware import ClientMiddleware, ServerMiddleware
from wurk.errors import Interrupted
from wurk.server.retry import Skip

if TYPE_CHECKING:
    from wurk.config.capsule import Capsule
    from wurk.config.configuration import Config
    from wurk.redis.connection import RedisPool

#: The ``messaging.system`` of every span: what the Ruby instrumentation says.
SYSTEM = "sidekiq"
#: How often, at most, an idle tracing looks again for a tracer provider.
LOOK_INTERVAL = 1.0

_monotonic = time.monotonic
_INSTALL_HINT = "wurk.contrib.opentelemetry needs the OpenTelemetry API: pip install 'wurk-core[opentelemetry]'"


class Tracing:
    """The tracer of one tracer provider (the global one unless given), and
    whether it records anything.

    A provider that records is a provider for good (OpenTelemetry sets the
    global one once per process), so once one is found the answer is kept;
    until then the global provider is looked up at most every
    :data:`LOOK_INTERVAL`, which keeps a job's cost to a clock read while no
    SDK is configured.
    """

    def __init__(self, provider: Any = None) -> None:
        self.provider = provider
        self.tracer: Any = None
        self._next_look = 0.0

    def active(self) -> bool:
        """Whether spans are recorded; builds the tracer the first time they are."""
        if self.tracer is not None:
            return True
        now = _monotonic()
        if now < self._next_look:
            return False
        self._next_look = now + LOOK_INTERVAL
        from opentelemetry import trace

        provider = self.provider if self.provider is not None else trace.get_tracer_provider()
        if isinstance(provider, trace.ProxyTracerProvider | trace.NoOpTracerProvider):
            return False
        self.tracer = provider.get_tracer("wurk", __version__)
        return True


def instrument(config: Config | Capsule | None = None, *, tracer_provider: Any = None) -> None:
    """Trace every push and every run of ``config`` (the current configuration
    by default: the worker's in a worker, the process default elsewhere).

    Call it where the application configures Wurk, in every process that
    pushes and every process that runs jobs, before the worker starts.
    ``tracer_provider`` is an SDK ``TracerProvider`` to use instead of the
    global one. Calling it again replaces the provider; it never installs
    the middleware twice.
    """
    try:
        from opentelemetry import trace
    except ImportError as exc:
        raise ImportError(_INSTALL_HINT) from exc
    if tracer_provider is not None and not isinstance(tracer_provider, trace.TracerProvider):
        raise TypeError(f"tracer_provider must be an OpenTelemetry TracerProvider, got {tracer_provider!r}")
    from wurk.config.defaults import current_config

    target = current_config() if config is None else config
    if not hasattr(target, "client_middleware") or not hasattr(target, "server_middleware"):
        raise TypeError(f"instrument() takes a wurk.Config (or a capsule), got {target!r}")
    uninstrument(target)
    # Each call's middleware are subclasses holding its tracing as a class
    # attribute: the chains build an instance per job, and one without an
    # ``__init__`` of its own is the cheapest to build.
    tracing = Tracing(tracer_provider)
    client = type("TracingClient", (TracingClient,), {"tracing": tracing, "__module__": __name__})
    server = type("TracingServer", (TracingServer,), {"tracing": tracing, "__module__": __name__})
    target.client_middleware.add(client)
    from wurk.server.builtin_middleware import InterruptHandler

    target.server_middleware.insert_after(InterruptHandler, server)


def uninstrument(config: Config | Capsule | None = None) -> None:
    """Take the tracing middleware off ``config`` (the current configuration by default)."""
    from wurk.config.defaults import current_config

    target = current_config() if config is None else config
    for chain, base in ((target.client_middleware, TracingClient), (target.server_middleware, TracingServer)):
        for entry in chain:
            if issubclass(entry.klass, base):
                chain.remove(entry.klass)


def instrumented(config: Config | Capsule | None = None) -> Tracing | None:
    """The tracing ``config`` (the current configuration by default) was
    instrumented with, or ``None``."""
    from wurk.config.defaults import current_config

    target = current_config() if config is None else config
    for entry in target.client_middleware:
        if issubclass(entry.klass, TracingClient):
            return entry.klass.tracing
    return None


def attributes(job: dict[str, Any], queue: str, operation: str) -> dict[str, Any]:
    """The messaging attributes of a span about ``job`` on ``queue``."""
    found: dict[str, Any] = {
        "messaging.system": SYSTEM,
        "messaging.operation.type": operation,
        "messaging.operation.name": operation,
        "messaging.destination.name": queue,
    }
    jid = job.get("jid")
    if isinstance(jid, str):
        found["messaging.message.id"] = jid
    job_class = job.get("wrapped") or job.get("class")
    if job_class is not None:
        found["messaging.sidekiq.job_class"] = job_class if isinstance(job_class, str) else str(job_class)
    return found


class TracingClient(ClientMiddleware):
    """A ``PRODUCER`` span around the push, whose context the payload carries."""

    stateless = True

    tracing: Tracing = Tracing()

    def call(
        self, job_class: Any, job: dict[str, Any], queue: str, redis_pool: RedisPool, call_next: Callable[[], Any]
    ) -> Any:
        tracing = self.tracing
        if "traceparent" in job or (tracing.tracer is None and not tracing.active()):
            return call_next()
        from opentelemetry import propagate
        from opentelemetry.trace import SpanKind

        with tracing.tracer.start_as_current_span(
            f"{queue} send", kind=SpanKind.PRODUCER, attributes=attributes(job, queue, "send")
        ):
            propagate.inject(job)
            return call_next()


class TracingServer(ServerMiddleware):
    """A ``CONSUMER`` span around the run: the push's child, or linked to it
    on a retry."""

    stateless = True

    tracing: Tracing = Tracing()

    def call(self, job_instance: Any, job: dict[str, Any], queue: str, call_next: Callable[[], Any]) -> Any:
        tracing = self.tracing
        if tracing.tracer is None and not tracing.active():
            return call_next()
        with self._span(job, queue) as span:
            try:
                return call_next()
            except (Skip, Interrupted):
                raise  # given back or taken care of: not a failure of the job
            except Exception as exc:
                failed(span, exc)
                raise

    async def call_async(
        self, job_instance: Any, job: dict[str, Any], queue: str, call_next: Callable[[], Awaitable[Any]]
    ) -> Any:
        tracing = self.tracing
        if tracing.tracer is None and not tracing.active():
            return await call_next()
        with self._span(job, queue) as span:
            try:
                return await call_next()
            except (Skip, Interrupted):
                raise
            except Exception as exc:
                failed(span, exc)
                raise

    def _span(self, job: dict[str, Any], queue: str) -> Any:
        """The ``CONSUMER`` span's context manager: the push's child, or on a
        retry a root linked to the push."""
        from opentelemetry import propagate, trace
        from opentelemetry.trace import Link, SpanKind

        found = attributes(job, queue, "process")
        retry_count = job.get("retry_count")
        parent = None
        links = []
        if retry_count is not None:
            found["messaging.sidekiq.retry_count"] = retry_count
        if "traceparent" in job:
            parent = propagate.extract(job)
            if retry_count is not None:
                pushed = trace.get_current_span(parent).get_span_context()
                if pushed.is_valid:
                    links.append(Link(pushed))
                parent = trace.set_span_in_context(trace.INVALID_SPAN, parent)  # a root, keeping the baggage
        assert self.tracing.tracer is not None
        return self.tracing.tracer.start_as_current_span(
            f"{queue} process",
            context=parent,
            kind=SpanKind.CONSUMER,
            attributes=found,
            links=links,
            record_exception=False,
            set_status_on_exception=False,
        )


def failed(span: Any, exc: Exception) -> None:
    """Record the job's error on its span."""
    from opentelemetry.trace import Status, StatusCode

    span.record_exception(exc)
    span.set_attribute("error.type", f"{type(exc).__module__}.{type(exc).__qualname__}")
    span.set_status(Status(StatusCode.ERROR, f"{type(exc).__name__}: {exc}"))

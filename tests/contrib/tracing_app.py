"""The application the OpenTelemetry tests run in a real ``wurk`` worker.

The worker sets up the OpenTelemetry SDK as an application would, with the
SDK's console exporter writing each finished span as one JSON line to the
file named by ``TEST_SPANS_FILE``.
"""

from __future__ import annotations

import asyncio
import os

import wurk
import wurk.contrib.opentelemetry


@wurk.configure_server
def tracing(config):
    from opentelemetry import trace
    from opentelemetry.sdk.resources import Resource
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import ConsoleSpanExporter, SimpleSpanProcessor

    config["poll_interval_average"] = 0.2
    spans = open(os.environ["TEST_SPANS_FILE"], "a", encoding="utf-8")  # noqa: SIM115 - open for the process's life
    exporter = ConsoleSpanExporter(out=spans, formatter=lambda span: span.to_json(indent=None) + "\n")
    provider = TracerProvider(resource=Resource.create({"service.name": "worker"}))
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    trace.set_tracer_provider(provider)
    wurk.contrib.opentelemetry.instrument(config)


class Greet(wurk.Job):
    def perform(self, name):
        Farewell.perform_async(name)  # pushed from inside the run: a span of the same trace
        return f"hello {name}"


class Farewell(wurk.Job):
    """An ``async def perform``: its run is traced on the event loop."""

    async def perform(self, name):
        await asyncio.sleep(0)
        return f"bye {name}"


class Flaky(wurk.Job, retry=1):
    """Fails its first run and succeeds on the retry, which comes at once."""

    @classmethod
    def retry_in(cls, count, exc, job):
        return 0

    def perform(self, name):
        if wurk.current.current_job.get().get("retry_count") is None:
            raise RuntimeError(f"first run of {name} fails")

"""OpenTelemetry across processes: a push traced here, its run traced by a real worker."""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from opentelemetry import trace
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

import wurk.contrib.opentelemetry as otel
from tests.contrib import tracing_app
from tests.contrib.tracing_app import Flaky, Greet
from tests.helpers import ROOT, WorkerPool, wait_for
from wurk.contrib.opentelemetry import TracingClient, TracingServer


@pytest.fixture
def exporter(config) -> Iterator[InMemorySpanExporter]:
    """The test process traces its pushes through an SDK provider of its own."""
    spans = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(spans))
    otel.instrument(config, tracer_provider=provider)
    yield spans
    otel.uninstrument(config)


def worker_spans(path: Path) -> list[dict]:
    if not path.exists():
        return []
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]


def hex_id(value: int, width: int) -> str:
    return f"0x{value:0{width}x}"


def test_one_trace_goes_from_the_push_here_to_the_run_in_a_worker(config, exporter, redis_url, tmp_path, redis):
    spans_file = tmp_path / "spans.jsonl"
    workers = WorkerPool(redis_url, tmp_path, tracing_app.__name__, {"TEST_SPANS_FILE": str(spans_file)})
    request_tracer = exporter_provider_tracer(config)
    with request_tracer.start_as_current_span("GET /greet") as request:
        greet_jid = Greet.perform_async("ada")
        flaky_jid = Flaky.perform_async("bob")
    pushed = {
        span.attributes["messaging.message.id"]: span
        for span in exporter.get_finished_spans()
        if span.kind is trace.SpanKind.PRODUCER
    }
    payload = json.loads(redis.lrange("queue:default", 0, -1)[-1])
    assert payload["traceparent"].startswith(f"00-{pushed[greet_jid].context.trace_id:032x}-")

    try:
        workers.start("-c", "1", "-q", "default")

        def processed() -> list[dict]:
            return [span for span in worker_spans(spans_file) if span["kind"] == "SpanKind.CONSUMER"]

        wait_for(lambda: len(processed()) == 4, timeout=60)
    finally:
        workers.stop_all()
    spans = worker_spans(spans_file)
    runs = {}
    for span in spans:
        if span["kind"] == "SpanKind.CONSUMER":
            runs.setdefault(span["attributes"]["messaging.message.id"], []).append(span)

    request_trace = hex_id(request.get_span_context().trace_id, 32)
    greet_push = pushed[greet_jid]
    assert greet_push.name == "default send"
    assert greet_push.parent.span_id == request.get_span_context().span_id
    assert greet_push.attributes["messaging.system"] == "sidekiq"
    assert greet_push.attributes["messaging.destination.name"] == "default"
    assert greet_push.attributes["messaging.sidekiq.job_class"] == "tests.contrib.tracing_app.Greet"

    # The run in the worker: the same trace, a child of the push span made here.
    [greet_run] = runs[greet_jid]
    assert greet_run["name"] == "default process"
    assert greet_run["context"]["trace_id"] == request_trace
    assert greet_run["parent_id"] == hex_id(greet_push.context.span_id, 16)
    assert greet_run["attributes"]["messaging.operation.type"] == "process"
    assert greet_run["attributes"]["messaging.message.id"] == greet_jid
    assert greet_run["status"]["status_code"] == "UNSET"
    assert greet_run["resource"]["attributes"]["service.name"] == "worker"

    # The job Greet pushed from inside its run: its push and its run (an
    # async job, on the event loop) in the same trace.
    [nested_push] = [span for span in spans if span["kind"] == "SpanKind.PRODUCER"]
    assert nested_push["parent_id"] == greet_run["context"]["span_id"]
    farewell_jid = nested_push["attributes"]["messaging.message.id"]
    [farewell_run] = runs[farewell_jid]
    assert farewell_run["context"]["trace_id"] == request_trace
    assert farewell_run["parent_id"] == nested_push["context"]["span_id"]

    # The failing first run records its exception; the retry is a trace of its own, linked to the push.
    first, retry = sorted(runs[flaky_jid], key=lambda span: span["start_time"])
    flaky_push = pushed[flaky_jid]
    assert first["context"]["trace_id"] == request_trace
    assert first["parent_id"] == hex_id(flaky_push.context.span_id, 16)
    assert first["status"] == {"status_code": "ERROR", "description": "RuntimeError: first run of bob fails"}
    assert first["attributes"]["error.type"] == "builtins.RuntimeError"
    [event] = first["events"]
    assert event["name"] == "exception"
    assert event["attributes"]["exception.message"] == "first run of bob fails"
    assert "messaging.sidekiq.retry_count" not in first["attributes"]

    assert retry["parent_id"] is None
    assert retry["context"]["trace_id"] != request_trace
    assert retry["attributes"]["messaging.sidekiq.retry_count"] == 0
    assert retry["status"]["status_code"] == "UNSET"
    [link] = retry["links"]
    assert link["context"]["trace_id"] == request_trace
    assert link["context"]["span_id"] == hex_id(flaky_push.context.span_id, 16)
    # The retry went back through the client chain without a second push span.
    assert len(pushed) == 2
    assert len([span for span in spans if span["kind"] == "SpanKind.PRODUCER"]) == 1


def exporter_provider_tracer(config):
    """The tracer of the provider the fixture instrumented this configuration with."""
    return otel.instrumented(config).provider.get_tracer("tests")


def test_without_an_sdk_nothing_is_written_into_the_payload(config, redis):
    otel.instrument(config)
    try:
        tracing = otel.instrumented(config)
        assert tracing is not None
        assert not tracing.active()  # no SDK in this process's global provider
        assert [
            entry.klass.tracing for entry in config.server_middleware if issubclass(entry.klass, TracingServer)
        ] == [tracing]
        Greet.perform_async("ada")
        payload = json.loads(redis.lrange("queue:default", 0, -1)[0])
        assert "traceparent" not in payload
        assert config.server_middleware.invoke(None, payload, "default", final=lambda: "ran") == "ran"
    finally:
        otel.uninstrument(config)
    assert otel.instrumented(config) is None
    assert not any(issubclass(entry.klass, TracingClient) for entry in config.client_middleware)


def test_bad_arguments_are_refused(config):
    with pytest.raises(TypeError, match="tracer_provider must be an OpenTelemetry TracerProvider"):
        otel.instrument(config, tracer_provider="jaeger")
    with pytest.raises(TypeError, match=r"instrument\(\) takes a wurk.Config"):
        otel.instrument("config")  # type: ignore[arg-type]


def test_importing_wurk_imports_no_opentelemetry_nor_statsd():
    """Wurk's own imports bring in neither; redis-py may import OpenTelemetry
    for its own instrumentation, so what it imports alone is the baseline."""
    code = (
        "import sys, redis, redis.asyncio\n"
        "def loaded():\n"
        "    return {m for m in sys.modules if m.split('.')[0] in ('opentelemetry', 'statsd', 'datadog')}\n"
        "before = loaded()\n"
        "import wurk, wurk.metrics\n"
        "wurk.default_config().client_middleware\n"
        "print(sorted(loaded() - before), 'wurk.contrib.opentelemetry' in sys.modules)\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, cwd=ROOT)
    assert out.stdout.strip() == "[] False"

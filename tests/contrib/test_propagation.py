"""Context variables carried from the pushing code into jobs run by a real worker."""

from __future__ import annotations

import contextvars
import json
from collections.abc import Iterator

import pytest

import wurk
from tests.contrib import context_app
from tests.contrib.context_app import Remember, RememberAsync, locale, request_id, tenant
from tests.helpers import WorkerPool, wait_for
from wurk.client.payload import ComplexArgumentError
from wurk.config.forking import live_configs
from wurk.server.builtin_middleware import Expiry, InterruptHandler
from wurk.server.propagation import LoadContext, SaveContext, forget


@pytest.fixture
def carried(config) -> Iterator[wurk.Config]:
    """This test's configuration carrying the app's three variables; the
    process-wide declarations are forgotten after it, and the middleware taken
    off every configuration they reached."""
    wurk.propagate(tenant)
    wurk.propagate(request_id)
    wurk.propagate(locale, key="locale")
    try:
        yield config
    finally:
        for key in ("tenant", "request_id", "locale"):
            forget(key)
        for live in live_configs():
            if live.plugins_loaded:
                live.client_middleware.remove(SaveContext)
                live.server_middleware.remove(LoadContext)


@pytest.fixture
def workers(config, redis_url, tmp_path) -> Iterator[WorkerPool]:
    pool = WorkerPool(redis_url, tmp_path, context_app.__name__, {"TEST_POLL_INTERVAL": "0.2"})
    yield pool
    pool.stop_all()


def seen(redis) -> dict[str, dict]:
    return {entry["label"]: entry for entry in (json.loads(raw) for raw in redis.lrange("seen", 0, -1))}


def test_a_worker_runs_each_job_with_the_values_its_push_carried(carried, workers, redis):
    def push_from_a_request() -> None:
        tenant.set("acme")
        request_id.set("req-1")
        locale.set("fr")
        Remember.perform_async("first", True)
        RememberAsync.perform_async("async")

    contextvars.copy_context().run(push_from_a_request)
    # Pushed from a context that sets nothing, so it carries nothing; it runs
    # after the first on the same single thread, which must not leak it.
    contextvars.Context().run(Remember.perform_async, "bare")
    contextvars.Context().run(Remember.perform_async, "end")
    workers.start("-c", "1", "-q", "default")
    wait_for(lambda: {"end", "first/child"} <= set(seen(redis)), timeout=30)

    runs = seen(redis)
    carried_fields = ["locale", "request_id", "tenant"]
    assert runs["first"] == {
        "label": "first",
        "tenant": "acme",
        "request_id": "req-1",
        "locale": "fr",
        "fields": carried_fields,
    }
    # Pushed from inside the first job: the worker's client chain carried on
    # what its server chain had set.
    assert runs["first/child"] == {**runs["first"], "label": "first/child"}
    assert runs["async"] == {**runs["first"], "label": "async"}
    assert runs["bare"] == {"label": "bare", "tenant": "<unset>", "request_id": "<unset>", "locale": "en", "fields": []}


def test_only_set_variables_are_written_and_a_payload_value_wins(carried, redis):
    with wurk.testing.fake():
        Remember.perform_async("plain")
        tenant_token = tenant.set("acme")
        try:
            Remember.set(queue="default").perform_async("again")
            wurk.Client().push({"class": Remember, "args": ["given"], "tenant": "globex"})
        finally:
            tenant.reset(tenant_token)
        plain, again, given = Remember.jobs
    assert "tenant" not in plain
    assert "locale" not in plain
    assert again["tenant"] == "acme"
    assert "locale" not in again  # a variable's default is not a value set by the pushing code
    assert given["tenant"] == "globex"


def test_a_value_json_cannot_carry_is_refused_at_the_push(carried, redis):
    def push() -> None:
        tenant.set(object())
        Remember.perform_async("never")

    with pytest.raises(ComplexArgumentError, match=r"tenant \(field 'tenant'\) = <object object"):
        contextvars.copy_context().run(push)
    assert redis.llen("queue:default") == 0


def test_the_server_middleware_resets_the_variables_after_a_failing_job(carried):
    chain = wurk.Chain(carried)
    chain.add(LoadContext)

    def fail() -> None:
        assert tenant.get() == "acme"
        raise ValueError("boom")

    with pytest.raises(ValueError, match="boom"):
        chain.invoke(None, {"tenant": "acme"}, "default", final=fail)
    assert tenant.get("<unset>") == "<unset>"


def test_bad_declarations_are_refused_naming_the_problem(carried):
    with pytest.raises(TypeError, match=r"takes a contextvars\.ContextVar"):
        wurk.propagate("tenant")  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="'jid' is a field Wurk and Sidekiq read"):
        wurk.propagate(contextvars.ContextVar("jid"))
    with pytest.raises(ValueError, match="the field 'tenant' already carries the variable 'tenant'"):
        wurk.propagate(contextvars.ContextVar("tenant"))
    with pytest.raises(ValueError, match="'tenant' is already carried under another field"):
        wurk.propagate(tenant, key="org")
    wurk.propagate(tenant)  # the same declaration again: nothing changes
    assert SaveContext in carried.client_middleware


def test_nothing_declared_means_nothing_installed(config):
    assert SaveContext not in config.client_middleware
    assert LoadContext not in config.server_middleware


def test_a_declaration_reaches_configurations_that_load_their_plugins_later(carried):
    later = wurk.Config()
    assert not later.plugins_loaded
    assert SaveContext in later.client_middleware
    server = [entry.klass for entry in later.server_middleware]
    assert server[0] is InterruptHandler
    assert server.index(LoadContext) < server.index(Expiry)  # inside the built-ins, around the rest

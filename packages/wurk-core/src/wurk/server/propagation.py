"""Context variables carried from the code that pushes a job into the job's run.

A web request knows things a job it enqueues should know too: the tenant, the
request id, the user's locale. In Python such state lives in
:class:`contextvars.ContextVar` objects, so :func:`propagate` names the ones
to carry, each under a payload field of its own::

    tenant: ContextVar[str] = ContextVar("tenant")
    wurk.propagate(tenant)                      # the field "tenant"
    wurk.propagate(locale, key="locale")        # Sidekiq's I18n field

Two middleware do the carrying. :class:`SaveContext`, on the client chain,
writes each variable that is set in the pushing context into the payload
(``setdefault``: a value already in the payload wins, so a retry or a
scheduled job coming due keeps the value of its first push). Only set
variables are written, so a process that sets none adds no field and the
payload keeps Sidekiq's shape. :class:`LoadContext`, on the server chain,
sets each carried variable for the run of ``perform`` and resets it after,
whatever the outcome: a processor thread runs one job after another, and
the next job must not see this one's tenant. A job pushed from inside a job
goes through the worker's client chain, which reads the values the server
chain has just set: nested pushes carry them too.

The declarations are process-wide, like the variables themselves; the two
middleware are installed in a configuration only once something is declared,
so that a process that carries nothing pays nothing per push and keeps the
scheduler's single-script promotion (which needs an empty client chain).
Values must be JSON-native (``None``, booleans, numbers, strings, lists,
string-keyed dicts of those): a value that is not is refused at the push,
naming the variable, since the job would otherwise run with something other
than what the pushing code held.
"""

from __future__ import annotations

import threading
from collections.abc import Awaitable, Callable
from contextvars import ContextVar, Token
from typing import TYPE_CHECKING, Any, get_type_hints

from wurk.client.middleware import ClientMiddleware, ServerMiddleware
from wurk.client.payload import ComplexArgumentError, find_complex, is_native
from wurk.types import Payload

if TYPE_CHECKING:
    from wurk.client.middleware import Chain
    from wurk.config.capsule import Capsule
    from wurk.config.configuration import Config
    from wurk.redis.connection import RedisPool

#: Fields a carried variable may not take: the ones Sidekiq and Wurk read
#: (``class``, ``jid``, ``retry_count``...), and the trace context that
#: :mod:`wurk.contrib.opentelemetry` writes.
RESERVED = frozenset(get_type_hints(Payload)) | {"traceparent", "tracestate", "baggage", "error_details"}

_declared: dict[str, ContextVar[Any]] = {}
_lock = threading.Lock()
_UNSET: Any = object()


def propagate(var: ContextVar[Any], key: str | None = None, *, config: Config | Capsule | None = None) -> None:
    """Carry ``var`` from every push in this process into the job's run,
    under the payload field ``key`` (the variable's name by default).

    Call it once at import or boot time, before the worker starts, in every
    process that pushes and every process that runs the jobs (the
    application's module is imported by both). Idempotent for the same
    variable and key. Every configuration of the process carries the
    variable: one whose plugins already loaded gets the middleware at once,
    any other when it loads them. ``config`` may name a capsule (or any
    configuration) to install into as well.
    """
    if not isinstance(var, ContextVar):
        raise TypeError(f"wurk.propagate takes a contextvars.ContextVar, got {var!r}")
    name = var.name if key is None else key
    if not isinstance(name, str) or not name:
        raise ValueError(f"wurk.propagate: the payload field must be a non-empty string, got {name!r}")
    if name in RESERVED:
        raise ValueError(
            f"wurk.propagate: {name!r} is a field Wurk and Sidekiq read; carry {var.name!r} under another key"
        )
    with _lock:
        current = _declared.get(name)
        if current is not None and current is not var:
            raise ValueError(f"wurk.propagate: the field {name!r} already carries the variable {current.name!r}")
        if any(other is var and field != name for field, other in _declared.items()):
            raise ValueError(f"wurk.propagate: {var.name!r} is already carried under another field")
        _declared[name] = var
    from wurk.config.forking import live_configs

    targets: list[Config | Capsule] = [live for live in live_configs() if live.plugins_loaded]
    if config is not None:
        targets.append(config)
    for target in targets:
        install(target.client_middleware, target.server_middleware)


def propagated() -> dict[str, ContextVar[Any]]:
    """The declared fields and the variable each one carries."""
    with _lock:
        return dict(_declared)


def forget(key: str) -> None:
    """Stop carrying the field ``key`` (for tests); the middleware stays and
    carries whatever else is declared."""
    with _lock:
        _declared.pop(key, None)


def install(client: Chain, server: Chain) -> None:
    """Put the two middleware on these chains once anything is declared:
    saving innermost on the client chain, so that it records what reaches
    Redis after the other middleware had their say; loading just inside the
    built-ins on the server chain, so that the other middleware see the
    values as well as ``perform`` does."""
    if not _declared:
        return
    if not client.exists(SaveContext):
        client.add(SaveContext)
    if not server.exists(LoadContext):
        from wurk.server.builtin_middleware import InterruptHandler

        server.insert_after(InterruptHandler, LoadContext)


class SaveContext(ClientMiddleware):
    """Writes each carried variable that is set here into the payload."""

    stateless = True

    def call(
        self, job_class: Any, job: dict[str, Any], queue: str, redis_pool: RedisPool, call_next: Callable[[], Any]
    ) -> Any:
        for key, var in propagated().items():
            value = var.get(_UNSET)
            if value is _UNSET or key in job:
                continue
            if not is_native(value):
                where = find_complex(value, path=f"{var.name} (field {key!r})") or f"{var.name} = {value!r}"
                raise ComplexArgumentError(
                    f"the context variable {where} cannot be carried into a job: only JSON-native values "
                    "(None, bool, int, float, str, lists and string-keyed dicts of them) survive the payload"
                )
            job[key] = value
        return call_next()


class LoadContext(ServerMiddleware):
    """Sets each carried variable the payload holds for the run, and resets it after."""

    stateless = True

    def call(self, job_instance: Any, job: dict[str, Any], queue: str, call_next: Callable[[], Any]) -> Any:
        tokens = carry_in(job)
        try:
            return call_next()
        finally:
            carry_out(tokens)

    async def call_async(
        self, job_instance: Any, job: dict[str, Any], queue: str, call_next: Callable[[], Awaitable[Any]]
    ) -> Any:
        tokens = carry_in(job)
        try:
            return await call_next()
        finally:
            carry_out(tokens)


def carry_in(job: dict[str, Any]) -> list[tuple[ContextVar[Any], Token[Any]]]:
    """Set each carried variable the payload holds; the tokens that undo it."""
    return [(var, var.set(job[key])) for key, var in propagated().items() if key in job]


def carry_out(tokens: list[tuple[ContextVar[Any], Token[Any]]]) -> None:
    for var, token in reversed(tokens):
        var.reset(token)

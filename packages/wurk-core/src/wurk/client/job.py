"""Jobs: ``wurk.Job`` subclasses and the ``@wurk.job`` decorator.

::

    class HardJob(wurk.Job, queue="critical", retry=5):
        def perform(self, user_id, plan):
            ...

    HardJob.perform_async(42, "pro")
    HardJob.set(queue="low").perform_in(timedelta(minutes=5), 42, "pro")

    @wurk.job(queue="mail")
    async def send_welcome(user_id):
        ...

    send_welcome.perform_async(42)

Options are Sidekiq's ``sidekiq_options`` keys, given as class keywords; a
subclass inherits and overrides its parent's. A job's wire ``class`` is its
importable dotted path (``"app.jobs.HardJob"``): a worker finds it among the
jobs its application defined, or imports it from the application's own
packages only (see :mod:`wurk.client.registry`).
"""

from __future__ import annotations

import asyncio
import functools
import inspect
from collections.abc import Callable, Iterable, Mapping
from typing import TYPE_CHECKING, Any, ClassVar, Protocol

from wurk import current
from wurk.client import interception
from wurk.client import payload as wire
from wurk.client.push import Client
from wurk.config.defaults import current_capsule, current_config
from wurk.errors import ConfigurationError

if TYPE_CHECKING:
    from wurk.config.capsule import Capsule
    from wurk.config.configuration import Config


def _check_options(owner: str, options: Mapping[str, Any]) -> dict[str, Any]:
    """Catch the option mistakes that would otherwise surface in a worker."""
    try:
        return _checked(owner, options)
    except wire.InvalidJobError as exc:
        raise ConfigurationError(str(exc)) from None


def _checked(owner: str, options: Mapping[str, Any]) -> dict[str, Any]:
    checked = dict(options)
    retry = checked.get("retry")
    if "retry" in checked and not (isinstance(retry, bool) or (isinstance(retry, int) and retry >= 0)):
        raise ConfigurationError(
            f"{owner}: retry must be True, False or a whole number >= 0, got {wire.short_repr(retry)}"
        )
    if "queue" in checked:
        checked["queue"] = wire.validate_queue(checked["queue"], owner)
    if "retry_queue" in checked:
        wire.validate_queue(checked["retry_queue"], owner)
    backtrace = checked.get("backtrace")
    if "backtrace" in checked and not (isinstance(backtrace, bool) or (isinstance(backtrace, int) and backtrace > 0)):
        raise ConfigurationError(
            f"{owner}: backtrace must be True, False or a line count > 0, got {wire.short_repr(backtrace)}"
        )
    if "dead" in checked and not isinstance(checked["dead"], bool):
        raise ConfigurationError(f"{owner}: dead must be True or False, got {wire.short_repr(checked['dead'])}")
    tags = checked.get("tags")
    if "tags" in checked and (not isinstance(tags, list | tuple) or not all(isinstance(t, str) for t in tags)):
        raise ConfigurationError(f"{owner}: tags must be a list of strings, got {wire.short_repr(tags)}")
    for key in ("retry_for", "expires_in"):
        if checked.get(key) is not None and wire.to_seconds(checked[key], f"{owner}: {key}") <= 0:
            raise ConfigurationError(f"{owner}: {key} must be a positive duration, got {wire.short_repr(checked[key])}")
    return checked


def _run(result: Any) -> Any:
    """Finish an ``async def perform`` when called outside a worker.

    With no event loop running in this thread, the coroutine runs on a fresh
    one. Inside a running loop (an async test, or an async job that pushes
    another job inline) the caller needs the result now and cannot await, so
    the coroutine runs on a private loop in a helper thread, in a copy of this
    context (which carries the testing mode of a ``with`` block).
    """
    if not inspect.isawaitable(result):
        return result
    import contextvars
    import threading

    try:
        asyncio.get_running_loop()
    except RuntimeError:
        return asyncio.run(_await(result))
    context = contextvars.copy_context()
    outcome: dict[str, Any] = {}

    def finish() -> None:
        try:
            outcome["value"] = context.run(asyncio.run, _await(result))
        except BaseException as exc:  # handed to the caller's thread below
            outcome["error"] = exc

    helper = threading.Thread(target=finish, name="wurk-inline-async")
    helper.start()
    helper.join()
    if "error" in outcome:
        raise outcome["error"]
    return outcome["value"]


async def _await(awaitable: Any) -> Any:
    return await awaitable


class Pusher(Protocol):
    """What a push goes through: the plain :class:`~wurk.client.push.Client`, or
    the replacement a configuration registers as ``client_class``."""

    def push(self, item: Mapping[str, Any]) -> str | None: ...


class Setter:
    """Per-call option overrides: ``MyJob.set(queue="low").perform_async(...)``.

    ``wait`` (seconds or timedelta) and ``wait_until`` (datetime or epoch)
    schedule the job like ``perform_in`` / ``perform_at``.
    """

    def __init__(self, job_class: type[Job], options: Mapping[str, Any]) -> None:
        options = dict(options)
        self._at: float | None = None
        self._scheduled = False
        if "wait" in options:
            self._scheduled = True
            self._at = wire.schedule_at(options.pop("wait"))
        if "wait_until" in options:
            self._scheduled = True
            self._at = wire.schedule_at(options.pop("wait_until"))
        self.job_class = job_class
        self._client_class = options.pop("client_class", None)
        self.options = _check_options(job_class.__qualname__, options) if options else {}

    def set(self, **options: Any) -> Setter:
        return Setter(self.job_class, {**self.options, **options})

    def _item(self, args: Iterable[Any], at: float | None = None) -> dict[str, Any]:
        item: dict[str, Any] = {**self.options, "args": list(args), "class": self.job_class}
        if at is not None:
            item["at"] = at
        return item

    def _client(self) -> Pusher:
        if self._client_class is not None:
            client: Pusher = self._client_class()
            return client
        return self.job_class.build_client()

    def perform_async(self, *args: Any) -> str | None:
        return self._client().push(self._item(args, self._at if self._scheduled else None))

    def perform_in(self, interval: Any, *args: Any) -> str | None:
        return self._client().push(self._item(args, wire.schedule_at(interval)))

    perform_at = perform_in

    def _push_class_first(self, at: float | None, args: Iterable[Any]) -> str | None:
        """The class-level ``perform_in`` / ``perform_at``: Sidekiq builds that
        item with ``class`` before ``args``, where every path through ``set``
        (``.set(...).perform_in``, ``wait``) has ``args`` first; the payload's
        key order follows."""
        item: dict[str, Any] = {**self.options, "class": self.job_class, "args": list(args)}
        if at is not None:
            item["at"] = at
        return self._client().push(item)

    def perform_bulk(self, args_list: Iterable[Iterable[Any]], *, batch_size: int | None = None) -> list[str | None]:
        args = [list(a) if isinstance(a, list | tuple) else a for a in args_list]
        item: dict[str, Any] = {**self.options, "class": self.job_class, "args": args}
        if self._at is not None:
            item["at"] = self._at
        if batch_size is not None:
            item["batch_size"] = batch_size
        return Client(current_config()).push_bulk(item)  # never deferred to a transaction

    def perform_inline(self, *args: Any) -> Any:
        """Run now, in this thread, through the real client and server chains."""
        client: Any = self._client()  # the plain client, or a replacement built on it
        normed = client.normalize_item(self._item(args))
        pushed = client._through_chain(normed, client._pool_for(normed))
        if pushed is None:
            return None
        return interception.testing_helpers().run_inline(self.job_class, pushed, client.config.server_middleware)

    perform_sync = perform_inline


class Job:
    """Base class of a job. Override :meth:`perform` (plain or ``async def``)."""

    #: Options declared by this class and its parents (not the global defaults).
    wurk_options: ClassVar[dict[str, Any]] = {}
    #: The name written as the payload's ``class``; defaults to the dotted path.
    wire_name: ClassVar[str | None] = None

    jid: str | None = None

    def __init_subclass__(cls, **options: Any) -> None:
        super().__init_subclass__()
        if "wire_name" not in cls.__dict__:
            cls.wire_name = None
        merged = {**cls.wurk_options, **_check_options(cls.__qualname__, options)}
        cls.wurk_options = merged

    def perform(self, *args: Any) -> Any:
        raise NotImplementedError(f"{type(self).__qualname__} must define perform()")

    @property
    def config(self) -> Config:
        """The configuration running this job: its worker's in a worker, the
        one of the chain in an inline run, the process default outside both
        (a plain ``MyJob().perform()``). Read and write Redis through it
        (``self.config.redis_pool``), not through the process default, so a
        job run by a worker on another configuration stays on its Redis."""
        return current_config()

    @property
    def capsule(self) -> Capsule | None:
        """The capsule whose processor runs this job; ``None`` outside a worker."""
        return current_capsule()

    def interrupted(self) -> bool:
        """True once the worker running this job is stopping (quiet or
        shutdown): a long job checks it at safe points and raises
        :class:`~wurk.errors.Interrupted` to go back to its queue, rather than
        be cut off at the shutdown deadline. Always false outside a worker."""
        return current.stopping()

    # -- options --------------------------------------------------------------

    @classmethod
    def get_options(cls, config: Config | None = None) -> dict[str, Any]:
        """The global default job options with this class's options over them."""
        if config is None:
            config = current_config()
        return {**config.default_job_options, **cls.wurk_options}

    @classmethod
    def set_options(cls, **options: Any) -> None:
        """Change this class's options after definition (``sidekiq_options``)."""
        cls.wurk_options = {**cls.wurk_options, **_check_options(cls.__qualname__, options)}

    @classmethod
    def queue_name(cls) -> str:
        return str(cls.get_options()["queue"])

    @classmethod
    def build_client(cls) -> Pusher:
        """The client a push uses: ``config.register("client_class", factory)``
        (see ``wurk.client.transactional``) can replace the plain one. The
        configuration is the one running the current job (a push from inside
        a job goes to that worker's Redis), else the process default."""
        config = current_config()
        factory = config.lookup("client_class")
        client: Pusher = factory(config) if factory is not None else config.lookup("client", Client)
        return client

    # -- enqueueing -------------------------------------------------------------

    @classmethod
    def set(cls, **options: Any) -> Setter:
        return Setter(cls, options)

    @classmethod
    def perform_async(cls, *args: Any) -> str | None:
        return Setter(cls, {}).perform_async(*args)

    @classmethod
    def perform_in(cls, interval: Any, *args: Any) -> str | None:
        """Run after ``interval`` (seconds or timedelta; >= 1e9 is an epoch)."""
        return Setter(cls, {})._push_class_first(wire.schedule_at(interval), args)

    @classmethod
    def perform_at(cls, when: Any, *args: Any) -> str | None:
        """Run at ``when`` (datetime or epoch seconds); a past time runs now."""
        return Setter(cls, {})._push_class_first(wire.schedule_at(when), args)

    @classmethod
    def perform_bulk(cls, args_list: Iterable[Iterable[Any]], *, batch_size: int | None = None) -> list[str | None]:
        return Setter(cls, {}).perform_bulk(args_list, batch_size=batch_size)

    @classmethod
    def perform_inline(cls, *args: Any) -> Any:
        return Setter(cls, {}).perform_inline(*args)

    perform_sync = perform_inline

    @classmethod
    def client_push(cls, item: Mapping[str, Any]) -> str | None:
        return cls.build_client().push({**item, "class": item.get("class", cls)})

    # -- retry hooks --------------------------------------------------------------

    @classmethod
    def retry_in(cls, count: int, exc: BaseException, job: dict[str, Any]) -> int | float | str | None:
        """Seconds until the next attempt, ``"discard"``, ``"kill"``, or ``None``
        for the default backoff."""
        return None

    @classmethod
    def retries_exhausted(cls, job: dict[str, Any], exc: BaseException) -> str | None:
        """Called once retries run out; return ``"discard"`` to skip the dead set."""
        return None

    # -- testing helpers (the fake store) -----------------------------------
    # On ``wurk.Job`` itself these cover every class (``wurk.Job.jobs`` is the
    # whole store); on a subclass, that class only. See ``wurk.testing``.

    #: This class's fake payloads, in push order (a new list on each access).
    jobs = interception.JobsAttribute()

    @classmethod
    def clear(cls) -> None:
        """Drop this class's fake jobs, leaving other classes' alone."""
        interception.testing_helpers().clear(cls)

    @classmethod
    def drain(cls) -> int:
        """Run and remove this class's fake jobs, including ones pushed meanwhile."""
        return interception.testing_helpers().drain(cls)

    @classmethod
    def perform_one(cls) -> Any:
        """Run and remove the oldest fake job; ``perform``'s return value."""
        return interception.testing_helpers().perform_one(cls)

    @classmethod
    def process_job(cls, job: dict[str, Any]) -> Any:
        """Run one payload through the testing server chain."""
        return interception.testing_helpers().process_job(cls, job)

    @classmethod
    def execute_job(cls, instance: Job, args: list[Any]) -> Any:
        """The innermost call of an in-process run: ``instance.perform(*args)``."""
        return _run(instance.perform(*args))

    @staticmethod
    def clear_all() -> None:
        """Empty the fake store."""
        interception.testing_helpers().clear_all()

    @staticmethod
    def drain_all() -> int:
        """Run fake jobs of every class until the store is empty."""
        return interception.testing_helpers().drain_all()


class JobFunction:
    """What ``@wurk.job`` returns: the function, still callable, plus the job API."""

    def __init__(self, fn: Callable[..., Any], job_class: type[Job]) -> None:
        functools.update_wrapper(self, fn)
        self.fn = fn
        self.job_class = job_class

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        return self.fn(*args, **kwargs)

    def __getattr__(self, name: str) -> Any:
        if name.startswith("__"):
            raise AttributeError(name)
        return getattr(self.job_class, name)

    def __repr__(self) -> str:
        return f"<wurk job {self.job_class.wire_name}>"


def job(fn: Callable[..., Any] | None = None, /, **options: Any) -> Any:
    """Turn a plain function (or ``async def``) into a job::

    @wurk.job(queue="mail", retry=3)
    def send_welcome(user_id): ...
    """

    def wrap(function: Callable[..., Any]) -> JobFunction:
        module = wire.main_module_name() if function.__module__ == "__main__" else function.__module__
        name = f"{module}.{function.__qualname__}"

        def perform(self: Job, *args: Any) -> Any:
            return function(*args)

        async def perform_async(self: Job, *args: Any) -> Any:
            return await function(*args)

        # An ``async def`` function's job runs on the worker's event loop
        # (see wurk.server.asyncjobs), which tells it by its perform.
        chosen = perform_async if inspect.iscoroutinefunction(function) else perform
        namespace = {"perform": chosen, "wire_name": name, "__module__": function.__module__}
        job_class = type(function.__name__, (Job,), namespace, **options)
        job_class.__qualname__ = function.__qualname__
        return JobFunction(function, job_class)

    if fn is not None:
        return wrap(fn)
    return wrap

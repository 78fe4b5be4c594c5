"""From a payload's ``class`` name to the Python code that runs it.

A payload comes from Redis, which anyone with access to it can write, so its
``class`` must never decide what the worker imports: ``"this.Nope"`` would
otherwise run ``import this``, and any installed module with an import-time
side effect could be set off the same way. A name resolves, in this order, to

1. a name mapped explicitly (names written by other languages, a Ruby
   ``"HardJob"``, or renamed classes)::

       config.jobs.register("HardJob", app.jobs.HardJob)

2. a job class this process has already defined: a ``wurk.Job`` subclass or
   an ``@wurk.job`` function, found by its wire name, with no import at all;

3. a job in a module under the *allowed packages* — the application's own
   code: the package of the module loaded with ``-r`` and the configured
   ``job_packages`` (see :mod:`wurk.cli.boot`), or ``config.jobs.allow("myapp")``
   — imported on first use.

Anything else is an unknown job and nothing is imported for it. With no
allowed package at all (an embedded worker, a library in tests) step 3 never
runs: such a process runs only the jobs it has loaded itself.
"""

from __future__ import annotations

import difflib
import importlib
import os
import threading
from collections import deque
from collections.abc import Callable, Iterable, Iterator
from typing import Any

from wurk.client import payload as wire
from wurk.config.settings import check_module_names, is_dotted_name
from wurk.errors import WurkError

#: How alike a name and a known job's must be for "did you mean" (difflib's
#: ratio): a slip of a letter or two in a dotted name, not a sibling class
#: that merely shares its module path.
NEAR_MATCH = 0.8


class UnknownJobError(WurkError, LookupError):
    """No Python code is known under a payload's ``class`` name.

    The message says why and what to change; when an import was tried and
    failed, that error is the ``__cause__`` (and is quoted in the message), so
    a missing dependency of the job's module is not mistaken for a typo.
    """


def real_job_class(target: Any) -> type | None:
    """The ``wurk.Job`` subclass behind ``target`` (itself, or the class of an
    ``@wurk.job`` function), else None: duck-typed classes with a ``perform``
    method do not count, since any class anywhere could have one."""
    from wurk.client.job import Job, JobFunction  # job imports the client, which imports config, which imports us

    if isinstance(target, JobFunction):
        target = target.job_class
    if isinstance(target, type) and issubclass(target, Job) and target is not Job:
        return target
    return None


class JobRegistry:
    """Names mapped to job classes, and the packages lookup may import from."""

    def __init__(self, configured: Callable[[], Iterable[str]] = tuple) -> None:
        """``configured``: the ``job_packages`` of the configuration, read at
        each lookup, so a worker started without the command line (embedded)
        honours them too."""
        self._names: dict[str, Any] = {}
        self._configured = configured
        self._allowed: tuple[str, ...] = ()
        self._lock = threading.Lock()

    def register(self, name: str, target: Any) -> None:
        with self._lock:
            self._names[name] = target

    def unregister(self, name: str) -> None:
        with self._lock:
            self._names.pop(name, None)

    def allow(self, *packages: str) -> None:
        """Let lookup import job modules in these packages (and their
        submodules), for jobs the application has not imported itself::

            config.jobs.allow("myapp.jobs")
        """
        names = check_module_names("allowed job packages", packages)
        with self._lock:
            self._allowed = tuple(dict.fromkeys((*self._allowed, *names)))

    @property
    def allowed(self) -> tuple[str, ...]:
        """The packages lookup may import from; empty means it imports nothing."""
        return tuple(dict.fromkeys((*self._allowed, *self._configured())))

    def resolve(self, name: str) -> type:
        """The job class for ``name``; UnknownJobError if there is none."""
        with self._lock:
            target = self._names.get(name)
        if target is not None:
            job_class = getattr(target, "job_class", target)
            if not isinstance(job_class, type) or not callable(getattr(job_class, "perform", None)):
                raise UnknownJobError(f"{name!r} is registered as {target!r}, which is not a job class")
            return job_class
        defined = defined_job_class(name)
        if defined is not None:
            return defined
        return self._import(name)

    # -- importing from the allowed packages ------------------------------------------

    def _import(self, name: str) -> type:
        parts = name.split(".")
        if len(parts) < 2 or not is_dotted_name(name):
            raise self._unknown(name, self._advice())
        allowed = self.allowed
        missing: ModuleNotFoundError | None = None
        for cut in range(len(parts) - 1, 0, -1):
            module_name = ".".join(parts[:cut])
            if not _within(module_name, allowed):
                break  # a shorter prefix is outside too
            try:
                module = importlib.import_module(module_name)
            except ModuleNotFoundError as exc:
                if _names_module(exc, module_name):
                    missing = exc  # no such module: it may be an attribute of its parent
                    continue
                raise self._failed(name, module_name, exc) from exc
            except Exception as exc:  # the job's module itself raised while importing
                raise self._failed(name, module_name, exc) from exc
            return self._job_in(name, module, parts[cut:], missing)
        if missing is not None:
            raise self._unknown(name, f"{_describe(missing)}; {self._advice()}") from missing
        raise self._unknown(
            name,
            "it is not a job class this process has loaded, and its module is outside "
            f"the packages job lookup may import, so nothing was imported; {self._advice()}",
        )

    def _job_in(self, name: str, module: Any, attributes: list[str], missing: ModuleNotFoundError | None) -> type:
        target = module
        try:
            for attribute in attributes:
                target = getattr(target, attribute)
        except AttributeError as exc:
            cause: BaseException = missing or exc  # "no module a.b" says more than "a has no b"
            raise self._unknown(name, f"{_describe(cause)}; {self._advice()}") from cause
        job_class = real_job_class(target)
        if job_class is None:
            raise UnknownJobError(f"{name!r} is {target!r}, which is not a wurk.Job subclass or @wurk.job function")
        return job_class

    def _unknown(self, name: str, why: str) -> UnknownJobError:
        """``no job named 'app.jobs.Hellp' (did you mean 'app.jobs.Hello'?): why``.

        A payload's class is a string nobody checks at enqueue (it may name a
        job only another process, or another language, defines), so a typo
        first shows here, in the retry set and the dead set: the nearest
        known name turns a puzzle into a one-letter fix.
        """
        near = self.nearest(name)
        hint = f" (did you mean {near!r}?)" if near else ""
        return UnknownJobError(f"no job named {name!r}{hint}: {why}")

    def nearest(self, name: str) -> str | None:
        """The known job name ``name`` is most likely a misspelling of, if any.

        Known are the names mapped with :meth:`register` and the wire names
        of the job classes this process has defined. A name whose last part
        is exactly one known class's, under another module path
        (``jobs.Hello`` for ``app.jobs.Hello``), counts too.
        """
        with self._lock:
            known = set(self._names)
        known.update(wire_name for wire_name, _ in _defined_jobs())
        known.discard(name)
        close = difflib.get_close_matches(name, sorted(known), n=1, cutoff=NEAR_MATCH)
        if close:
            return close[0]
        tail = name.rpartition(".")[2]
        same_class = [candidate for candidate in known if candidate.rpartition(".")[2] == tail]
        return same_class[0] if len(same_class) == 1 else None

    def _failed(self, name: str, module_name: str, exc: BaseException) -> UnknownJobError:
        return UnknownJobError(
            f"no job named {name!r}: importing {module_name} failed with {_describe(exc)}; {self._advice()}"
        )

    def _advice(self) -> str:
        where = f"working directory {os.getcwd()}"
        allowed = self.allowed
        if allowed:
            scope = f"job lookup imports only from {', '.join(allowed)} ({where})"
        else:
            scope = f"no -r module or job_packages is configured, so job lookup imports nothing ({where})"
        return (
            f"{scope}. Load the job's module with -r, list its package in job_packages, "
            "or map the name with config.jobs.register()"
        )


def defined_job_class(name: str) -> type | None:
    """The job class already defined under wire name ``name``, if any.

    Walking the subclasses finds custom ``wire_name``s and ``@wurk.job``
    functions too, and touches nothing but job classes; it is a miss's cost
    only, since the manager caches what resolves.
    """
    found: type | None = None
    for wire_name, candidate in _defined_jobs():
        if wire_name == name:
            found = candidate  # the last one defined wins, as a re-definition would
    return found


def _defined_jobs() -> Iterator[tuple[str, type]]:
    """(wire name, class) of each job class defined so far; nothing is imported."""
    from wurk.client.job import Job

    pending = deque(Job.__subclasses__())
    while pending:
        candidate = pending.popleft()
        pending.extend(candidate.__subclasses__())
        try:
            yield wire.class_name(candidate), candidate
        except wire.InvalidJobError:
            continue  # a class defined inside a function has no wire name


def _within(module_name: str, packages: Iterable[str]) -> bool:
    return any(module_name == package or module_name.startswith(package + ".") for package in packages)


def _names_module(exc: ModuleNotFoundError, module_name: str) -> bool:
    """Whether ``exc`` says ``module_name`` (or a parent of it) does not exist,
    as opposed to a module it imports being missing."""
    missing = exc.name or ""
    return module_name == missing or module_name.startswith(missing + ".")


def _describe(exc: BaseException) -> str:
    return f"{type(exc).__name__}: {exc}"


__all__ = ["JobRegistry", "UnknownJobError", "defined_job_class"]

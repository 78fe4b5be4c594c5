"""Callbacks: what ``Batch.on`` accepts, and the job that runs them.

A callback is an ordinary job, :class:`CallbackJob`, pushed onto the batch's
callback queue when its event fires: it runs in a worker, retries like any
job (``retry: True``) and so must be idempotent. Its target is a class with a
no-argument constructor, written in one of four forms:

=============================  ========================================
``ImportCallback`` (a class)   ``ImportCallback().on_success(status, options)``
``"app.cb.ImportCallback"``    the same, by its dotted path
``"app.cb.ImportCallback#x"``  ``ImportCallback().x(status, options)``
``"#x"``                       ``x`` of the batch's ``callback_class``
=============================  ========================================

A target that cannot be resolved when the callback runs never heals by
waiting, so :class:`UnresolvableTarget` sends the callback job straight to
the dead set on its first attempt; errors raised by the callback's own body
keep the normal retries.

Which modules a target may import follows core's rule for job classes
(:mod:`wurk.client.registry`): a payload read from Redis must not decide what a
worker imports. A target resolves when its module is already imported, or
lies in a package the worker allows (the ``-r`` application's package,
``job_packages``, ``config.jobs.allow``).
"""

from __future__ import annotations

import importlib
import re
import sys
from types import ModuleType
from typing import Any

import wurk
from wurk.client import payload as wire
from wurk_batches.constants import CALLBACK_JOB, EMPTY_JOB

_DOTTED = r"[A-Za-z_]\w*(?:\.[A-Za-z_]\w*)+"
_TARGET = re.compile(rf"^(?P<klass>{_DOTTED})?(?:#(?P<method>[A-Za-z_]\w*))?$")


class UnresolvableTarget(wurk.WurkError):
    """A callback's target names no usable class or method (unknown class, a
    module rather than a class, a missing or private method, or ``"#method"``
    without a ``callback_class``)."""


def class_path(klass: type) -> str:
    """The dotted path a class is stored under."""
    if "<locals>" in klass.__qualname__:
        raise ValueError(f"callback class {klass.__qualname__} is defined inside a function: a worker cannot find it")
    module = wire.main_module_name() if klass.__module__ == "__main__" else klass.__module__
    return f"{module}.{klass.__qualname__}"


def normalize_target(target: Any) -> str:
    """``target`` in its stored form, or a ValueError naming the forms allowed."""
    if isinstance(target, type):
        return class_path(target)
    if isinstance(target, str):
        match = _TARGET.match(target)
        if match and (match["klass"] or match["method"]):
            if match["method"] and match["method"].startswith("_"):
                raise ValueError(f"callback target {target!r}: method {match['method']!r} is private")
            return target
    raise ValueError(
        f"a callback target must be a class, 'package.module.Class', 'package.module.Class#method' "
        f"or '#method' (resolved against callback_class), got {target!r}"
    )


def normalize_class(klass: Any) -> str | None:
    """A ``callback_class`` in its stored form (a class's dotted path)."""
    if klass is None:
        return None
    if isinstance(klass, type):
        return class_path(klass)
    if isinstance(klass, str) and re.fullmatch(_DOTTED, klass):
        return klass
    raise ValueError(f"callback_class must be a class or its dotted path 'package.module.Class', got {klass!r}")


def resolve(target: str, event: str, config: wurk.Config) -> Any:
    """The bound method a callback calls, or :class:`UnresolvableTarget`."""
    klass_name, _, method = target.partition("#")
    method = method or f"on_{event}"
    if not klass_name:
        raise UnresolvableTarget(f"callback {target!r} names no class and the batch has no callback_class")
    klass = _find(klass_name, config)
    if not isinstance(klass, type):
        raise UnresolvableTarget(f"callback {target!r}: {klass_name} is a {type(klass).__name__}, not a class")
    if method.startswith("_") or not callable(getattr(klass, method, None)):
        raise UnresolvableTarget(f"callback {target!r}: {klass_name} has no public method {method}()")
    return getattr(klass(), method)


def _find(dotted: str, config: wurk.Config) -> Any:
    parts = dotted.split(".")
    for split in range(len(parts) - 1, 0, -1):
        module = _module(".".join(parts[:split]), config)
        if module is None:
            continue
        found: Any = module
        for name in parts[split:]:
            found = getattr(found, name, None)
            if found is None:
                raise UnresolvableTarget(f"callback class {dotted} not found: {module.__name__} has no {name}")
        return found
    raise UnresolvableTarget(
        f"callback class {dotted} not found: its module is neither imported by the worker nor in an allowed "
        f"package (allowed: {', '.join(config.jobs.allowed) or 'none'})"
    )


def _module(name: str, config: wurk.Config) -> ModuleType | None:
    module = sys.modules.get(name)
    if module is not None:
        return module
    if not any(name == package or name.startswith(package + ".") for package in config.jobs.allowed):
        return None
    try:
        return importlib.import_module(name)
    except ModuleNotFoundError as exc:
        if exc.name is not None and (name == exc.name or name.startswith(exc.name + ".")):
            return None  # the module itself is missing: maybe a shorter prefix is the module
        raise


class CallbackJob(wurk.Job, retry=True):
    """Runs one callback: ``args`` are the bid, the event, the target and the
    options given to ``Batch.on`` (round-tripped through JSON)."""

    wire_name = CALLBACK_JOB

    def perform(self, bid: str, event: str, target: str, options: dict[str, Any]) -> None:
        from wurk_batches.status import Status

        config = wurk.current_config()  # the worker's running this callback
        method = resolve(target, event, config)
        method(Status(bid, config=config), options)

    @classmethod
    def retry_in(cls, count: int, exc: BaseException, job: dict[str, Any]) -> int | float | str | None:
        return "kill" if isinstance(exc, UnresolvableTarget) else None


class Empty(wurk.Job):
    """The no-op job an empty ``jobs`` block enqueues, so that the batch still
    completes and its callbacks fire."""

    wire_name = EMPTY_JOB

    def perform(self) -> None:
        pass

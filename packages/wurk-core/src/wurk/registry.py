"""From a payload's ``class`` name to the Python code that runs it.

A Python job's wire name is its dotted import path, so most names resolve by
import. Names written by other languages (a Ruby ``"HardJob"``) or renamed
classes are mapped explicitly::

    config.jobs.register("HardJob", app.jobs.HardJob)
"""

from __future__ import annotations

import importlib
import threading
from typing import Any

from wurk.errors import WurkError


class UnknownJobError(WurkError, LookupError):
    """No Python code is known under a payload's ``class`` name."""


class JobRegistry:
    def __init__(self) -> None:
        self._names: dict[str, Any] = {}
        self._lock = threading.Lock()

    def register(self, name: str, target: Any) -> None:
        with self._lock:
            self._names[name] = target

    def unregister(self, name: str) -> None:
        with self._lock:
            self._names.pop(name, None)

    def resolve(self, name: str) -> type:
        """The job class for ``name``: a registered one, else an import."""
        with self._lock:
            target = self._names.get(name)
        if target is None:
            target = self._import(name)
        job_class = getattr(target, "job_class", target)
        if not isinstance(job_class, type) or not callable(getattr(job_class, "perform", None)):
            raise UnknownJobError(f"{name!r} resolves to {target!r}, which is not a job class")
        return job_class

    @staticmethod
    def _import(name: str) -> Any:
        module_name, _, attribute = name.rpartition(".")
        parts = attribute.split(".")
        while module_name:
            try:
                target: Any = importlib.import_module(module_name)
            except ModuleNotFoundError:
                module_name, _, head = module_name.rpartition(".")
                parts.insert(0, head)
                continue
            try:
                for part in parts:
                    target = getattr(target, part)
            except AttributeError:
                break
            return target
        raise UnknownJobError(
            f"no job named {name!r}: it is not importable; register foreign names with config.jobs.register()"
        )

"""From a job payload to its lock key: the *context* a lock is taken on.

The context of a job is, in order of preference:

1. whatever its class's ``unique_context(job)`` classmethod returns, when the
   class is known to the pushing process (defined, or importable from the
   application's own packages); an unknown class skips the hook rather than
   importing whatever a payload names;
2. for a wrapper payload (Ruby ActiveJob, Django tasks), the wrapper class,
   the queue, the wrapped task's class and its arguments: each push of a
   wrapper carries fresh per-push fields (ActiveJob's ``job_id`` and
   ``enqueued_at``…), and hashing them would make every push unique;
3. otherwise ``[class, queue, args]``.

The digest is the hex SHA-256 of the context's compact JSON after a JSON
round trip, exactly as stored: ``1`` and ``"1"`` differ, tuples are lists.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from wurk.client.payload import ACTIVE_JOB_WRAPPERS, DJANGO_TASK_WRAPPERS
from wurk.client.registry import defined_job_class
from wurk.errors import ConfigurationError
from wurk_unique import keys

if TYPE_CHECKING:
    from wurk.config.configuration import Config

#: The name of the classmethod a job class defines to choose its own context.
CONTEXT_HOOK = "unique_context"


def digest(context: Any) -> str:
    """Hex SHA-256 of ``context``'s compact JSON, as Ruby's ``JSON.generate``
    writes it (no spaces, UTF-8 unescaped), so Ruby and Python agree on keys."""
    try:
        text = json.dumps(json.loads(json.dumps(context)), separators=(",", ":"), ensure_ascii=False)
    except (TypeError, ValueError) as exc:
        raise ConfigurationError(f"a unique-job context must be JSON-serializable, got {context!r}: {exc}") from None
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def triple(job_class: str, queue: str, args: Any) -> list[Any]:
    return [job_class, queue, list(args)]


def wrapper_context(job: Mapping[str, Any]) -> list[Any] | None:
    """The narrowed context of a wrapper payload, or ``None`` for any other job."""
    klass, args = job.get("class"), job.get("args")
    data = args[0] if isinstance(args, list) and len(args) == 1 and isinstance(args[0], dict) else None
    if data is None:
        return None
    if klass in ACTIVE_JOB_WRAPPERS and "job_class" in data and "arguments" in data:
        return [klass, job.get("queue"), data["job_class"], data["arguments"]]
    if klass in DJANGO_TASK_WRAPPERS and "task_path" in data:
        return [klass, job.get("queue"), data["task_path"], data.get("args", []), data.get("kwargs", {})]
    return None


def known_class(name: Any, config: Config) -> type | None:
    """The class a payload names, if this process knows it; ``None`` otherwise
    (a Ruby class, a job the enqueuing process never loaded)."""
    if not isinstance(name, str):
        return None
    found = defined_job_class(name)
    if found is not None:
        return found
    try:
        return config.jobs.resolve(name)
    except Exception:  # any failure to find it means: no hook, default context
        return None


def context(job: Mapping[str, Any], job_class: type | None) -> Any:
    """The value a job's lock is keyed on (see the module docstring)."""
    hook = getattr(job_class, CONTEXT_HOOK, None) if job_class is not None else None
    if callable(hook):
        return hook(dict(job))
    narrowed = wrapper_context(job)
    if narrowed is not None:
        return narrowed
    return triple(str(job.get("class")), str(job.get("queue")), job.get("args") or [])


def lock_key_of(job: Mapping[str, Any], job_class: type | None) -> str:
    """The ``unique:<digest>`` key of ``job``, its class's hook applied."""
    return keys.lock(digest(context(job, job_class)))


__all__ = ["CONTEXT_HOOK", "context", "digest", "known_class", "lock_key_of", "triple", "wrapper_context"]

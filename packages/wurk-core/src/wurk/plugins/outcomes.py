"""What happened to a job, told to plugins once the core has booked it.

A feature that books something per job (a limiter's slot, a lock, a
counter) needs to hear how a run ended — a success, a retry booked, a death,
a reschedule, a job given back at shutdown — without reaching into the processor or the retry layer. Core
reports each of those as one frozen :class:`Outcome` through the
``wurk_job_outcome(outcome, config)`` hook, from wherever it happens: the
processor and the retry layer in a worker, the reaper for a poison pill, the
API (and so the dashboard) for a kill. A listener that raises is reported
through ``config.handle_exception`` and the others still hear it::

    import wurk

    @wurk.hookimpl
    def wurk_job_outcome(outcome, config):
        if outcome.kind == "died":
            audit.record(outcome.jid, outcome.reason)

The job hot path pays for this only when some plugin listens: a worker looks
at the hook's implementations once, when its processors are built.

Why a job died (``outcome.reason``) is an open set of names. Core registers
the reasons it gives itself; a plugin whose code kills jobs registers its own
with :func:`add_reason` where that code is defined (wurk-limiter's
``rate_limited``). An outcome with a reason nobody registered is refused when
it is built, so a listener never meets a name it cannot look up::

    wurk.plugins.outcomes.add_reason("quota_exceeded", "the tenant's monthly quota was used up")
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from contextvars import ContextVar
from dataclasses import dataclass
from types import MappingProxyType
from typing import TYPE_CHECKING, Any, Literal

from wurk.errors import PluginError

if TYPE_CHECKING:
    from wurk.config.configuration import Config

HOOK = "wurk_job_outcome"

Kind = Literal["succeeded", "retry_scheduled", "died", "rescheduled", "interrupted"]
#: A registered reason's name (:func:`reasons` lists them).
Reason = str

KINDS: tuple[Kind, ...] = ("succeeded", "retry_scheduled", "died", "rescheduled", "interrupted")

_REASON_NAME = re.compile(r"[a-z][a-z0-9_]*\Z")

# Reason name -> what it means. Process-wide, as the names are: a vocabulary
# every configuration of the process shares, filled as the code that gives a
# reason is imported, never state of one configuration.
_reasons: dict[str, str] = {
    "retries_exhausted": "out of attempts, or retry: 0, or retry_in answered 'kill': the dead set",
    "retry_false": "retry: False: the death handlers ran, nothing went to the dead set",
    "discarded": "retries_exhausted or retry_in answered 'discard', or dead: False",
    "expired": "its expires_in had passed",
    "killed": "killed from the API or the dashboard",
    "poison_pill": "it crashed its process three times",
}


def add_reason(name: str, meaning: str) -> None:
    """Register ``name`` as a reason an outcome ``died`` may give, with a
    line saying what it means (:func:`reasons` shows it).

    A lowercase identifier (``rate_limited``). Registering a name again with
    the same meaning does nothing (a module imported twice); with another
    meaning it is refused, since two plugins would then tell listeners two
    different things under one name.
    """
    if not isinstance(name, str) or not _REASON_NAME.match(name):
        raise PluginError(f"an outcome reason must be a lowercase identifier (like 'rate_limited'), got {name!r}")
    if not isinstance(meaning, str) or not meaning.strip():
        raise PluginError(f"outcome reason {name!r} needs a meaning, got {meaning!r}")
    current = _reasons.setdefault(name, meaning)
    if current != meaning:
        raise PluginError(f"outcome reason {name!r} is already registered, meaning {current!r}, not {meaning!r}")


def reasons() -> Mapping[str, str]:
    """Every registered reason and what it means, read-only."""
    return MappingProxyType(_reasons)


def check_reason(reason: str | None) -> None:
    """Raise if ``reason`` is neither None nor registered."""
    if reason is not None and reason not in _reasons:
        raise PluginError(
            f"unknown outcome reason {reason!r}: register it with wurk.plugins.outcomes.add_reason(name, meaning) "
            f"where the code that gives it is defined (registered: {', '.join(sorted(_reasons))})"
        )


@dataclass(frozen=True, slots=True)
class Outcome:
    """One job's result, as booked.

    ``kind``:

    * ``succeeded`` — ``perform`` returned;
    * ``retry_scheduled`` — it failed and waits in the ``retry`` set;
    * ``died`` — it will not run again on its own; ``reason`` says why;
    * ``rescheduled`` — someone put it back in the ``schedule`` set without
      booking a failure (a rate limiter, through :class:`wurk.server.retry.Retrier`);
    * ``interrupted`` — it stopped early (shutdown, or ``Interrupted``) and was
      given back to its queue: it will run again, nothing was booked.

    ``reason`` (``died`` only): ``retries_exhausted`` (out of attempts, or
    ``retry: 0``, or ``retry_in`` answered ``"kill"``: the dead set),
    ``retry_false`` (``retry: False``: death handlers, no dead set),
    ``discarded`` (``retries_exhausted`` or ``retry_in`` answered
    ``"discard"``, or ``dead: False``), ``expired`` (its ``expires_in`` had
    passed), ``killed`` (from the API or the dashboard), ``poison_pill`` (it
    crashed its process three times), or one a plugin registered with
    :func:`add_reason` (wurk-limiter's ``rate_limited``). A reason nobody
    registered is refused here, when the outcome is built.

    ``job`` is the payload as booked: the retry and dead sets hold what it
    holds (with a failure's stamp), not what a server middleware rewrote.
    Treat it as read-only; other listeners get the same dict.
    """

    kind: Kind
    job: dict[str, Any]
    queue: str | None = None
    jid: str | None = None
    reason: Reason | None = None
    exception: BaseException | None = None

    def __post_init__(self) -> None:
        check_reason(self.reason)

    @classmethod
    def of(
        cls,
        kind: Kind,
        job: dict[str, Any],
        *,
        queue: str | None = None,
        reason: Reason | None = None,
        exception: BaseException | None = None,
    ) -> Outcome:
        """An outcome whose jid (and, unless given, queue) come from the payload."""
        jid = job.get("jid")
        where = queue if queue is not None else job.get("queue")
        return cls(
            kind=kind,
            job=job,
            queue=where if isinstance(where, str) else None,
            jid=jid if isinstance(jid, str) else None,
            reason=reason,
            exception=exception,
        )


class _Running:
    """The job this processor thread is running, and whether its outcome was told."""

    __slots__ = ("jid", "told")

    def __init__(self, jid: Any) -> None:
        self.jid = jid
        self.told = False


# Set by the processor around one job, so that an outcome told from inside it
# (Expiry, a middleware calling the Retrier) stops the processor telling a
# second one. A ContextVar because each processor is its own thread.
_running: ContextVar[_Running | None] = ContextVar("wurk_outcome_running", default=None)


def listening(config: Config) -> bool:
    """Whether any plugin implements the hook: callers on the hot path ask once
    and keep the answer."""
    return config.plugins.implemented(HOOK)


def begin(jid: Any) -> None:
    """The processor starts a job whose outcome it will tell unless someone else does."""
    _running.set(_Running(jid))


def told() -> bool:
    """Whether the running job's outcome was told already (then the processor stays quiet)."""
    running = _running.get()
    return running is not None and running.told


def report(config: Config, outcome: Outcome, *, known_listening: bool = False) -> None:
    """Tell every listening plugin, each in turn, a failing one reported and
    skipped. ``known_listening`` spares the look-up for a caller that cached it."""
    plugins = config.plugins
    if not known_listening and not plugins.implemented(HOOK):
        return
    running = _running.get()
    if running is not None and running.jid == outcome.jid:
        running.told = True
    plugins.call.job_outcome(outcome, config)


__all__ = ["KINDS", "Kind", "Outcome", "Reason", "add_reason", "reasons"]

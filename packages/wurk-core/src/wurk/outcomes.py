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
"""

from __future__ import annotations

from contextvars import ContextVar
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Literal

if TYPE_CHECKING:
    from wurk.config import Config

HOOK = "wurk_job_outcome"

Kind = Literal["succeeded", "retry_scheduled", "died", "rescheduled", "interrupted"]
Reason = Literal["retries_exhausted", "retry_false", "poison_pill", "killed", "expired", "discarded", "rate_limited"]

KINDS: tuple[Kind, ...] = ("succeeded", "retry_scheduled", "died", "rescheduled", "interrupted")
REASONS: tuple[Reason, ...] = (
    "retries_exhausted",
    "retry_false",
    "poison_pill",
    "killed",
    "expired",
    "discarded",
    "rate_limited",
)


@dataclass(frozen=True, slots=True)
class Outcome:
    """One job's result, as booked.

    ``kind``:

    * ``succeeded`` — ``perform`` returned;
    * ``retry_scheduled`` — it failed and waits in the ``retry`` set;
    * ``died`` — it will not run again on its own; ``reason`` says why;
    * ``rescheduled`` — someone put it back in the ``schedule`` set without
      booking a failure (a rate limiter, through :class:`wurk.retry.Retrier`);
    * ``interrupted`` — it stopped early (shutdown, or ``Interrupted``) and was
      given back to its queue: it will run again, nothing was booked.

    ``reason`` (``died`` only): ``retries_exhausted`` (out of attempts, or
    ``retry: 0``, or ``retry_in`` answered ``"kill"``: the dead set),
    ``retry_false`` (``retry: False``: death handlers, no dead set),
    ``discarded`` (``retries_exhausted`` or ``retry_in`` answered
    ``"discard"``, or ``dead: False``), ``expired`` (its ``expires_in`` had
    passed), ``killed`` (from the API or the dashboard), ``poison_pill`` (it
    crashed its process three times), ``rate_limited`` (a rate limiter
    refused it as many times as its cap allows: the dead set, through
    :meth:`wurk.retry.Retrier.kill`).

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


__all__ = ["KINDS", "REASONS", "Kind", "Outcome", "Reason", "listening", "report"]

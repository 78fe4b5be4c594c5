"""The soak's application: the jobs the swarm runs and the producer pushes, every plugin on.

Loaded by the swarm (``wurkswarm -r soak.app``, with ``bench/`` on the
path) and by the producer, so both sides enable the same plugins with the
same settings, as a real deployment's job module does. Every job takes its
number ``n`` as its first argument and records in the ledger that it
finished (``soak.ledger``); which kind of job ``n`` is follows from
``n % 10`` (:func:`kind`), so the producer and the report agree without
talking:

== =============== ====================================================
0  ``batch``       a :class:`SoakJob` in its block's batch, whose success
                   callback (:class:`BatchDone`) records the block
1  ``encrypted``   :class:`SecretJob`: its last argument is sealed with
                   AES-GCM (the key from ``SOAK_KEY_1``); the job checks
                   what it gets decrypted
2  ``unique``      :class:`UniqueJob`, pushed twice in a row: the second
                   push is dropped while the first holds its lock
3  ``concurrent``  :class:`ConcurrentJob`, inside a concurrent limiter of 3
4  ``window``      :class:`WindowJob`, inside a sliding-window limiter
5  ``delayed``     a :class:`SoakJob` pushed with ``perform_in`` (1-3 s)
6-9 ``plain``      a :class:`SoakJob`
== =============== ====================================================
"""

from __future__ import annotations

import os
import time
from typing import Any

import wurk
import wurk_crypto
import wurk_unique
from soak import ledger
from wurk_limiter import Limiter

KINDS = ("batch", "encrypted", "unique", "concurrent", "window", "delayed", "plain", "plain", "plain", "plain")


def kind(n: int) -> str:
    return KINDS[n % 10]


def key_of(version: int) -> bytes:
    """Encryption key ``version``: 32 bytes as 64 hex digits in ``SOAK_KEY_<version>``."""
    return bytes.fromhex(os.environ[f"SOAK_KEY_{version}"])


def secret_of(n: int) -> dict[str, Any]:
    """The argument job ``n`` carries encrypted, and checks once decrypted."""
    return {"number": f"4111{n:012d}", "cvc": f"{n % 1000:03d}"}


wurk_unique.enable()
wurk_crypto.enable(1, key_of)

#: Seconds a unique job's lock lives; its success releases it long before.
UNIQUE_FOR = int(os.environ.get("SOAK_UNIQUE_FOR", "120"))


def _backoff(limiter: Any, job: Any, exc: Any) -> float:
    """Put an over-limit job back after 2 s, not the default five minutes: the
    soak must end, and 2 s is enough to exercise the reschedule path."""
    return 2.0


#: A slot held by a SIGKILLed job comes back after ``lock_timeout``.
CONCURRENT = Limiter.concurrent("soak-concurrent", 3, wait_timeout=2, lock_timeout=10, backoff=_backoff, ttl=86400)
#: About 1.25 times the window jobs' average rate, so bursts are refused now and then.
WINDOW = Limiter.window(
    "soak-window", int(os.environ.get("SOAK_WINDOW_COUNT", "20")), "second", wait_timeout=1, backoff=_backoff, ttl=86400
)


class SoakJob(wurk.Job):
    def perform(self, n: int) -> None:
        ledger.finished(n)


class SecretJob(wurk.Job, encrypt=True):
    def perform(self, n: int, secret: dict[str, Any]) -> None:
        if secret != secret_of(n):
            ledger.count(ledger.BAD_SECRET, n)
        ledger.finished(n)


class UniqueJob(wurk.Job, unique_for=UNIQUE_FOR):
    def perform(self, n: int) -> None:
        ledger.finished(n)


class ConcurrentJob(wurk.Job):
    def perform(self, n: int) -> None:
        with CONCURRENT.within_limit():
            time.sleep(0.002)  # hold the slot a moment, as a call to the guarded service would
            ledger.finished(n)


class WindowJob(wurk.Job):
    def perform(self, n: int) -> None:
        with WINDOW.within_limit():
            ledger.finished(n)


class BatchDone:
    """The success callback of every batch: records the batch's block number."""

    def on_success(self, status: Any, options: dict[str, Any]) -> None:
        ledger.callback_finished(int(options["block"]))


@wurk.configure_server
def _server(config: Any) -> None:
    # Scheduled and rescheduled jobs are promoted within a second or so,
    # rather than within the default 5 s average, so a short soak drains.
    config["poll_interval_average"] = 1.0
    # The documented setting for a scheduler that loses nothing when its
    # process dies between taking a due job and pushing it
    # (docs/reliability.md); SOAK_SCHEDULER=default soaks the default one.
    if os.environ.get("SOAK_SCHEDULER", "reliable") == "reliable":
        config.reliable_scheduler()

"""The producer: pushes jobs 0 to N-1 at a steady rate, from a process of its own.

Run as ``python -m soak.produce`` with ``bench/`` on the path and the
soak's environment (``REDIS_URL``, ``SOAK_LEDGER_URL``, ``SOAK_KEY_1``,
``SOAK_JOBS``, ``SOAK_RATE``, ``SOAK_BLOCK``, ``SOAK_LINGER``). It talks to
the same broker the faults hit, so its pushes meet the restarts, the
killed connections and the stalls too.

Jobs go in blocks of ``SOAK_BLOCK``: each block opens a batch with a
success callback and pushes its ``batch`` jobs inside it, then the rest of
the block (see ``soak.app`` for the kinds). Push number ``i`` is due at
``i / rate`` seconds from the start; a producer behind schedule pushes as
fast as it can, and the ledger's ``pushed`` count shows how far it got.

Every job is owed: a push that raises is sent again (after 0.2 s, for up to
a minute) and counted in the ledger, since one that raised may have landed
and so explain a second run. The deliberate duplicate of a unique job is
sent once: accepted, it is a second run the job owes; raised, it may or may
not have landed, and is counted as such.
"""

from __future__ import annotations

import logging
import os
import time
from collections.abc import Callable
from typing import Any

from soak import app, ledger
from wurk_batches import Batch

RETRY_EVERY = 0.2
GIVE_UP_AFTER = 60.0

log = logging.getLogger("soak.produce")


class Producer:
    def __init__(self, jobs: int, rate: float, block: int, linger: int) -> None:
        self.jobs = jobs
        self.rate = rate
        self.block = block
        self.linger = linger
        self.pushed = 0
        self.origin = time.monotonic()
        self.ledger = ledger.client()

    def pace(self) -> None:
        """Wait until the next push is due."""
        wait = self.origin + self.pushed / self.rate - time.monotonic()
        if wait > 0:
            time.sleep(wait)

    def send(self, n: int, push: Callable[[], Any]) -> Any:
        """``push()`` until it returns; each raise counted against job ``n``."""
        deadline = time.monotonic() + GIVE_UP_AFTER
        while True:
            try:
                return push()
            except Exception as exc:  # a refused push is retried, as a careful caller would
                ledger.count(ledger.REFUSED, n)
                if time.monotonic() > deadline:
                    raise
                log.warning("push of job %d raised %s: %s; sending it again", n, type(exc).__name__, exc)
                time.sleep(RETRY_EVERY)

    def push(self, n: int) -> None:
        self.pace()
        what = app.kind(n)
        if what == "encrypted":
            self.send(n, lambda: app.SecretJob.perform_async(n, app.secret_of(n)))
        elif what == "unique":
            self.send(n, lambda: app.UniqueJob.perform_async(n))
            try:
                if app.UniqueJob.perform_async(n) is not None:  # the first had finished already
                    ledger.count(ledger.EXTRA, n)
            except Exception:
                ledger.count(ledger.DUP_UNKNOWN, n)
        elif what == "concurrent":
            self.send(n, lambda: app.ConcurrentJob.perform_async(n))
        elif what == "window":
            self.send(n, lambda: app.WindowJob.perform_async(n))
        elif what == "delayed":
            self.send(n, lambda: app.SoakJob.perform_in(1 + n % 3, n))
        else:
            self.send(n, lambda: app.SoakJob.perform_async(n))
        self.pushed += 1

    def run_block(self, number: int) -> None:
        numbers = range(number * self.block, min(self.jobs, (number + 1) * self.block))
        members = [n for n in numbers if app.kind(n) == "batch"]
        if members:
            batch = Batch()
            batch.description = f"soak block {number}"
            batch.linger = self.linger
            batch.on("success", app.BatchDone, {"block": number})
            with batch.jobs():
                for n in members:
                    self.push(n)
        for n in numbers:
            if app.kind(n) != "batch":
                self.push(n)
        self.ledger.hset(ledger.PRODUCER, mapping={"pushed": self.pushed, "elapsed_s": self.elapsed()})

    def elapsed(self) -> float:
        return round(time.monotonic() - self.origin, 3)

    def run(self) -> None:
        blocks = -(-self.jobs // self.block)
        for number in range(blocks):
            self.run_block(number)
        self.ledger.hset(ledger.PRODUCER, mapping={"pushed": self.pushed, "elapsed_s": self.elapsed(), "done": 1})


def main() -> None:
    logging.basicConfig(level=logging.WARNING, format="%(asctime)s %(name)s %(levelname)s %(message)s")
    env = os.environ
    Producer(int(env["SOAK_JOBS"]), float(env["SOAK_RATE"]), int(env["SOAK_BLOCK"]), int(env["SOAK_LINGER"])).run()


if __name__ == "__main__":
    main()

"""Jobs and callbacks the in-process batch tests push (nothing runs them
unless a test does)."""

from __future__ import annotations

from typing import Any

import wurk
from wurk_batches import BatchJob


class Row(wurk.Job):
    def perform(self, n: Any) -> None:
        pass


class Done:
    def on_success(self, status: Any, options: Any) -> None:
        pass

    def finished(self, status: Any, options: Any) -> None:
        pass


#: What SeesItsBatch saw of its batch, run by run.
seen: list[tuple[str | None, str | None]] = []


class SeesItsBatch(BatchJob, wurk.Job):
    def perform(self) -> None:
        seen.append((self.bid, self.batch.bid if self.batch is not None else None))


#: The events Heard heard, as (event, bid, pending when it ran).
heard: list[tuple[str, str, int]] = []


class Heard:
    def on_success(self, status: Any, options: Any) -> None:
        heard.append(("success", status.bid, status.pending))

    def on_complete(self, status: Any, options: Any) -> None:
        heard.append(("complete", status.bid, status.pending))


class Fails(wurk.Job):
    def perform(self) -> None:
        raise ValueError("this row is bad")

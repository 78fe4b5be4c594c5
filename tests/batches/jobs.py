"""Jobs and callbacks the in-process batch tests push (nothing runs them
unless a test does)."""

from __future__ import annotations

from typing import Any

import wurk


class Row(wurk.Job):
    def perform(self, n: Any) -> None:
        pass


class Done:
    def on_success(self, status: Any, options: Any) -> None:
        pass

    def finished(self, status: Any, options: Any) -> None:
        pass

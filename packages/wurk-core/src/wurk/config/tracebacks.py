"""Tracebacks as the person who wrote the job reads them: Wurk's frames folded away.

A job's exception reaches the log through the retry guard, the processor and
every server middleware (core's and each feature's) before ``perform``: a
dozen or more frames of Wurk's own above the two or three of the job's that
say what went wrong. :func:`job_traceback` folds that leading run of Wurk's
frames into one line, so the job's own frames come first. Nothing is lost:
the retry payload's ``error_backtrace`` keeps every frame, in Sidekiq's
format, and ``WURK_DEBUG=1`` logs the whole traceback.

Every run of Wurk's frames that leads to the application's code is folded
the same way (the chain around an application's own middleware, a push the
job made through the application's client middleware). The last run is not:
when the error was raised inside Wurk, its frames say where; and a
traceback that never leaves Wurk is shown whole.
"""

from __future__ import annotations

import functools
import importlib.util
import itertools
import os
import traceback
from importlib import metadata
from pathlib import Path
from typing import Any

#: Where core's own modules live.
CORE_ROOT = str(Path(__file__).resolve().parents[1]) + os.sep


@functools.cache
def wurk_roots() -> tuple[str, ...]:
    """The folders of core and of every installed Wurk plugin package.

    A plugin's package is Wurk's when it is published under the ``wurk``
    entry-point group and named ``wurk_...`` (``wurk_cron``, a third
    party's ``wurk_audit``): an application that publishes a plugin from its
    own package keeps its frames, which may be its jobs.
    """
    roots = [CORE_ROOT]
    for entry in metadata.entry_points(group="wurk"):
        top = entry.value.partition(":")[0].partition(".")[0]
        if not top.startswith("wurk_"):
            continue
        try:
            spec = importlib.util.find_spec(top)
        except (ImportError, ValueError):
            continue
        if spec is not None and spec.submodule_search_locations:
            roots += [str(Path(folder).resolve()) + os.sep for folder in spec.submodule_search_locations]
    return tuple(dict.fromkeys(roots))


def is_wurk_file(filename: str) -> bool:
    """Whether ``filename`` is one of Wurk's own modules."""
    return filename.startswith(wurk_roots()) or os.path.realpath(filename).startswith(wurk_roots())


class _Folded(traceback.StackSummary):
    """A stack that prints each run of Wurk's frames in front of the job's as one line."""

    def __init__(self, parts: list[tuple[int, list[traceback.FrameSummary]]]) -> None:
        super().__init__(frame for _, frames in parts for frame in frames)
        #: The frames shown, each run after the count of Wurk's frames folded in front of it.
        self.parts = parts

    def format(self, **kwargs: Any) -> list[str]:
        lines: list[str] = []
        for index, (hidden, frames) in enumerate(self.parts):
            if hidden:
                lines.append(_fold_line(hidden, leading=index == 0))
            lines += traceback.StackSummary.from_list(frames).format(**kwargs)
        return lines


def _fold_line(hidden: int, *, leading: bool) -> str:
    frames = "1 frame" if hidden == 1 else f"{hidden} frames"
    if leading:
        return f"  [{frames} inside Wurk, from the processor to the job, left out; WURK_DEBUG=1 shows them]\n"
    return f"  [{frames} inside Wurk left out]\n"


def _fold(stack: traceback.StackSummary) -> traceback.StackSummary:
    """``stack`` with every run of Wurk's frames that leads to code of the
    application's (the processor, the middleware chain around the job and
    around the application's own middleware) folded; the last run stays,
    since the error was raised in it."""
    runs = [
        (wurks, list(frames))
        for wurks, frames in itertools.groupby(stack, key=lambda frame: is_wurk_file(frame.filename))
    ]
    if len(runs) < 2:
        return stack  # nothing but the application's, or nothing but Wurk's: shown whole
    parts: list[tuple[int, list[traceback.FrameSummary]]] = []
    hidden = 0
    for position, (wurks, frames) in enumerate(runs):
        if wurks and position < len(runs) - 1:
            hidden = len(frames)
            continue
        parts.append((hidden, frames))
        hidden = 0
    return _Folded(parts)


def job_traceback(exc: BaseException) -> str:
    """The traceback of a failed job, each exception of its chain with its
    leading frames of Wurk's folded into one line (no trailing newline)."""
    shown = traceback.TracebackException.from_exception(exc)
    pending, seen = [shown], set()
    while pending:
        each = pending.pop()
        if id(each) in seen:
            continue
        seen.add(id(each))
        each.stack = _fold(each.stack)
        pending += [chained for chained in (each.__cause__, each.__context__) if chained is not None]
    return "".join(shown.format()).rstrip("\n")

"""Which frames of a failed job's traceback are folded away, and which stay.

The frames are real: code compiled under a file name inside Wurk's own
package runs as Wurk's frames would, so the rules are checked on real
tracebacks without a worker (the worker's own log is checked in
``tests/worker/test_visibility.py``).
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Any

from wurk.config import reporting
from wurk.config.tracebacks import CORE_ROOT, is_wurk_file, job_traceback, wurk_roots
from wurk.server import logger as wlog

#: Stand-ins for the processor and the middleware chain: ``guard`` catches
#: what the chain raises, as the retry guard does; ``call`` is Wurk's code
#: that a job calls and that calls back (a push through client middleware).
WURK_SOURCE = """
def guard(body, depth):
    try:
        chain(body, depth)
    except Exception as exc:
        return exc


def chain(body, depth):
    if depth:
        return chain(body, depth - 1)
    return body()


def call(body):
    return body()
"""


def wurk_functions() -> dict[str, Any]:
    namespace: dict[str, Any] = {}
    exec(compile(WURK_SOURCE, CORE_ROOT + "server/_stand_in.py", "exec"), namespace)
    return namespace


def charge(amount: int) -> float:
    return amount / 0


def perform() -> None:
    charge(5)


def caught(body: Callable[[], object] | None) -> BaseException:
    """What the stand-in guard caught: five of Wurk's frames above ``body``."""
    exc = wurk_functions()["guard"](body, 3)
    assert isinstance(exc, BaseException)
    return exc


def outline(text: str) -> list[str]:
    """The frames (as ``in <function>``) and the fold lines of a traceback."""
    shown = []
    for line in text.splitlines():
        if line.startswith("  File "):
            shown.append("in " + line.rsplit(", in ", 1)[1])
        elif line.startswith("  ["):
            shown.append(line.strip())
    return shown


def test_the_features_packages_are_wurks_and_the_tests_are_not():
    assert CORE_ROOT in wurk_roots()
    assert any(root.rstrip("/").endswith("wurk_batches") for root in wurk_roots())
    assert is_wurk_file(CORE_ROOT + "server/processor.py")
    assert not is_wurk_file(__file__)


def test_the_leading_frames_of_wurks_fold_into_one_line_and_the_jobs_come_first():
    text = job_traceback(caught(perform))
    lines = text.splitlines()
    assert lines[0] == "Traceback (most recent call last):"
    assert lines[1] == "  [5 frames inside Wurk, from the processor to the job, left out; WURK_DEBUG=1 shows them]"
    assert lines[2].endswith(", in perform")
    assert "charge(5)" in lines[3]
    assert lines[-1] == "ZeroDivisionError: division by zero"
    assert "_stand_in.py" not in text


def test_wurks_frames_between_the_applications_fold_too():
    call = wurk_functions()["call"]

    def job() -> None:
        call(perform)  # the job calls into Wurk, which calls back (a push through client middleware)

    assert outline(job_traceback(caught(job))) == [
        "[5 frames inside Wurk, from the processor to the job, left out; WURK_DEBUG=1 shows them]",
        "in job",
        "[1 frame inside Wurk left out]",
        "in perform",
        "in charge",
    ]


def test_the_frames_of_wurks_where_the_error_was_raised_stay():
    call = wurk_functions()["call"]

    def job() -> None:
        call(None)  # Wurk's code raises on what the job gave it

    assert outline(job_traceback(caught(job)))[1:] == ["in job", "in call"]


def test_a_traceback_that_never_leaves_wurk_is_shown_whole():
    text = job_traceback(caught(None))  # Wurk's own code raised: nothing of a job's to show first
    assert "frames inside Wurk" not in text
    assert text.count("_stand_in.py") == 5


def test_every_exception_of_a_chain_is_folded():
    def job() -> None:
        try:
            perform()
        except ZeroDivisionError as exc:
            raise RuntimeError("the charge failed") from exc

    text = job_traceback(caught(job))
    assert "The above exception was the direct cause of the following exception:" in text
    assert text.count("frames inside Wurk") == 1  # only the outer one went through Wurk
    assert text.splitlines()[-1] == "RuntimeError: the charge failed"


def test_the_log_line_shows_the_folded_traceback_and_the_record_keeps_the_exception(monkeypatch):
    monkeypatch.delenv("WURK_DEBUG", raising=False)
    monkeypatch.delenv("SIDEKIQ_DEBUG", raising=False)
    records: list[logging.LogRecord] = []
    handler = logging.Handler()
    handler.emit = records.append  # type: ignore[method-assign]
    logger = logging.getLogger("wurk.test.job_tracebacks")
    logger.propagate, logger.level = False, logging.INFO
    logger.addHandler(handler)
    try:
        import wurk

        config = wurk.Config({"environment": "development"})
        config.logger = logger
        job = {"class": "app.Charge", "jid": "9f8e7d6c5b4a39281706f5e4"}
        reporting.default_error_handler(caught(perform), {"context": reporting.JOB_FAILED, "job": job}, config)
    finally:
        logger.removeHandler(handler)
    (record,) = records
    assert record.exc_info is not None  # a handler of the application's own still gets it all
    assert "_stand_in.py" in logging.Formatter().format(record)
    line = wlog.Pretty().format(record)
    assert "failed: ZeroDivisionError: division by zero\nTraceback (most recent call last):\n  [5 frames" in line
    assert "_stand_in.py" not in line

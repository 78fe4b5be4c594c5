"""The application the wire tests run in real worker processes
(``-r tests.worker.wire_app``): the job classes of the Sidekiq 8.1.7 capture,
under the same wire names and options, failing with the same messages, so that
what a Wurk worker writes can be compared with what Ruby Sidekiq wrote.

``WIRE_SCHEDULER=reliable`` turns on ``config.reliable_scheduler()``, which
promotes with one script; ``reliable-chained`` adds a client middleware that
changes nothing, which makes it promote through the middleware chain instead.
"""

from __future__ import annotations

import json
import os

import wurk


class PassThrough(wurk.ClientMiddleware):
    def call(self, job_class, job, queue, redis_pool, call_next):
        return call_next()


@wurk.configure_server
def tune(config):
    config["poll_interval_average"] = 0.2
    config["heartbeat_interval"] = 0.5
    # One metrics flush, at exit, holding every execution of the test.
    config["metrics_flush_interval"] = 3600
    scheduler = os.environ.get("WIRE_SCHEDULER", "default")
    if scheduler.startswith("reliable"):
        config.reliable_scheduler()
    if scheduler == "reliable-chained":
        config.client_middleware.add(PassThrough)


class OkJob(wurk.Job):
    wire_name = "OkJob"

    def perform(self, *args):
        pass


class FailJob(wurk.Job, retry=2, backtrace=5):
    """Ruby raises ``ArgumentError, "boom from FailJob #{args.inspect}"``;
    ``ValueError`` is Python's nearest, and the message has the same bytes."""

    wire_name = "FailJob"

    def perform(self, *args):
        raise ValueError(f"boom from FailJob {json.dumps(list(args))}")


class NoRetryJob(wurk.Job, retry=False):
    wire_name = "NoRetryJob"

    def perform(self, *args):
        raise RuntimeError("no retry for me")


class DeadNowJob(wurk.Job, retry=0):
    """Ruby raises ``KeyError``; Python's ``str(KeyError(...))`` quotes its
    message, ``LookupError`` (its base) does not, so the message matches."""

    wire_name = "DeadNowJob"

    def perform(self, *args):
        raise LookupError("straight to the morgue")


class CriticalJob(wurk.Job, queue="critical"):
    wire_name = "CriticalJob"

    def perform(self, *args):
        pass


class TaggedJob(wurk.Job, tags=["alpha", "beta"]):
    wire_name = "TaggedJob"

    def perform(self, *args):
        pass

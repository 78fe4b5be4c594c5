"""The application the job-lookup tests run in real worker processes
(``-r tests.worker.lookup_app``): jobs that report what the worker imported.

``TEST_JOB_PACKAGES`` (comma-separated) becomes ``config["job_packages"]``,
set from the app's own configuration, as an application would.
"""

from __future__ import annotations

import json
import os
import sys

import redis

import wurk
from tests.evidence import evidence_url


def evidence() -> redis.Redis:
    return redis.Redis.from_url(evidence_url())


@wurk.configure_server
def tune(config):
    config["poll_interval_average"] = 0.2
    config["heartbeat_interval"] = 0.5
    packages = os.environ.get("TEST_JOB_PACKAGES")
    if packages:
        config["job_packages"] = packages.split(",")


class Modules(wurk.Job):
    """Reports whether each named module is loaded in this worker."""

    def perform(self, *names):
        evidence().rpush("modules", json.dumps({name: name in sys.modules for name in names}))


class DuckJob:
    """Has a ``perform`` but is no job: a payload naming it must not run it."""

    def perform(self, key):
        evidence().hincrby("executions", str(key), 1)

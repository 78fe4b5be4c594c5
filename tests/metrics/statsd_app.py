"""The application the statsd-setting tests run in real ``wurk`` workers and
under ``wurkswarm``.

The ``statsd`` setting comes from the config file the test writes; the app
only counts its own boot, with its pid in the metric's name, so the test can
tell which process's socket each datagram left from.
"""

from __future__ import annotations

import os

import wurk


@wurk.configure_server
def boot(config):
    if os.environ.get("TEST_POLL_INTERVAL"):
        config["poll_interval_average"] = float(os.environ["TEST_POLL_INTERVAL"])
    config.statsd_increment(f"app.booted.{os.getpid()}")


class Fine(wurk.Job):
    def perform(self, n):
        return n


class Broken(wurk.Job, retry=False):
    def perform(self, n):
        raise ValueError(f"job {n} fails on purpose")

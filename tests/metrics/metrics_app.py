"""The application the metrics tests run in real ``wurk`` worker processes.

Timing knobs come from the environment, so a test can make heartbeats,
metrics flushes and the leader's rollup fast.
"""

from __future__ import annotations

import os
import time

import wurk


@wurk.configure_server
def tune(config):
    for option, variable in (
        ("poll_interval_average", "TEST_POLL_INTERVAL"),
        ("heartbeat_interval", "TEST_HEARTBEAT_INTERVAL"),
        ("metrics_flush_interval", "TEST_METRICS_FLUSH_INTERVAL"),
        ("metrics_rollup_interval", "TEST_METRICS_ROLLUP_INTERVAL"),
    ):
        if os.environ.get(variable):
            config[option] = float(os.environ[variable])


class OkJob(wurk.Job):
    def perform(self, *args):
        pass


class FailJob(wurk.Job, retry=False):
    def perform(self, *args):
        raise ValueError("failing on purpose")


class SlowJob(wurk.Job):
    def perform(self, seconds):
        time.sleep(seconds)

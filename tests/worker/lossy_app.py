"""A worker application for lost-reply tests: the worker talks to Redis
through a fault proxy (``REDIS_URL``), and each job records its run in a
ledger reached directly (``LEDGER_URL``), where no reply is ever lost."""

from __future__ import annotations

import os

import redis

import wurk


@wurk.configure_server
def tune(config):
    config["poll_interval_average"] = 0.2


class Ledgered(wurk.Job):
    def perform(self, key):
        redis.Redis.from_url(os.environ["LEDGER_URL"]).hincrby("runs", str(key), 1)

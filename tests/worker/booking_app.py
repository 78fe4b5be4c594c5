"""The application the retry-booking tests run in real worker processes
(``-r tests.worker.booking_app``): a server middleware that changes what
``perform`` sees, the way a decrypting middleware does, and jobs that fail."""

from __future__ import annotations

import json

import redis

import wurk
from tests.evidence import evidence_url


def evidence() -> redis.Redis:
    return redis.Redis.from_url(evidence_url())


class Decrypt(wurk.ServerMiddleware):
    """Replaces the arguments of ``FailsOnce``; mutates ``DiesAtOnce``'s job in
    place, down to its ``retry``. Neither change may reach the retry or dead set."""

    def call(self, job_instance, job, queue, call_next):
        if job["class"].endswith("FailsOnce"):
            job["args"] = ["plaintext"]
        else:
            job["args"].append("plaintext")
            job["retry"] = 5
        job["middleware_note"] = "set by the middleware"
        return call_next()


@wurk.configure_server
def tune(config):
    config["poll_interval_average"] = 0.2
    config["heartbeat_interval"] = 0.5
    config.server_middleware.add(Decrypt)
    config.death_handlers.append(lambda job, exc: evidence().rpush("deaths", json.dumps(job)))


class FailsOnce(wurk.Job, retry=1):
    def perform(self, *args):
        evidence().rpush("seen", json.dumps(args))
        raise ValueError("failed with what the middleware gave it")


class DiesAtOnce(wurk.Job, retry=0):
    @classmethod
    def retries_exhausted(cls, job, exc):
        evidence().rpush("exhausted", json.dumps(job))

    def perform(self, *args):
        evidence().rpush("seen", json.dumps(args))
        raise KeyError("straight to the dead set")

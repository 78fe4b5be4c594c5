"""A child process for the multi-process limiter tests.

``python -m tests.limiter.load SCENARIO THREADS ROUNDS`` runs ``THREADS``
threads of ``ROUNDS`` calls each against the server at ``REDIS_URL`` and
writes what it saw to Redis lists (``admitted``, ``holders``…), so the test
reads every process's results in one place. The ``skew`` scenario prints its
admissions as JSON instead; the tests run it with a shifted ``time.time``.
"""

from __future__ import annotations

import json
import os
import sys
import threading
import time
from collections.abc import Callable

import redis as redis_py

import wurk
from tests.evidence import evidence_url
from wurk_limiter import Limiter, OverLimit


def configure() -> redis_py.Redis:
    config = wurk.default_config()
    config.redis = {"url": os.environ["REDIS_URL"]}
    return redis_py.Redis.from_url(evidence_url())


def concurrent(client: redis_py.Redis) -> Callable[[], None]:
    limiter = Limiter.concurrent("x", 3, wait_timeout=60)

    def call() -> None:
        with limiter.within_limit():
            holders = client.incr("holding")
            client.rpush("holders", holders, client.zcard("lmtr-cs:x"))
            time.sleep(0.01)
            client.decr("holding")
        client.rpush("done", 1)

    return call


def window(client: redis_py.Redis) -> Callable[[], None]:
    limiter = Limiter.window("w", 5, 10, wait_timeout=0)

    def call() -> None:
        try:
            with limiter.within_limit() as handle:
                client.rpush("admitted", repr(handle.admitted_at))
        except OverLimit:
            client.rpush("refused", 1)

    return call


def waiting(build: Callable[[], Limiter]) -> Callable[[redis_py.Redis], Callable[[], None]]:
    def scenario(client: redis_py.Redis) -> Callable[[], None]:
        limiter = build()

        def call() -> None:
            with limiter.within_limit() as handle:
                client.rpush("admitted", repr(handle.admitted_at))

        return call

    return scenario


def points(client: redis_py.Redis) -> Callable[[], None]:
    limiter = Limiter.points("p", 100, 0)

    def call() -> None:
        with limiter.within_limit(estimate=20) as handle:
            client.rpush("admitted", repr(handle.admitted_at))
            time.sleep(0.01)
            handle.points_used(5)  # refunds 15

    return call


SCENARIOS: dict[str, Callable[[redis_py.Redis], Callable[[], None]]] = {
    "concurrent": concurrent,
    "window": window,
    "bucket": waiting(lambda: Limiter.bucket("b", 10, "second", wait_timeout=30)),
    "leaky": waiting(lambda: Limiter.leaky("l", 4, 1, wait_timeout=30)),
    "points": points,
}


def skew(phase: str) -> None:
    """Try every type a few times; print the admissions and this process's clock."""
    configure()
    limiters: dict[str, tuple[Limiter, dict[str, float]]] = {
        "concurrent": (Limiter.concurrent("sc", 2, wait_timeout=0, lock_timeout=600), {}),
        "bucket": (Limiter.bucket("sb", 3, "hour", wait_timeout=0), {}),
        "window": (Limiter.window("sw", 3, 3600, wait_timeout=0), {}),
        "leaky": (Limiter.leaky("sl", 3, "hour", wait_timeout=0), {}),
        "points": (Limiter.points("sp", 3, 0.001), {"estimate": 1}),
    }
    tries = {"first": 2, "second": 3, "third": 1}[phase]
    seen: dict[str, list[bool]] = {}
    for kind, (limiter, kwargs) in limiters.items():
        seen[kind] = []
        for _ in range(tries):
            try:
                # Entered and never left: concurrent slots stay held, as a
                # crashed holder's would, until lock_timeout.
                limiter.within_limit(**kwargs).__enter__()
                seen[kind].append(True)
            except OverLimit:
                seen[kind].append(False)
    print(json.dumps({"admitted": seen, "clock": time.time()}))


def main(argv: list[str]) -> None:
    if argv[0] == "skew":
        skew(argv[1])
        return
    client = configure()
    call = SCENARIOS[argv[0]](client)
    threads, rounds = int(argv[1]), int(argv[2])
    ready = threading.Barrier(threads)

    def worker() -> None:
        ready.wait()
        for _ in range(rounds):
            call()

    running = [threading.Thread(target=worker) for _ in range(threads)]
    for thread in running:
        thread.start()
    for thread in running:
        thread.join()


if __name__ == "__main__":
    main(sys.argv[1:])

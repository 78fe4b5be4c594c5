"""A job module that defines its limiters at module level, as the guides do:
importing it needs no server (``REDIS_URL`` may point nowhere). Run as a
script against a real server, it checks that a forked child registers its
limiters again and that the parent does not register twice."""

from __future__ import annotations

import json
import os
import sys

import redis

import wurk
from tests.evidence import evidence_url
from wurk_limiter import Limiter

SEATS = Limiter.concurrent("lazy-seats", 2, wait_timeout=0)
HOURLY = Limiter.bucket("lazy-hourly", 100, "hour")
SLIDING = Limiter.window("lazy-sliding", 10, 60)
BURSTS = Limiter.leaky("lazy-bursts", 5, "minute")
CREDITS = Limiter.points("lazy-credits", 100, 1)
EVERY = (SEATS, HOURLY, SLIDING, BURSTS, CREDITS)


class Charges(wurk.Job):
    def perform(self) -> None:
        with SEATS.within_limit():
            pass


def listed(client: redis.Redis) -> bool:
    return bool(client.sismember("lmtr-list", SEATS.name)) and bool(client.exists(f"lmtr:{SEATS.name}"))


def forget(client: redis.Redis) -> None:
    client.srem("lmtr-list", SEATS.name)
    client.delete(f"lmtr:{SEATS.name}")


def main() -> int:
    client = redis.Redis.from_url(evidence_url())
    report: dict[str, bool] = {}
    with SEATS.within_limit():
        pass
    report["parent_first_use"] = listed(client)
    forget(client)
    with SEATS.within_limit():
        pass
    report["parent_again"] = listed(client)  # registered once per process: not written again
    pid = os.fork()
    if pid == 0:
        code = 1
        try:
            with SEATS.within_limit():
                pass
            code = 0
        finally:
            os._exit(code)
    _, status = os.waitpid(pid, 0)
    report["child_exit"] = os.waitstatus_to_exitcode(status) == 0
    report["child_registered"] = listed(client)
    print(json.dumps(report))
    return 0


if __name__ == "__main__":
    sys.exit(main())

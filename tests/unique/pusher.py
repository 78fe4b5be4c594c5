"""A separate pushing process: waits at a barrier, then pushes the same
unique job ``count`` times and prints how many pushes returned a jid.

``python -m tests.unique.pusher <count>`` with REDIS_URL set.
"""

from __future__ import annotations

import sys

import redis

from tests.evidence import evidence_url

BARRIER = "pushers-go"


def main() -> None:
    from tests.unique.unique_app import Once  # it enables unique jobs: never in the test process

    count = int(sys.argv[1])
    client = redis.Redis.from_url(evidence_url())
    client.blpop([BARRIER], timeout=30)  # every pusher starts at once
    jids = [Once.perform_async(1) for _ in range(count)]
    print(sum(jid is not None for jid in jids))


if __name__ == "__main__":
    main()

"""A pushing process for the failover tests: pushes ``Recorded`` jobs until told to stop.

Run as ``python -m tests.sentinel.pusher <log file> <stop file>`` with
``REDIS_URL`` set (and ``PUSHER_DURABLE=<timeout_ms>`` for a durable push).
Each push writes one line to the log when it returns, with the time:

* ``ack <jid> <t>``: the push returned, the job is acknowledged;
* ``unconfirmed <jid> <t>``: a durable push that no replica confirmed
  (``NotReplicatedError``): on the primary, not acknowledged as durable;
* ``failed <jid> <t> <error>``: the push raised another error (Redis could
  not be reached): not acknowledged; it may or may not be in Redis.

A failed push is not sent again with the same jid (that would be another
job as far as the count is concerned): the next push is a new job. Pushes
are paced at one every two milliseconds or so, a steady load that leaves the worker
most of the machine.
"""

from __future__ import annotations

import os
import sys
import time

import wurk
from tests.sentinel.failover_app import Recorded
from wurk.client import payload


def main(log_path: str, stop_path: str) -> None:
    config = wurk.Config()
    durable = os.environ.get("PUSHER_DURABLE")
    if durable:
        config["durable_push"] = {"replicas": 1, "timeout_ms": int(durable)}
    client = wurk.Client(config)
    with open(log_path, "a", buffering=1, encoding="utf-8") as log:
        while not os.path.exists(stop_path):
            jid = payload.new_jid()
            try:
                client.push({"class": Recorded, "args": [0], "queue": "live", "jid": jid})
                log.write(f"ack {jid} {time.time():.6f}\n")
            except wurk.NotReplicatedError:
                log.write(f"unconfirmed {jid} {time.time():.6f}\n")
            except Exception as exc:
                log.write(f"failed {jid} {time.time():.6f} {type(exc).__name__}\n")
                time.sleep(0.05)
            time.sleep(0.002)
    config.reset_redis_pools()


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2])

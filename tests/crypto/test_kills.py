"""An encrypted job across a SIGKILL: its worker killed while ``perform``
holds the plaintext, then a new worker that recovers it at boot.

The decryption happens in the worker's memory only (docs/encryption.md):
what the killed worker leaves behind in Redis, its private list and the
``<identity>:work`` entry of the running job, holds the envelope as pushed,
byte for byte, and never the plaintext; the recovered job runs decrypted with
the same arguments, once more and only once more.
"""

from __future__ import annotations

import json

import pytest

import wurk_crypto
from tests.crypto.keys import fingerprint
from tests.crypto.test_crypto_workers import CARD, SECRETS, every_value, push
from tests.helpers import at_rest, claimed_jobs, wait_for

pytestmark = pytest.mark.timeout(120)

# The application's names, not imported: importing it would enable encryption
# in this process, for every later test.
HOLD = "hold"
STARTED = "started"


def plaintext_in_redis(redis) -> list[bytes]:
    stored = b"\n".join(every_value(redis))
    return [secret for secret in SECRETS if secret in stored]


def running_entries(redis) -> list[dict]:
    """The ``<identity>:work`` entries the heartbeats wrote: one per running job."""
    return [json.loads(value) for key in redis.scan_iter(match="*:work") for value in redis.hvals(key)]


def test_an_encrypted_job_killed_mid_perform_runs_decrypted_with_its_arguments_after_a_restart(
    crypto, redis, crypto_workers
):
    jid = push("HeldSecret", 7, CARD, encrypt=True)
    [pushed] = redis.lrange("queue:default", 0, -1)
    assert wurk_crypto.is_envelope(json.loads(pushed)["args"][-1])
    redis.sadd(HOLD, jid)
    first = crypto_workers.start("-c", "2")
    seen = f"{jid}:7:{fingerprint(CARD)}"
    wait_for(lambda: redis.lrange(STARTED, 0, -1) == [seen.encode()], timeout=30)
    wait_for(lambda: [entry["payload"] for entry in running_entries(redis)] == [pushed.decode()], timeout=30)
    first.kill()

    # What the dead worker left: the job as pushed, in its private list and in
    # the entry that shows it running; the plaintext nowhere.
    assert claimed_jobs(redis) == [pushed]
    assert [entry["payload"] for entry in running_entries(redis)] == [pushed.decode()]
    assert plaintext_in_redis(redis) == []

    redis.srem(HOLD, jid)
    second = crypto_workers.start("-c", "2")
    wait_for(lambda: redis.lrange("ran", 0, -1) == [f"7:{fingerprint(CARD)}".encode()], timeout=30)
    wait_for(lambda: at_rest(redis, "default"), timeout=30)
    second.stop()
    assert second.wait() == 0

    # No worker is left and nothing waits anywhere: these runs are final.
    assert at_rest(redis, "default")
    assert redis.lrange(STARTED, 0, -1) == [seen.encode(), seen.encode()], "decrypted alike in both runs"
    assert redis.lrange("ran", 0, -1) == [f"7:{fingerprint(CARD)}".encode()]
    assert (redis.zcard("retry"), redis.zcard("dead"), redis.llen("died")) == (0, 0, 0)
    assert b"jobs.encryption_error" not in redis.lrange("metrics", 0, -1)
    assert plaintext_in_redis(redis) == []

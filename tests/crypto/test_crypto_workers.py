"""Encrypted jobs on a real ``wurk`` worker: Redis never holds the plaintext
(after runs, retries and a death), an argument that cannot be decrypted is
killed with the documented fields, and key versions rotate in flight."""

from __future__ import annotations

import base64
import json
import time
from typing import Any

import pytest

import wurk
import wurk_crypto
from tests.crypto.keys import fingerprint, pusher_resolver
from tests.helpers import wait_for
from wurk import api

APP = "tests.crypto.crypto_app"
CARD = {"number": "4111 1111 1111 1111", "holder": "Ada Lovelace"}
SECRETS = [b"4111 1111 1111 1111", b"4111111111111111", b"Ada Lovelace", b"s3cr3t-token-XYZ"]


def push(job: str, *args: Any, **options: Any) -> str:
    jid = wurk.Client(wurk.default_config()).push({"class": f"{APP}.{job}", "args": list(args), **options})
    assert jid is not None
    return jid


def every_value(redis) -> list[bytes]:
    """Every byte string stored under every key, whatever its type."""
    values: list[bytes] = []
    for key in redis.scan_iter(count=1000):
        kind = redis.type(key)
        values.append(key)
        if kind == b"string":
            values.append(redis.get(key))
        elif kind == b"list":
            values.extend(redis.lrange(key, 0, -1))
        elif kind == b"set":
            values.extend(redis.smembers(key))
        elif kind == b"zset":
            values.extend(redis.zrange(key, 0, -1))
        elif kind == b"hash":
            for field, value in redis.hgetall(key).items():
                values.extend([field, value])
        elif kind == b"stream":
            for _id, fields in redis.xrange(key):
                values.extend(b"%s=%s" % pair for pair in fields.items())
    return values


def retried_again(redis) -> bool:
    members = redis.zrange("retry", 0, -1)
    return len(members) == 1 and json.loads(members[0]).get("retry_count") == 1


def only(redis, name: str) -> dict[str, Any]:
    [member] = redis.zrange(name, 0, -1)
    return json.loads(member)


@pytest.mark.timeout(120)
def test_redis_never_holds_the_plaintext_through_runs_retries_and_a_death(crypto, redis, crypto_workers):
    push("Secret", 1, CARD, encrypt=True)
    retried = push("Declined", 2, "s3cr3t-token-XYZ", encrypt=True, retry=3)
    dead = push("DeclinedForGood", 3, CARD, encrypt=True, retry=0)
    push("Secret", 4, CARD, encrypt=True, at=time.time() + 3600)
    worker = crypto_workers.start("-c", "3")
    wait_for(lambda: redis.zcard("retry") == 1 and redis.zcard("dead") == 1 and redis.llen("ran") == 3, timeout=30)
    # Promote the retry now: it goes back through the client chain (not
    # encrypted twice), runs decrypted and fails again.
    [(member, _)] = redis.zrange("retry", 0, -1, withscores=True)
    redis.zadd("retry", {member: 1.0})
    wait_for(lambda: redis.llen("ran") == 4 and retried_again(redis), timeout=30)
    worker.stop()

    ran = sorted(entry.decode() for entry in redis.lrange("ran", 0, -1))
    token = fingerprint("s3cr3t-token-XYZ")
    assert ran == sorted([f"1:{fingerprint(CARD)}", f"2:{token}", f"2:{token}", f"3:{fingerprint(CARD)}"])
    retry_entry, dead_entry = only(redis, "retry"), only(redis, "dead")
    assert retry_entry["jid"] == retried
    assert dead_entry["jid"] == dead
    for entry in (retry_entry, dead_entry):
        assert entry["error_class"] == "ValueError"
        assert wurk_crypto.is_envelope(entry["args"][-1])
    assert retry_entry["args"][0] == 2
    assert redis.lrange("died", 0, -1) == [dead.encode()]
    assert [e.display_args for e in api.DeadSet()] == [[3, "[encrypted data]"]]
    stored = b"\n".join(every_value(redis))
    for secret in SECRETS:
        assert secret not in stored, secret


def tamper(redis, mutate) -> dict[str, Any]:
    """Change the envelope of the job pushed last (LPUSH: the list's head) in
    place; the job as now stored."""
    job = json.loads(redis.lindex("queue:default", 0))
    mutate(job["args"][-1])
    redis.lset("queue:default", 0, json.dumps(job))
    return job


def flip_one_ciphertext_byte(envelope: dict[str, Any]) -> None:
    ciphertext = bytearray(base64.b64decode(envelope["ct"]))
    ciphertext[len(ciphertext) // 2] ^= 0x01
    envelope["ct"] = base64.b64encode(bytes(ciphertext)).decode()


@pytest.mark.timeout(120)
def test_one_tampered_ciphertext_byte_sends_the_job_to_dead_with_the_documented_fields(crypto, redis, crypto_workers):
    jid = push("Secret", 1, CARD, encrypt=True)
    stored = tamper(redis, flip_one_ciphertext_byte)
    worker = crypto_workers.start("-c", "1")
    wait_for(lambda: redis.zcard("dead") == 1, timeout=30)
    wait_for(lambda: redis.lrange("metrics", 0, -1).count(b"jobs.encryption_error") == 1, timeout=10)
    worker.stop()
    entry = only(redis, "dead")
    assert entry["jid"] == jid
    assert entry["error_class"] == "DecryptionError"
    assert entry["error_message"].startswith("encryption_error: authentication failed")
    assert entry["args"] == stored["args"]  # untouched: the tampered envelope as it was
    assert isinstance(entry["failed_at"], int)
    assert redis.lrange("died", 0, -1) == [jid.encode()]  # death handlers fired
    assert redis.llen("ran") == 0  # perform never ran
    assert redis.zcard("retry") == 0
    assert list(redis.keys("queue:*")) == []  # acknowledged, nothing left in flight


@pytest.mark.timeout(120)
def test_missing_keys_and_malformed_envelopes_die_but_an_outage_retries(config, redis, crypto_workers):
    wurk_crypto.enable(3, pusher_resolver)  # a version the worker does not hold
    try:
        missing = push("Secret", 1, "x", encrypt=True)
        wurk_crypto.enable(2, pusher_resolver)
        malformed = push("Secret", 2, "y", encrypt=True)
        tamper(redis, lambda envelope: envelope.update(tag="dG9vIHNob3J0"))
        outage = push("Secret", 3, "z", encrypt=True, retry=3)
        tamper(redis, lambda envelope: envelope.update(v="outage"))
    finally:
        wurk_crypto.disable()
    worker = crypto_workers.start("-c", "2")
    wait_for(lambda: redis.zcard("dead") == 2 and redis.zcard("retry") == 1, timeout=30)
    worker.stop()
    dead = {entry["jid"]: entry for entry in (json.loads(m) for m in redis.zrange("dead", 0, -1))}
    assert dead[missing]["error_class"] == "DecryptionError"
    assert dead[missing]["error_message"] == "encryption_error: no encryption key for version 3 (KeyError(3))"
    assert dead[malformed]["error_message"] == "encryption_error: malformed envelope: 'tag' must be 16 bytes, got 9"
    retry = only(redis, "retry")
    assert retry["jid"] == outage
    assert retry["error_class"] == "ConnectionError"
    assert wurk_crypto.is_envelope(retry["args"][-1])
    assert sorted(redis.lrange("died", 0, -1)) == sorted([missing.encode(), malformed.encode()])
    assert redis.llen("ran") == 0


@pytest.mark.timeout(120)
def test_old_and_new_key_versions_run_side_by_side_during_a_rotation(config, redis, crypto_workers):
    worker = crypto_workers.start("-c", "2")
    wurk_crypto.enable(1, pusher_resolver)
    try:
        push("Secret", 1, "before the rotation", encrypt=True)
        wurk_crypto.enable(2, pusher_resolver)  # the rotation: new pushes use version 2
        push("Secret", 2, "after the rotation", encrypt=True)
    finally:
        wurk_crypto.disable()
    wait_for(lambda: redis.llen("ran") == 2, timeout=30)
    worker.stop()
    assert sorted(redis.lrange("ran", 0, -1)) == sorted(
        [f"1:{fingerprint('before the rotation')}".encode(), f"2:{fingerprint('after the rotation')}".encode()]
    )
    assert redis.zcard("dead") == 0
    assert redis.zcard("retry") == 0


@pytest.mark.timeout(120)
def test_an_async_job_sees_its_plaintext_and_redis_holds_it_sealed(crypto, redis, crypto_workers):
    push("AsyncSecret", 1, 3, CARD, encrypt=True)
    push("AsyncSecret", 2, 3, "s3cr3t-token-XYZ", encrypt=True)
    retried = push("AsyncDeclined", 3, 3, CARD, encrypt=True, retry=3)
    # One thread: the three go on only if they await together on the loop.
    worker = crypto_workers.start("-c", "1")
    wait_for(lambda: redis.llen("ran") == 3 and redis.zcard("retry") == 1, timeout=30)
    worker.stop()
    ran = sorted(entry.decode() for entry in redis.lrange("ran", 0, -1))
    card, token = fingerprint(CARD), fingerprint("s3cr3t-token-XYZ")
    assert ran == [f"1:{card}:wurk-asyncio", f"2:{token}:wurk-asyncio", f"3:{card}:wurk-asyncio"]
    entry = only(redis, "retry")
    assert (entry["jid"], entry["error_class"], entry["args"][:2]) == (retried, "ValueError", [3, 3])
    assert wurk_crypto.is_envelope(entry["args"][-1])  # booked sealed, not with the plaintext it ran with
    stored = b"\n".join(every_value(redis))
    for secret in SECRETS:
        assert secret not in stored, secret


@pytest.mark.timeout(120)
def test_an_async_job_that_cannot_be_decrypted_is_killed_without_running(crypto, redis, crypto_workers):
    jid = push("AsyncSecret", 1, 1, CARD, encrypt=True)
    stored = tamper(redis, flip_one_ciphertext_byte)
    worker = crypto_workers.start("-c", "1")
    wait_for(lambda: redis.zcard("dead") == 1, timeout=30)
    wait_for(lambda: redis.lrange("metrics", 0, -1).count(b"jobs.encryption_error") == 1, timeout=10)
    worker.stop()
    entry = only(redis, "dead")
    assert (entry["jid"], entry["class"], entry["error_class"]) == (
        jid,
        "tests.crypto.crypto_app.AsyncSecret",
        "DecryptionError",
    )
    assert entry["error_message"].startswith("encryption_error: authentication failed")
    assert entry["args"] == stored["args"]  # untouched: the tampered envelope as it was
    assert redis.lrange("died", 0, -1) == [jid.encode()]
    assert redis.lrange("metrics", 0, -1).count(b"jobs.encryption_error") == 1
    assert redis.llen("ran") == 0  # perform never ran
    assert redis.zcard("retry") == 0
    assert list(redis.keys("queue:*")) == []  # acknowledged, nothing left in flight


@pytest.mark.timeout(120)
def test_while_an_async_job_awaits_redis_shows_it_running_sealed(crypto, redis, crypto_workers):
    jid = push("AsyncHeldSecret", 7, CARD, encrypt=True)
    [pushed] = redis.lrange("queue:default", 0, -1)
    redis.sadd("hold", jid)
    worker = crypto_workers.start("-c", "1")
    wait_for(lambda: redis.lrange("started", 0, -1) == [f"{jid}:7:{fingerprint(CARD)}".encode()], timeout=30)

    def running() -> list[str]:
        return [json.loads(value)["payload"] for key in redis.scan_iter(match="*:work") for value in redis.hvals(key)]

    # Its row on the Busy page and its claim hold the envelope as pushed.
    wait_for(lambda: running() == [pushed.decode()], timeout=30)
    assert [payload for key in redis.scan_iter(match="queue:default|*") for payload in redis.lrange(key, 0, -1)] == [
        pushed
    ]
    stored = b"\n".join(every_value(redis))
    for secret in SECRETS:
        assert secret not in stored, secret
    redis.srem("hold", jid)
    wait_for(lambda: redis.lrange("ran", 0, -1) == [f"7:{fingerprint(CARD)}".encode()], timeout=30)
    worker.stop()

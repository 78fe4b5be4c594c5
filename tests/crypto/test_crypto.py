"""Encrypted arguments in one process, on a real server: the envelope, key
problems at push time, caching, decryption and what displays show."""

from __future__ import annotations

import base64
import json
import time
from typing import Any, ClassVar

import pytest
from cryptography.hazmat.primitives.ciphers.aead import AESGCM

import wurk
import wurk_crypto
from tests.crypto.keys import KEYS, pusher_resolver
from wurk import api, testing
from wurk.testing.running import run_inline
from wurk_crypto import DecryptionError, EncryptClient, EncryptionKeyError, EncryptionNotEnabledError

CARD = {"number": "4111 1111 1111 1111", "cvc": "737"}
PLAINTEXT = b"4111 1111 1111 1111"


class ChargeCard(wurk.Job, encrypt=True):
    received: ClassVar[list[Any]] = []

    def perform(self, account: int, card: Any) -> None:
        ChargeCard.received.append((account, card))


class Plain(wurk.Job):
    def perform(self, *args: Any) -> None:
        pass


@pytest.fixture(autouse=True)
def fresh_records():
    ChargeCard.received = []


def queued(redis, queue: str = "default") -> list[dict[str, Any]]:
    """The queue's payloads in push order (LPUSH puts the newest first)."""
    return [json.loads(member) for member in reversed(redis.lrange(f"queue:{queue}", 0, -1))]


def open_by_hand(envelope: dict[str, Any]) -> Any:
    """Decrypt with the documented format only, not the plugin's code."""
    iv, ct, tag = (base64.b64decode(envelope[field]) for field in ("iv", "ct", "tag"))
    return json.loads(AESGCM(KEYS[envelope["v"]]).decrypt(iv, ct + tag, None))


# -- enabling ------------------------------------------------------------------------


def test_an_encrypt_job_is_refused_until_encryption_is_enabled(config, redis):
    assert not wurk_crypto.enabled()
    with pytest.raises(EncryptionNotEnabledError, match=r"job .*ChargeCard sets encrypt, but wurk_crypto.enable"):
        ChargeCard.perform_async(1, CARD)
    with pytest.raises(EncryptionNotEnabledError):
        Plain.set(encrypt=True).perform_bulk([[1, "x"]])
    with testing.fake(), pytest.raises(EncryptionNotEnabledError):
        ChargeCard.perform_async(1, CARD)
    assert ChargeCard.jobs == []
    assert redis.dbsize() == 0
    assert not config.client_middleware.exists(EncryptClient)  # nothing installed, nothing paid


def test_enable_installs_once_and_disable_refuses_again(config, redis):
    wurk_crypto.enable(1, pusher_resolver)
    wurk_crypto.enable(2, pusher_resolver)
    try:
        assert wurk_crypto.enabled()
        assert [e.klass for e in config.client_middleware].count(EncryptClient) == 1
        assert [e.klass for e in config.server_middleware].count(wurk_crypto.DecryptServer) == 1
        assert wurk.Config().client_middleware.exists(EncryptClient)  # later configurations too
        assert not wurk.Config(disabled_plugins=["crypto"]).client_middleware.exists(EncryptClient)
    finally:
        wurk_crypto.disable()
    with pytest.raises(EncryptionNotEnabledError):
        ChargeCard.perform_async(1, CARD)
    assert redis.dbsize() == 0


@pytest.mark.parametrize(
    ("version", "resolver"), [(True, pusher_resolver), (1.5, pusher_resolver), (1, b"not callable")]
)
def test_enable_refuses_a_bad_version_or_resolver(version, resolver):
    with pytest.raises(TypeError):
        wurk_crypto.enable(version, resolver)
    assert not wurk_crypto.enabled()


# -- the envelope ------------------------------------------------------------------------


def test_the_last_argument_becomes_an_aes_gcm_envelope(crypto, redis):
    ChargeCard.perform_async(42, CARD)
    ChargeCard.perform_async(42, CARD)
    first, second = queued(redis)
    for job in (first, second):
        account, envelope = job["args"]
        assert account == 42  # earlier arguments stay readable
        assert set(envelope) == {"__wurk_enc__", "v", "iv", "ct", "tag"}
        assert envelope["__wurk_enc__"] is True
        assert envelope["v"] == 2
        assert len(base64.b64decode(envelope["iv"])) == 12
        assert len(base64.b64decode(envelope["tag"])) == 16
        assert open_by_hand(envelope) == CARD
    assert first["args"][1]["iv"] != second["args"][1]["iv"]  # a fresh IV every push
    assert first["args"][1]["ct"] != second["args"][1]["ct"]
    assert PLAINTEXT not in b"".join(redis.lrange("queue:default", 0, -1))


def test_empty_args_and_existing_envelopes_are_left_alone(crypto, redis):
    Plain.set(encrypt=True).perform_async()
    sealed = wurk_crypto.envelope.seal("already", 1, KEYS[1])
    Plain.set(encrypt=True).perform_async("id", sealed)
    Plain.set(encrypt=False).perform_async("not secret")
    empty, kept, clear = queued(redis)
    assert empty["args"] == []
    assert kept["args"] == ["id", sealed]
    assert clear["args"] == ["not secret"]


def test_scheduled_and_bulk_pushes_are_encrypted(crypto, redis):
    ChargeCard.perform_in(3600, 1, CARD)
    ChargeCard.perform_bulk([[2, CARD], [3, "plain string secret"]])
    [scheduled] = [json.loads(m) for m in redis.zrange("schedule", 0, -1)]
    assert open_by_hand(scheduled["args"][1]) == CARD
    assert [open_by_hand(job["args"][1]) for job in queued(redis)] == [CARD, "plain string secret"]
    everything = b"".join(redis.lrange("queue:default", 0, -1)) + b"".join(redis.zrange("schedule", 0, -1))
    assert PLAINTEXT not in everything
    assert b"plain string secret" not in everything


# -- key problems at push time -----------------------------------------------------------


def none_resolver(version: object) -> bytes | None:
    return None


def short_resolver(version: object) -> bytes:
    return b"k" * 31


def index_resolver(version: object) -> bytes:
    return [b"k" * 32][5]


def outage_resolver(version: object) -> bytes:
    raise ConnectionError("key service away")


@pytest.mark.parametrize(
    ("resolver", "message"),
    [
        (none_resolver, "no encryption key for version 7 (the resolver returned None)"),
        (short_resolver, "must be 32 raw bytes, got 31 bytes"),
        (lambda version: {}[version], "no encryption key for version 7 (KeyError(7))"),
        (index_resolver, "no encryption key for version 7 (IndexError"),
    ],
)
def test_a_key_problem_at_push_raises_and_enqueues_nothing(config, redis, resolver, message):
    wurk_crypto.enable(7, resolver)
    try:
        with pytest.raises(EncryptionKeyError) as refused:
            ChargeCard.perform_async(1, CARD)
        assert message in str(refused.value)
        with pytest.raises(EncryptionKeyError):
            ChargeCard.perform_in(60, 1, CARD)
    finally:
        wurk_crypto.disable()
    assert redis.dbsize() == 0


def test_another_resolver_error_at_push_raises_as_it_is(config, redis):
    wurk_crypto.enable(7, outage_resolver)
    try:
        with pytest.raises(ConnectionError, match="key service away"):
            ChargeCard.perform_async(1, CARD)
    finally:
        wurk_crypto.disable()
    assert redis.dbsize() == 0


def test_keys_are_asked_once_per_version_until_enabled_again(config, redis):
    asked: list[object] = []

    def counting(version: object) -> bytes:
        asked.append(version)
        return KEYS[version]

    wurk_crypto.enable(1, counting)
    try:
        for n in range(5):
            ChargeCard.perform_async(n, CARD)
        assert asked == [1]
        wurk_crypto.enable(1, counting)  # a new enable forgets the cache
        ChargeCard.perform_async(9, CARD)
        assert asked == [1, 1]
    finally:
        wurk_crypto.disable()


# -- decryption -------------------------------------------------------------------------


def test_perform_gets_the_plaintext(crypto):
    ChargeCard.perform_inline(5, CARD)
    assert ChargeCard.received == [(5, CARD)]


def test_old_and_new_key_versions_decrypt_side_by_side(crypto, redis):
    wurk_crypto.enable(1, pusher_resolver)
    ChargeCard.perform_async(1, "old")
    wurk_crypto.enable(2, pusher_resolver)  # rotated: new pushes use version 2
    ChargeCard.perform_async(2, "new")
    jobs = queued(redis)
    assert [job["args"][1]["v"] for job in jobs] == [1, 2]
    for job in jobs:
        run_inline(ChargeCard, job, crypto.server_middleware)
    assert sorted(ChargeCard.received) == [(1, "old"), (2, "new")]


def test_an_undecryptable_argument_raises_decryption_error_in_process(crypto, redis):
    ChargeCard.perform_async(1, CARD)
    [job] = queued(redis)
    envelope = job["args"][1]
    tampered = base64.b64decode(envelope["ct"])
    envelope["ct"] = base64.b64encode(bytes([tampered[0] ^ 1]) + tampered[1:]).decode()
    with pytest.raises(DecryptionError, match="authentication failed"):
        run_inline(ChargeCard, job, crypto.server_middleware)
    envelope["iv"] = base64.b64encode(b"short").decode()
    with pytest.raises(DecryptionError, match="malformed envelope: 'iv' must be 12 bytes, got 5"):
        run_inline(ChargeCard, job, crypto.server_middleware)
    job["args"][1] = "not an envelope"
    with pytest.raises(DecryptionError, match="malformed envelope"):
        run_inline(ChargeCard, job, crypto.server_middleware)
    assert ChargeCard.received == []


# -- display ----------------------------------------------------------------------------


def test_every_listing_shows_the_envelope_as_encrypted_data(crypto, redis):
    ChargeCard.perform_async(1, CARD)
    ChargeCard.perform_in(3600, 2, CARD)
    [job] = queued(redis)
    stored = json.dumps({**job, "encrypt": None})  # the flag gone: the shape still masks it
    redis.zadd("retry", {stored: time.time() + 60})
    redis.zadd("dead", {json.dumps(job): time.time()})
    shown = [
        *(r.display_args for r in api.Queue("default")),
        *(e.display_args for e in api.ScheduledSet()),
        *(e.display_args for e in api.RetrySet()),
        *(e.display_args for e in api.DeadSet()),
    ]
    assert shown == [[1, "[encrypted data]"], [2, "[encrypted data]"], [1, "[encrypted data]"], [1, "[encrypted data]"]]

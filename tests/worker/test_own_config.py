"""A worker runs on its own configuration, never on the process default.

The embedded worker here runs on a configuration pointed at the test server
(A) while the process default points at a second, private server (B). Every
feature that used to reach for the process default on a worker's path (a
push from inside a job, batch callbacks, cron fires, unique locks,
encryption, an iterable job's state) must land on A; B must end each test
with no key and without having received a single connection.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Iterator
from datetime import UTC, datetime
from typing import Any

import pytest
import redis as redis_py

import wurk
import wurk_crypto
import wurk_unique
from tests.crypto.keys import pusher_resolver
from tests.helpers import new_server, wait_for
from wurk import testing
from wurk.plugins.manager import DISABLE_ENV
from wurk.redis.servers import ServerProcess
from wurk_batches import Batch
from wurk_crypto import envelope

#: Where the jobs below leave what they saw, on the Redis of the worker running them.
EVIDENCE = "evidence"
#: A queue the worker does not serve, to look at a payload as it was pushed.
PARKED = "parked"
#: 2025-06-01 12:03:00.1 UTC: a cron loop of every minute is due on the first tick.
CRON_NOW = datetime(2025, 6, 1, 12, 3, 0, 100_000, tzinfo=UTC).timestamp()


#: A plain client to A, set by ``start_worker``: what the jobs saw is recorded
#: apart from the paths under test, so a regression in one of them shows as
#: its own missing effect on A and as traffic on B.
witness: list[redis_py.Redis] = []


def note(field: str, value: Any) -> None:
    witness[0].hset(EVIDENCE, field, json.dumps(value))


class Pushed(wurk.Job):
    def perform(self, origin: str) -> None:
        note(f"pushed:{origin}", self.jid)


class Pusher(wurk.Job):
    """Pushes from inside a running job, through every client path."""

    def perform(self) -> None:
        jids = [
            Pushed.perform_async("perform_async"),
            Pushed.perform_bulk([["perform_bulk"]])[0],
            wurk.Client().push({"class": Pushed, "args": ["client"]}),
        ]
        capsule = self.capsule
        note(
            "pusher",
            {
                "jids": jids,
                "url": self.config.redis["url"],
                "same": self.config is wurk.current_config() and capsule is not None and capsule.config is self.config,
                "capsule": capsule.name if capsule is not None else None,
            },
        )


class Child(wurk.Job):
    def perform(self, n: int) -> None:
        note(f"child:{n}", n)


class Finished:
    """The batch's success callback."""

    def on_success(self, status: Any, options: dict[str, Any]) -> None:
        note("callback", {"total": status.total, **options})


class BatchStarter(wurk.Job):
    """Opens a batch from inside a job: the batch, its jobs and its callback
    all belong to the worker's Redis."""

    def perform(self) -> None:
        batch = Batch()
        batch.on("success", Finished, {"seen": "yes"})
        with batch.jobs():
            Child.perform_async(1)
            Child.perform_async(2)
        note("bid", batch.bid)


class Tick(wurk.Job):
    def perform(self, label: str) -> None:
        note(f"tick:{label}", self.jid)


class Once(wurk.Job, unique_for=3600):
    def perform(self, n: int) -> None:
        # Held until the pusher has tried its duplicate: a first run that finished earlier would
        # release the lock and let the duplicate in, which is not what this test is about.
        deadline = time.monotonic() + 30
        while witness[0].hget(EVIDENCE, "unique") is None and time.monotonic() < deadline:
            time.sleep(0.01)
        note(f"once:{n}", self.jid)


class UniquePusher(wurk.Job):
    def perform(self) -> None:
        first = Once.perform_async(1)
        duplicate = Once.perform_async(1)
        locks = [key.decode() for key in witness[0].keys("unique:*")]
        note("unique", {"first": first, "duplicate": duplicate, "locks": locks})


class Secret(wurk.Job, encrypt=True):
    def perform(self, label: str, secret: dict[str, Any]) -> None:
        note(f"secret:{label}", secret)


class SecretPusher(wurk.Job):
    def perform(self) -> None:
        Secret.perform_async("ran", {"card": "4111"})
        Secret.set(queue=PARKED).perform_async("parked", {"card": "5500"})
        note("secret-pushed", True)


class Walk(wurk.IterableJob):
    STATE_FLUSH_INTERVAL = 0.0  # a checkpoint after every item

    def build_enumerator(self, *args: Any, cursor: Any) -> Any:
        return ((n, n) for n in range(cursor or 0, 3))

    def each_iteration(self, item: int, *args: Any) -> None:
        if item == 2:  # items 0 and 1 were checkpointed: the state is on this worker's Redis
            state = witness[0].hgetall(self.iteration_key)
            note("walk-state", {key.decode(): value.decode() for key, value in state.items()})


class Elsewhere:
    """The process default's server, B, watched from before the test."""

    def __init__(self, server: ServerProcess) -> None:
        self.server = server
        self.client = redis_py.Redis.from_url(server.url)
        self.client.flushall()
        # From here on, any connection to B counts (this client's own is open).
        self.client.config_resetstat()

    def untouched(self) -> bool:
        """True when B holds no key and nobody but this watcher connected."""
        info = self.client.info()
        keyspace = {name: value for name, value in info.items() if name.startswith("db")}
        assert keyspace == {}, f"keys were written to the process default's server: {keyspace}"
        assert info["total_connections_received"] == 0, "something connected to the process default's server"
        return True


@pytest.fixture(scope="module")
def other_server() -> Iterator[ServerProcess]:
    server = new_server().start()
    yield server
    server.stop()


@pytest.fixture
def elsewhere(other_server: ServerProcess, monkeypatch: pytest.MonkeyPatch) -> Iterator[Elsewhere]:
    """The process default pointed at B for the test, restored after it."""
    monkeypatch.delenv(DISABLE_ENV, raising=False)
    watcher = Elsewhere(other_server)
    default = wurk.Config()
    default.redis = {"url": other_server.url}
    previous = wurk.set_default_config(default)
    testing.queues.clear_all()
    try:
        yield watcher
    finally:
        wurk.set_default_config(previous)
        default.reset_redis_pools()
        watcher.client.close()
        testing.disable()


@pytest.fixture
def start_worker(redis_url: str, redis: redis_py.Redis, elsewhere: Elsewhere) -> Iterator[Callable[..., Any]]:
    """Start an embedded worker on its own configuration, pointed at A. A
    test stops it before looking at B: then nothing can reach B any more."""
    started: list[Any] = []
    configs: list[wurk.Config] = []
    witness[:] = [redis]

    def start(configure: Callable[[wurk.Config], object] | None = None) -> Any:
        config = wurk.Config()
        config.redis = {"url": redis_url}
        configs.append(config)

        def setup(cfg: wurk.Config) -> None:
            cfg["queues"] = ["default"]
            cfg["heartbeat_interval"] = 0.3
            cfg["poll_interval_average"] = 0.2
            if configure is not None:
                configure(cfg)

        instance = wurk.configure_embed(setup, config=config)
        started.append(instance)
        instance.run()
        return instance

    yield start
    for instance in started:
        instance.stop()
    for config in configs:
        config.reset_redis_pools()
    witness.clear()


def evidence(redis: redis_py.Redis, field: str) -> Any:
    raw = redis.hget(EVIDENCE, field)
    return None if raw is None else json.loads(raw)


def push(config: wurk.Config, job_class: type, *args: Any) -> str | None:
    return wurk.Client(config).push({"class": job_class, "args": list(args)})


def test_a_push_from_inside_a_running_job_goes_to_its_worker(start_worker, redis, elsewhere):
    worker = start_worker()
    config = worker.config
    push(config, Pusher)
    seen = wait_for(lambda: evidence(redis, "pusher"))
    assert seen["url"] == config.redis["url"]
    assert seen["same"] is True
    assert seen["capsule"] == "default"
    for origin in ("perform_async", "perform_bulk", "client"):
        assert wait_for(lambda origin=origin: evidence(redis, f"pushed:{origin}")) in seen["jids"]
    worker.stop()
    assert elsewhere.untouched()


def test_a_batch_opened_in_a_job_and_its_callback_stay_on_the_worker(start_worker, redis, elsewhere):
    worker = start_worker()
    config = worker.config
    push(config, BatchStarter)
    assert wait_for(lambda: evidence(redis, "callback"), timeout=20) == {"total": 2, "seen": "yes"}
    assert evidence(redis, "child:1") == 1
    assert evidence(redis, "child:2") == 2
    assert redis.exists(f"b-{evidence(redis, 'bid')}")
    worker.stop()
    assert elsewhere.untouched()


def test_a_cron_fire_lands_on_the_worker(start_worker, redis, elsewhere):
    def periodic(config: wurk.Config) -> None:
        config["cron_tick_interval"] = 0.2
        config["cron_clock"] = lambda: CRON_NOW

        @config.periodic
        def loops(mgr: Any) -> None:
            mgr.register("* * * * *", Tick, args=["every-minute"])

    worker = start_worker(periodic)
    jid = wait_for(lambda: evidence(redis, "tick:every-minute"), timeout=20)
    [lid] = [member.decode() for member in redis.smembers("periodic")]
    # The fire is recorded after its push returns, so its job may run first.
    [row] = wait_for(lambda: redis.lrange(f"loop-history:{lid}", 0, -1))
    assert jid in row.decode()
    worker.stop()
    assert elsewhere.untouched()


@pytest.fixture
def unique_on() -> Iterator[None]:
    yield
    wurk_unique.disable()


def test_a_unique_lock_is_taken_and_released_on_the_worker(start_worker, redis, elsewhere, unique_on):
    wurk_unique.enable()  # before the worker's configuration exists: its plugins install the middleware
    worker = start_worker()
    config = worker.config
    push(config, UniquePusher)
    seen = wait_for(lambda: evidence(redis, "unique"))
    assert seen["first"] is not None
    assert seen["duplicate"] is None
    assert len(seen["locks"]) == 1
    assert wait_for(lambda: evidence(redis, "once:1")) == seen["first"]
    wait_for(lambda: redis.exists(seen["locks"][0]) == 0)  # released once it succeeded
    worker.stop()
    assert elsewhere.untouched()


@pytest.fixture
def crypto_on() -> Iterator[None]:
    yield
    wurk_crypto.disable()


def test_an_encrypted_job_is_sealed_and_opened_on_the_worker(start_worker, redis, elsewhere, crypto_on):
    worker = start_worker(lambda cfg: wurk_crypto.enable(2, pusher_resolver, config=cfg))
    config = worker.config
    push(config, SecretPusher)
    assert wait_for(lambda: evidence(redis, "secret:ran")) == {"card": "4111"}
    wait_for(lambda: evidence(redis, "secret-pushed"))  # "ran" may run before "parked" is pushed
    [parked] = redis.lrange(f"queue:{PARKED}", 0, -1)
    sealed = json.loads(parked)["args"][-1]
    assert envelope.is_envelope(sealed)
    assert "5500" not in parked.decode()
    worker.stop()
    assert elsewhere.untouched()


def test_an_iterable_jobs_state_lives_on_the_worker(start_worker, redis, elsewhere):
    worker = start_worker()
    config = worker.config
    jid = push(config, Walk)
    state = wait_for(lambda: evidence(redis, "walk-state"))
    assert state["c"] == "1"
    assert state["ex"] == "1"
    wait_for(lambda: redis.exists(f"it-{jid}") == 0)  # finished: its state is gone from the worker's Redis
    worker.stop()
    assert elsewhere.untouched()

"""What the Lua paths promise: one round trip, whatever the queue's length."""

from __future__ import annotations

import threading

from wurk.api import Queue
from wurk.client import payload as wire

from .jobs import OtherJob

MILLION = 1_000_000
BATCH = 10_000
MARKER = "end-of-test-marker"


def reads_processed(redis) -> int:
    """Read events the server has processed: one per round trip of a client."""
    return int(redis.info("stats")["total_reads_processed"])


def payload(number: int) -> str:
    return wire.dumps(
        {
            "retry": True,
            "queue": "big",
            "class": "tests.api.jobs.HardJob",
            "args": [number, "some text"],
            "jid": f"{number:024x}",
            "created_at": 1796027746766,
            "enqueued_at": 1796027746766,
        }
    )


def build_million(redis) -> None:
    """A million payloads, pushed 10,000 per LPUSH and 10 LPUSHes per round trip."""
    pipe = redis.pipeline(transaction=False)
    for start in range(0, MILLION, BATCH):
        pipe.lpush("queue:big", *[payload(number) for number in range(start, start + BATCH)])
        if (start // BATCH) % 10 == 9:
            pipe.execute()
    pipe.execute()
    redis.sadd("queues", "big")


class Monitor:
    """Every command the server runs, from MONITOR, until the marker is echoed."""

    def __init__(self, redis) -> None:
        self.redis = redis
        self.commands: list[dict] = []
        self.ready = threading.Event()
        self.thread = threading.Thread(target=self._watch, daemon=True)

    def __enter__(self) -> Monitor:
        self.thread.start()
        assert self.ready.wait(10)
        return self

    def _watch(self) -> None:
        with self.redis.monitor() as monitor:
            self.ready.set()
            for command in monitor.listen():
                if MARKER in command["command"]:
                    return
                self.commands.append(command)

    def __exit__(self, *exc: object) -> None:
        self.redis.echo(MARKER)
        self.thread.join(60)

    def names(self, *, from_lua: bool) -> list[str]:
        return [
            command["command"].split(" ", 1)[0].upper()
            for command in self.commands
            if (command.get("client_type") == "lua") == from_lua
        ]


def test_delete_job_on_a_million_entry_queue_is_one_round_trip(config, redis, redis_url):
    # The script walks a million entries: on a loaded machine that can outlast
    # the default read timeout, which would fail the call while the script runs on.
    config.redis = {"url": redis_url, "read_timeout": 60}
    build_million(redis)
    target = payload(0).encode()  # the oldest, at the far end of the list
    queue = Queue("big")
    assert queue.delete_job("f" * 24) == 0  # loads the script, so the call below is just the call
    config.redis_pool.client.ping()
    redis.config_resetstat()
    before = reads_processed(redis)
    removed = queue.delete_job(f"{0:024x}")
    after = reads_processed(redis)
    assert removed == 1
    assert after - before == 2  # the EVALSHA, plus the second INFO itself
    calls = {name: stat["calls"] for name, stat in redis.info("commandstats").items()}
    assert calls["cmdstat_evalsha"] == 1
    assert "cmdstat_script|load" not in calls
    assert redis.llen("queue:big") == MILLION - 1
    assert redis.lpos("queue:big", target) is None
    assert redis.lindex("queue:big", -1) == payload(1).encode()
    assert redis.lindex("queue:big", 0) == payload(MILLION - 1).encode()


def test_no_list_command_of_the_client_reaches_the_server(config, redis):
    for number in range(300):
        redis.lpush("queue:default", payload(number))
    OtherJob.set(queue="default").perform_async("keep")
    queue = Queue()
    with Monitor(redis) as monitor:
        assert queue.delete_job(f"{150:024x}") == 1
        assert queue.delete_by_class("tests.api.jobs.HardJob") == 299
    setup = {"ECHO", "HELLO", "CLIENT"}  # connecting, and the end marker
    client_commands = [name for name in monitor.names(from_lua=False) if name not in setup]
    assert client_commands == ["SCRIPT", "EVALSHA", "EVALSHA"]  # one script for both, loaded once, then called
    assert "LRANGE" in monitor.names(from_lua=True)
    assert [job.args for job in queue] == [["keep"]]

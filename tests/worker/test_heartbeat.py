"""The heartbeat runs on the base Component's loop: its failures are the
base's to report and back off from, on a real server killed and brought back."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
import redis as redis_py

from tests.helpers import new_server
from wurk.redis.servers import ServerProcess
from wurk.server.heartbeat import BEAT_PAUSE, Heartbeat
from wurk.server.launcher import Launcher


@pytest.fixture
def volatile(tmp_path) -> Iterator[ServerProcess]:
    server = new_server(data_dir=tmp_path, persist=True)
    server.start()
    yield server
    server.stop()


def test_a_failed_beat_is_the_bases_to_report_and_back_off(volatile, config, tmp_path):
    config.redis = {"url": volatile.url}
    reported: list[str] = []
    config.error_handlers.append(lambda exc, context, *rest: reported.append(context["context"]))
    heartbeat = Heartbeat(Launcher(config).runtime)
    heartbeat.beat()  # the first beat, as start() gives it
    identity = heartbeat.identity
    assert redis_py.Redis.from_url(volatile.url).sismember("processes", identity)

    volatile.kill()
    heartbeat._next_beat = 0.0  # a beat is due
    assert not heartbeat.guarded(heartbeat.tick)  # tick raises; the base reports it
    assert not heartbeat.guarded(heartbeat.tick)  # a ping while Redis is away
    assert reported == ["heartbeat", "heartbeat"]
    assert heartbeat.failures == 2
    assert heartbeat.backed_off(heartbeat.next_wait()) == 2.0  # 1 s doubling ...
    heartbeat.failures = 8
    assert heartbeat.backed_off(heartbeat.next_wait()) == BEAT_PAUSE  # ... up to the beat's cadence

    back = new_server(port=volatile.port, data_dir=tmp_path, persist=True).start()
    try:
        redis_py.Redis.from_url(back.url).srem("processes", identity)  # lapsed meanwhile
        assert heartbeat.guarded(heartbeat.tick)  # Redis answers: it beats at once
        assert heartbeat.failures == 0
        assert redis_py.Redis.from_url(back.url).sismember("processes", identity)
    finally:
        back.stop()

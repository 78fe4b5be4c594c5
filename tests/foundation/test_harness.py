"""The harness itself: a real server of the selected kind, isolated per test."""

from __future__ import annotations

import signal

from tests.helpers import Subprocess, server_kind
from wurk.redis.servers import ServerProcess


def test_the_server_is_real_and_of_the_selected_kind(redis):
    info = redis.info("server")
    if server_kind() == "redis":
        assert info["redis_version"].startswith("7.0")
        assert "valkey_version" not in info
    else:
        assert "valkey_version" in info or info.get("server_name") == "valkey"


def test_each_test_starts_with_an_empty_keyspace(redis):
    assert redis.dbsize() == 0
    redis.set("left-behind", "by this test")


def test_and_the_next_one_does_not_see_the_last_ones_keys(redis):
    assert redis.get("left-behind") is None


def test_subprocess_helper_delivers_real_signals():
    child = Subprocess.python(
        "-c",
        "import signal, sys, time\n"
        "signal.signal(signal.SIGTERM, lambda *a: (print('got TERM', flush=True), sys.exit(7)))\n"
        "print('ready', flush=True)\n"
        "time.sleep(30)\n",
    )
    assert child.proc.stdout is not None
    assert child.proc.stdout.readline().strip() == b"ready"
    child.signal(signal.SIGTERM)
    assert child.wait(10) == 7
    assert "got TERM" in child.output()


def test_server_process_persists_with_aof(tmp_path):
    from tests.helpers import new_server

    first = new_server(data_dir=tmp_path, persist=True).start()
    port = first.port
    import redis as redis_py

    client = redis_py.Redis.from_url(first.url)
    client.set("durable", "yes")
    client.close()
    first.stop()
    second: ServerProcess = new_server(port=port, data_dir=tmp_path, persist=True).start()
    try:
        client = redis_py.Redis.from_url(second.url)
        assert client.get("durable") == b"yes"
        client.close()
    finally:
        second.stop()

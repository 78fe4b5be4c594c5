"""What a user sees when Redis is not there or is misconfigured: one or two
lines saying what is wrong and what to do, never a traceback.

Every case is provoked for real: a free port refuses connections, a private
server refuses a database it does not have or a missing password.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
import redis as redis_py

import wurk
from tests.helpers import new_server, url_for
from wurk.errors import ConfigurationError, RedisConnectionError
from wurk.redis.connection import RedisPool, check_url, mask_url
from wurk.redis.servers import free_port

WURK = str(Path(sys.executable).parent / "wurk")
HINT = "Start one with `wurk server`, or set REDIS_URL."

OPS_COMMANDS = [
    ["stats"],
    ["queues"],
    ["processes"],
    ["job", "show", "0" * 24],
    ["retry-all", "dead"],
]


def wurk_command(*args: str, redis_url: str, cwd: Path | None = None) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if k not in ("WURK_DEBUG", "SIDEKIQ_DEBUG")}
    env["REDIS_URL"] = redis_url
    return subprocess.run([WURK, *args], env=env, cwd=cwd, capture_output=True, text=True, timeout=120)


def one_line(result: subprocess.CompletedProcess[str]) -> str:
    assert "Traceback" not in result.stderr, result.stderr
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1, result.stderr
    assert lines[0].startswith("wurk: ")
    return lines[0]


@wurk.job()
def send_invoice(number):
    pass


@pytest.fixture
def app(tmp_path: Path) -> Path:
    path = tmp_path / "app.py"
    path.write_text("import wurk\n\n\n@wurk.job()\ndef noop():\n    pass\n", encoding="utf-8")
    return path


@pytest.fixture
def refused_url() -> str:
    """A URL whose port nobody listens on: the connection is really refused."""
    return f"redis://:s3cret@127.0.0.1:{free_port()}/0"


@pytest.mark.parametrize("command", OPS_COMMANDS, ids=lambda c: " ".join(c))
def test_ops_commands_name_the_server_and_wurk_server_when_refused(command, refused_url):
    result = wurk_command(*command, redis_url=refused_url)
    assert result.returncode == 1
    line = one_line(result)
    assert line == f"wurk: cannot reach Redis at {mask_url(refused_url)} (connection refused). {HINT}"
    assert "s3cret" not in result.stderr


def test_the_worker_says_the_same_when_refused(app, refused_url):
    result = wurk_command("-r", str(app), "-c", "2", redis_url=refused_url)
    assert result.returncode == 1
    assert one_line(result) == f"wurk: cannot reach Redis at {mask_url(refused_url)} (connection refused). {HINT}"


@pytest.mark.parametrize("command", [["stats"], ["queues"], ["-r", "APP"]], ids=["stats", "queues", "worker"])
def test_a_url_without_scheme_is_a_configuration_error(command, app):
    args = [str(app) if arg == "APP" else arg for arg in command]
    result = wurk_command(*args, redis_url="localhost:6379")
    assert result.returncode == 2
    line = one_line(result)
    assert "'localhost:6379' has no scheme" in line
    assert "redis://localhost:6379/0" in line


def test_a_url_without_scheme_hides_its_password():
    result = wurk_command("stats", redis_url="admin:hunter2@localhost:6379")
    assert result.returncode == 2
    assert "hunter2" not in result.stderr
    assert "admin:***@localhost:6379" in one_line(result)


@pytest.mark.parametrize("command", [["stats"], ["processes"], ["-r", "APP"]], ids=["stats", "processes", "worker"])
def test_a_database_the_server_lacks_is_a_configuration_error(command, app, server):
    args = [str(app) if arg == "APP" else arg for arg in command]
    url = url_for(server.port, 99)
    result = wurk_command(*args, redis_url=url)
    assert result.returncode == 2
    line = one_line(result)
    assert f"Redis at {url} has no database 99" in line
    assert "REDIS_URL" in line


def test_refused_credentials_are_a_configuration_error():
    locked = new_server().start()
    try:
        control = redis_py.Redis.from_url(locked.url)
        control.config_set("requirepass", "right")
        control.close()
        wrong = url_for(locked.port, userinfo=":wrong")
        result = wurk_command("stats", redis_url=wrong)
        assert result.returncode == 2
        line = one_line(result)
        assert f"Redis at {mask_url(wrong)} refused the credentials" in line
        assert mask_url(wrong).startswith(("redis://:***@127.0.0.1:", "rediss://:***@127.0.0.1:"))
        assert ":wrong@" not in result.stderr
        assert "password in REDIS_URL" in line
    finally:
        locked.stop()


def test_wurk_debug_shows_the_traceback_instead(refused_url):
    env = {**os.environ, "REDIS_URL": refused_url, "WURK_DEBUG": "1"}
    result = subprocess.run([WURK, "stats"], env=env, capture_output=True, text=True, timeout=120)
    assert result.returncode != 0
    assert "Traceback" in result.stderr
    assert "RedisConnectionError" in result.stderr


def test_perform_async_raises_one_clear_line_when_the_server_is_down(refused_url):
    config = wurk.Config()
    config.redis = {"url": refused_url}
    previous = wurk.set_default_config(config)
    try:
        with pytest.raises(RedisConnectionError) as caught:
            send_invoice.perform_async(1)
    finally:
        wurk.set_default_config(previous)
        config.reset_redis_pools()
    message = str(caught.value)
    assert message == f"cannot reach Redis at {mask_url(refused_url)} (connection refused). {HINT}"
    assert "\n" not in message
    assert "s3cret" not in message
    assert caught.value.reason == "connection refused"


def test_perform_async_with_a_url_without_scheme_fails_before_connecting():
    config = wurk.Config()
    config.redis = {"url": "localhost:6379"}
    with pytest.raises(ConfigurationError, match=r"has no scheme.*redis://localhost:6379/0"):
        wurk.Client(config).push({"class": "SomeJob", "args": []})


def test_a_pool_on_a_missing_database_says_so(server):
    url = url_for(server.port, 99)
    pool = RedisPool({"url": url}, size=1, name="probe")
    try:
        with pytest.raises(ConfigurationError, match=r"has no database 99"):
            pool.execute(lambda conn: conn.ping())
    finally:
        pool.disconnect()


@pytest.mark.parametrize(
    ("url", "words"),
    [
        ("localhost:6379", "has no scheme"),
        ("127.0.0.1", "redis://127.0.0.1/0"),
        ("http://localhost:6379/0", "use one of redis://, rediss://, unix://, redis+sentinel://"),
        ("redis://localhost:port/0", "port that is not a number"),
        ("redis://localhost:6379/zero", "'zero' is not a whole number"),
        ("redis://localhost:6379/-1", "'-1' is not a whole number"),
    ],
)
def test_check_url_refuses_urls_that_cannot_work(url, words):
    with pytest.raises(ConfigurationError) as caught:
        check_url(url)
    assert words in str(caught.value)


@pytest.mark.parametrize(
    "url", ["redis://localhost:6379/0", "redis://localhost", "rediss://u:p@host:6380/15", "unix:///tmp/r.sock?db=2"]
)
def test_check_url_accepts_working_urls(url):
    check_url(url)

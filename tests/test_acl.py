"""Wurk as the least-privilege ACL user of docs/deployment.md, on a real server.

A real worker, the client, ``wurk web`` and the ``wurk`` commands run as a
user created from the documentation's own ``ACL SETUSER`` lines, with every
feature distribution used once: a command or key the rule does not grant
shows up in the server's ``ACL LOG`` and fails the test. The same runs grep
everything a user can see (logs, pages, API replies, command output, the
heartbeat in Redis, error messages) for the user's password.
"""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import httpx
import pytest
import redis as redis_py

import wurk
from wurk.redis.servers import ServerProcess, free_port
from wurk.testing.faults import FaultProxy

from . import acl
from .evidence import EVIDENCE_ENV
from .helpers import ROOT, Subprocess, wait_for

WURK = str(Path(sys.executable).parent / "wurk")
EXPECTED = {
    "kickoff",
    "batch 1",
    "batch 2",
    "batch-success",
    "unique 1",
    "secret",
    "walk 0",
    "walk 1",
    "walk 2",
    "limited",
    "scheduled",
}
PAGES = [
    "/",
    "/busy",
    "/queues",
    "/queues/default",
    "/retries",
    "/scheduled",
    "/dead",
    "/metrics",
    "/metrics/tests.acl_app.Kickoff",
    "/search",
]
APIS = [
    "/api/stats",
    "/api/stats/history",
    "/api/stats/gauges",
    "/api/processes",
    "/api/queues",
    "/api/queues/default",
    "/api/sets/retries",
    "/api/sets/dead",
    "/api/sets/scheduled",
    "/api/metrics",
    "/api/metrics/tests.acl_app.Kickoff",
    "/api/batches",
    "/api/limiters",
    "/api/cron",
]


@pytest.fixture
def user_url(server: ServerProcess, redis: redis_py.Redis) -> str:
    """The documented user's URL (created afresh), its ``ACL LOG`` emptied."""
    acl.create_user(redis)
    redis.execute_command("ACL", "LOG", "RESET")
    return acl.user_url(server.url)


def start_worker(url: str, admin_url: str, log: Path) -> Subprocess:
    env = {"REDIS_URL": url, EVIDENCE_ENV: admin_url}
    return Subprocess([sys.executable, "-m", "wurk.cli", "-r", "tests.acl_app", "-t", "5"], env=env, cwd=ROOT, log=log)


def push_kickoff(url: str) -> None:
    config = wurk.Config()
    config.redis = {"url": url}
    try:
        wurk.Client(config).push({"class": "tests.acl_app.Kickoff", "args": [], "queue": "default"})
    finally:
        config.reset_redis_pools()


def notes(redis: redis_py.Redis) -> list[str]:
    return [entry.decode() for entry in redis.lrange("acl:ran", 0, -1)]


def heartbeats(redis: redis_py.Redis) -> list[str]:
    """Every process's heartbeat hash and running-work hash, as text."""
    found = []
    for identity in redis.smembers("processes"):
        found.append(json.dumps({k.decode(): v.decode() for k, v in redis.hgetall(identity).items()}))
        found.append(json.dumps({k.decode(): v.decode() for k, v in redis.hgetall(identity + b":work").items()}))
    return found


def wurk_command(*args: str, url: str) -> str:
    result = subprocess.run(
        [WURK, *args], capture_output=True, text=True, timeout=60, env={**_env(), "REDIS_URL": url}, cwd=ROOT
    )
    return result.stdout + result.stderr


def _env() -> dict[str, str]:
    import os

    return {key: value for key, value in os.environ.items() if key != "REDIS_URL"}


def dashboard_bodies(url: str, log: Path) -> list[str]:
    """Every page and API reply of ``wurk web`` run as ``url``'s user."""
    port = free_port()
    web = Subprocess([WURK, "web", "--port", str(port)], log=log, env={"REDIS_URL": url}, cwd=ROOT)
    bodies: list[str] = []
    try:
        base = f"http://127.0.0.1:{port}"
        wait_for(lambda: _answering(f"{base}/api/stats"), timeout=30)
        for path in PAGES + APIS:
            response = httpx.get(base + path, timeout=10)
            assert response.status_code == 200, (path, response.status_code, response.text[:300])
            bodies.append(response.text)
        web.signal(signal.SIGINT)
        web.wait(30)
    finally:
        web.stop()
    bodies.append(web.output())
    return bodies


def _answering(url: str) -> httpx.Response | None:
    try:
        return httpx.get(url, timeout=2)
    except httpx.HTTPError:
        return None


def assert_no_password(texts: list[str]) -> None:
    leaks = [text[max(0, text.find(acl.PASSWORD) - 200) :][:400] for text in texts if acl.PASSWORD in text]
    assert not leaks, f"the password shows: {leaks}"


def test_worker_client_dashboard_and_every_feature_run_under_the_documented_rule(
    server: ServerProcess, redis: redis_py.Redis, redis_url: str, user_url: str, tmp_path: Path
) -> None:
    push_kickoff(user_url)
    worker = start_worker(user_url, server.url, tmp_path / "worker.log")
    try:
        wait_for(lambda: set(notes(redis)) >= EXPECTED, timeout=90, interval=0.1)
        wait_for(lambda: redis.zcard("dead") == 1 and redis.zcard("retry") == 1, timeout=30)
        seen: list[str] = heartbeats(redis)
        seen += dashboard_bodies(user_url, tmp_path / "web.log")
        for command in (["processes"], ["processes", "--json"], ["stats"], ["stats", "--json"], ["queues"]):
            seen.append(wurk_command(*command, url=user_url))
        seen += [entry.decode() for entry in redis.zrange("dead", 0, -1) + redis.zrange("retry", 0, -1)]
    finally:
        worker.signal(signal.SIGTERM)
        worker.wait(30)
    seen.append(worker.output())
    assert notes(redis).count("unique 1") == 1
    assert "secret garbled" not in notes(redis)
    assert "bye" in seen[-1]
    assert_no_password(seen)
    assert acl.denials(redis) == []


def test_the_password_shows_in_no_error_when_redis_goes_away(
    server: ServerProcess, redis: redis_py.Redis, redis_url: str, user_url: str, tmp_path: Path
) -> None:
    seen: list[str] = []
    with FaultProxy(server.port) as proxy:
        through_proxy = acl.user_url(proxy.url())
        worker = start_worker(through_proxy, server.url, tmp_path / "worker.log")
        try:
            wait_for(lambda: redis.scard("processes") == 1, timeout=30)
            for _ in range(5):
                proxy.cut()
                time.sleep(0.3)
            push_kickoff(through_proxy)
            wait_for(lambda: redis.zcard("dead") == 1, timeout=60)
        finally:
            worker.signal(signal.SIGTERM)
            worker.wait(30)
        seen.append(worker.output())
    seen += heartbeats(redis)
    nobody = f"redis://{acl.USER}:{acl.PASSWORD}@127.0.0.1:{free_port()}/0"
    wrong = acl.user_url(server.url, "not-" + acl.PASSWORD)
    for url in (nobody, wrong):
        for command in (["processes"], ["stats", "--json"]):
            output = wurk_command(*command, url=url)
            assert "redis://wurk:***@127.0.0.1" in output, output
            seen.append(output)
    dead_worker = Subprocess(
        [sys.executable, "-m", "wurk.cli", "-r", "tests.acl_app"],
        env={"REDIS_URL": nobody, EVIDENCE_ENV: server.url},
        cwd=ROOT,
        log=tmp_path / "nobody.log",
    )
    try:
        dead_worker.wait(60)
    finally:
        dead_worker.stop()
    seen.append(dead_worker.output())
    assert "redis://wurk:***@127.0.0.1" in seen[-1], seen[-1]
    seen += [_error_of(lambda url=url: push_kickoff(url)) for url in (nobody, wrong)]
    assert_no_password(seen)


def _error_of(action: Any) -> str:
    try:
        action()
    except Exception as exc:  # the message and every cause a traceback would print
        texts = []
        while exc is not None:
            texts.append(f"{type(exc).__name__}: {exc}")
            exc = exc.__cause__ or exc.__context__
        return "\n".join(texts)
    raise AssertionError("the push succeeded without a server")


def test_a_password_in_the_config_files_redis_section_shows_nowhere(
    server: ServerProcess, redis: redis_py.Redis, user_url: str, tmp_path: Path
) -> None:
    """The password given as ``redis: {password: ...}`` in the YAML file, not
    in the URL: the worker's output through connection cuts, and its refusal
    to start with a wrong one, never show it."""
    seen: list[str] = []
    with FaultProxy(server.port) as proxy:
        for name, password in (("right", acl.PASSWORD), ("wrong", "not-" + acl.PASSWORD)):
            settings = tmp_path / f"{name}.yml"
            settings.write_text(
                f"redis:\n  url: {proxy.url()}\n  username: {acl.USER}\n  password: {password}\n", encoding="utf-8"
            )
            worker = Subprocess(
                [sys.executable, "-m", "wurk.cli", "-r", "tests.acl_app", "-C", str(settings), "-t", "5"],
                env={EVIDENCE_ENV: server.url},
                cwd=ROOT,
                log=tmp_path / f"{name}.log",
            )
            try:
                if name == "right":
                    wait_for(lambda: redis.scard("processes") == 1, timeout=30)
                    for _ in range(3):
                        proxy.cut()
                        time.sleep(0.3)
                    worker.signal(signal.SIGTERM)
                worker.wait(60)
            finally:
                worker.stop()
            seen.append(worker.output())
    seen += heartbeats(redis)
    assert "bye" in seen[0], seen[0]
    assert "WRONGPASS" in seen[1] or "invalid username-password" in seen[1], seen[1]
    assert_no_password(seen)

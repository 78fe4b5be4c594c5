"""``wurk web`` on its own, and the demo serving the dashboard on its live jobs."""

from __future__ import annotations

import re
import signal
import subprocess
import sys
from pathlib import Path

import httpx
import redis as redis_py

from tests.helpers import Subprocess, wait_for
from wurk.redis.servers import free_port

WURK = str(Path(sys.executable).parent / "wurk")


def answering(url: str) -> httpx.Response | None:
    try:
        return httpx.get(url, timeout=2)
    except httpx.HTTPError:
        return None


def test_wurk_web_help_names_the_loopback_default():
    result = subprocess.run([WURK, "web", "--help"], capture_output=True, text=True, timeout=60)
    assert result.returncode == 0
    text = " ".join(result.stdout.split())
    assert re.search(r"--host TEXT .*default: 127\.0\.0\.1", text)
    assert "--port" in text
    assert "--read-only" in text


def test_wurk_plugins_lists_the_dashboard_as_built():
    result = subprocess.run([WURK, "plugins"], capture_output=True, text=True, timeout=60)
    line = next(line for line in result.stdout.splitlines() if "wurk-web" in line)
    assert "alpha" in line
    assert "coming" not in line


def test_wurk_web_serves_the_dashboard_on_the_redis_url(tmp_path, redis_url, redis):
    redis.set("stat:processed", 12)
    port = free_port()
    log = tmp_path / "web.log"
    # SIGINT ignored at start, as a script's `wurk web &` has it: Ctrl-C's signal still stops it.
    web = Subprocess(
        [WURK, "web", "--port", str(port), "--read-only"], log=log, env={"REDIS_URL": redis_url}, sigint=signal.SIG_IGN
    )
    try:
        wait_for(lambda: answering(f"http://127.0.0.1:{port}/api/stats"), timeout=30)
        assert httpx.get(f"http://127.0.0.1:{port}/api/stats").json()["processed"] == 12
        assert httpx.get(f"http://127.0.0.1:{port}/favicon.ico").status_code == 200  # not a 404 in the log
        refused = httpx.post(f"http://127.0.0.1:{port}/api/queues/default/pause", json={})
        assert refused.status_code == 403
        web.signal(signal.SIGINT)
        web.wait(30)
    finally:
        web.stop()
    assert f"dashboard: http://127.0.0.1:{port}/" in web.output()


def test_the_demo_prints_the_dashboard_url_and_the_dashboard_shows_its_jobs(tmp_path):
    log = tmp_path / "demo.log"
    args = [WURK, "demo", "--data-dir", str(tmp_path / "data"), "--jobs", "6", "--web-port", str(free_port())]
    demo = Subprocess(args, log=log, sigint=signal.SIG_IGN)
    try:
        match = wait_for(lambda: re.search(r"dashboard: (http://\S+)", log.read_text()), timeout=30)
        url = match.group(1)  # type: ignore[union-attr]
        wait_for(lambda: answering(f"{url}api/stats"), timeout=30)

        def shows_the_demo() -> bool:
            stats = httpx.get(f"{url}api/stats").json()
            return stats["processed"] >= 7 and stats["retries"] == 1 and stats["processes"] == 1

        wait_for(shows_the_demo, timeout=60)
        (entry,) = httpx.get(f"{url}api/sets/retries").json()["entries"]
        assert entry["class"] == "wurk.cli.demo.flaky"
        (process,) = httpx.get(f"{url}api/processes").json()["processes"]
        assert process["queues"] == ["critical", "default", "low"]
        demo.signal(signal.SIGINT)
        assert demo.wait(60) == 0
    finally:
        demo.stop()
    assert not answering(f"{url}api/stats")


def test_wurk_web_on_loopback_refuses_a_rebound_host_name(tmp_path, redis_url, redis):
    # DNS rebinding: a page at attacker.example re-points its own name at
    # 127.0.0.1, so its requests are "same-origin" to the browser. Only the
    # Host header tells them apart, and a loopback dashboard refuses it.
    redis.set("stat:processed", 12)
    port = free_port()
    web = Subprocess(
        [WURK, "web", "--port", str(port), "--allowed-host", "wurk.internal"],
        log=tmp_path / "web.log",
        env={"REDIS_URL": redis_url},
    )
    try:
        base = f"http://127.0.0.1:{port}"
        wait_for(lambda: answering(f"{base}/api/stats"), timeout=30)
        rebound = {"Host": f"attacker.example:{port}"}
        read = httpx.get(f"{base}/api/stats", headers=rebound)
        assert read.status_code == 400
        assert "12" not in read.text
        forged = {**rebound, "Origin": f"http://attacker.example:{port}", "Sec-Fetch-Site": "same-origin"}
        assert httpx.post(f"{base}/api/queues/default/pause", json={}, headers=forged).status_code == 400
        assert redis.smembers("paused") == set()
        for name in (f"localhost:{port}", f"127.0.0.1:{port}", f"[::1]:{port}", "wurk.internal", "LOCALHOST"):
            assert httpx.get(f"{base}/api/stats", headers={"Host": name}).json()["processed"] == 12, name
    finally:
        web.stop()


def test_allowed_hosts_refuse_every_other_name(config):
    import wurk_web
    from tests.web.live import client_for

    with client_for(wurk_web.create_app(config, allowed_hosts=["dash.example"])) as client:
        assert client.get("/api/stats", headers={"Host": "dash.example"}).status_code == 200
        assert client.get("/static/wurk/app.js", headers={"Host": "dash.example:8443"}).status_code == 200
        refused = client.get("/", headers={"Host": "other.example"})
        assert refused.status_code == 400
        assert refused.headers["x-frame-options"] == "DENY"
    with client_for(wurk_web.create_app(config)) as client:  # none given: any host, as before
        assert client.get("/api/stats", headers={"Host": "other.example"}).status_code == 200


def test_wurk_web_on_every_interface_warns_that_it_has_no_login(tmp_path, redis_url):
    port = free_port()
    web = Subprocess(
        [WURK, "web", "--host", "0.0.0.0", "--port", str(port)], log=tmp_path / "web.log", env={"REDIS_URL": redis_url}
    )
    try:
        wait_for(lambda: answering(f"http://127.0.0.1:{port}/api/stats"), timeout=30)
        # No host list on a network address: any name is served (the warning says to add a login).
        assert httpx.get(f"http://127.0.0.1:{port}/api/stats", headers={"Host": "dash.example"}).status_code == 200
    finally:
        web.stop()
    assert "warning: the dashboard has no login of its own" in web.output()


def test_wurk_web_on_loopback_does_not_warn(tmp_path, redis_url):
    port = free_port()
    web = Subprocess([WURK, "web", "--port", str(port)], log=tmp_path / "web.log", env={"REDIS_URL": redis_url})
    try:
        wait_for(lambda: answering(f"http://127.0.0.1:{port}/api/stats"), timeout=30)
    finally:
        web.stop()
    assert "warning" not in web.output()


def test_wurk_web_serves_each_shard_of_the_config_file(tmp_path, redis_url, redis, shard_url):
    redis.set("stat:processed", 1)
    east = redis_py.Redis.from_url(shard_url)
    east.set("stat:processed", 2)
    east.close()
    (tmp_path / "config").mkdir()
    (tmp_path / "config" / "wurk.yml").write_text(f"shards:\n  east: {shard_url}\n")
    port = free_port()
    log = tmp_path / "web.log"
    web = Subprocess([WURK, "web", "--port", str(port)], log=log, env={"REDIS_URL": redis_url}, cwd=tmp_path)
    try:
        wait_for(lambda: answering(f"http://127.0.0.1:{port}/api/stats"), timeout=30)
        assert httpx.get(f"http://127.0.0.1:{port}/api/stats").json()["processed"] == 1
        assert httpx.get(f"http://127.0.0.1:{port}/shard/east/api/stats").json()["processed"] == 2
        assert '<a href="/shard/east/">east</a>' in httpx.get(f"http://127.0.0.1:{port}/").text
    finally:
        web.stop()

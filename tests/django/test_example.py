"""The example project (examples/django_app) run the way its page says: in its
own folder, ``manage.py migrate``, a staff user and one who is not, a worker started by
``manage.py wurk``, the project served by uvicorn from ``shopsite/asgi.py``,
and every request made over HTTP, the dashboard's behind the admin's login."""

from __future__ import annotations

import json
import re
import subprocess
import sys

import httpx
import pytest

from tests.helpers import ROOT, Subprocess, wait_for

pytest.importorskip("django")
pytest.importorskip("uvicorn")

from tests.webhosts.servers import WebServer, uvicorn

EXAMPLE = ROOT / "examples" / "django_app"
CSRF_FIELD = re.compile(r'name="csrfmiddlewaretoken" value="([^"]+)"')


@pytest.fixture
def env(redis_url, tmp_path):
    return {
        "REDIS_URL": redis_url,
        "DATABASE_PATH": str(tmp_path / "shop.sqlite3"),
        "DJANGO_SETTINGS_MODULE": "shopsite.settings",
    }


def manage(env: dict[str, str], *args: str) -> str:
    import os

    done = subprocess.run(
        [sys.executable, "manage.py", *args],
        cwd=EXAMPLE,
        env={**os.environ, **env},
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    return done.stdout


@pytest.fixture
def project(env):
    manage(env, "migrate", "-v", "0")
    users = (
        "from django.contrib.auth.models import User;"
        "User.objects.create_superuser('boss', 'boss@example.com', 'boss-pw');"
        "User.objects.create_user('clerk', password='clerk-pw')"
    )
    manage(env, "shell", "-c", users)
    return env


@pytest.fixture
def workers(project, tmp_path):
    started: list[Subprocess] = []

    def start(*args: str) -> Subprocess:
        log = tmp_path / f"worker-{len(started)}.log"
        process = Subprocess([sys.executable, "manage.py", "wurk", *args], env=project, cwd=EXAMPLE, log=log)
        started.append(process)
        return process

    yield start
    for process in started:
        process.stop(timeout=15)


def log_in(server: WebServer, username: str, password: str, next_path: str) -> httpx.Response:
    """Sign in through the admin's login form, as a browser would (CSRF token included)."""
    form = server.http.get("/admin/login/", params={"next": next_path})
    assert form.status_code == 200
    (token,) = CSRF_FIELD.findall(form.text)
    return server.http.post(
        "/admin/login/",
        params={"next": next_path},
        data={"username": username, "password": password, "next": next_path, "csrfmiddlewaretoken": token},
    )


def test_under_uvicorn_orders_push_on_commit_and_a_worker_sends_the_receipt(project, workers, redis, tmp_path):
    with uvicorn("shopsite.asgi:application", tmp_path / "uvicorn.log", project, EXAMPLE, "/admin/login/") as server:
        cancelled = server.http.post("/orders/", data={"item": "lamp", "cancel": "1"})
        assert cancelled.status_code == 200
        placed = server.http.post("/orders/", data={"item": "desk"}).json()
        # The cancelled order's push went with its rollback; the placed one's waited for its commit.
        assert [json.loads(raw)["jid"] for raw in redis.lrange("queue:mail", 0, -1)] == [placed["jid"]]
        workers("-q", "mail", "-q", "default", "-c", "2")
        wait_for(lambda: server.http.get(f"/orders/{placed['order']}").json()["receipt_sent"], timeout=60)
        assert server.http.get(f"/orders/{placed['order']}").json() == {
            "order": placed["order"],
            "item": "desk",
            "receipt_sent": True,
        }
        started = server.http.post("/sums/", data={"a": "20", "b": "22"}).json()
        assert started["status"] == "READY"
        wait_for(lambda: server.http.get(f"/sums/{started['id']}").json()["status"] == "SUCCESSFUL", timeout=60)
        assert server.http.get(f"/sums/{started['id']}").json() == {
            "id": started["id"],
            "status": "SUCCESSFUL",
            "sum": 42,
        }
    # Both jobs ran, once each.
    wait_for(lambda: redis.get("stat:processed") == b"2", timeout=30)
    assert (redis.zcard("retry"), redis.zcard("dead")) == (0, 0)
    assert redis.llen("queue:mail") == 0


def test_under_uvicorn_the_dashboard_is_for_staff_signed_in_through_the_admin(project, redis, tmp_path):
    with uvicorn("shopsite.asgi:application", tmp_path / "uvicorn.log", project, EXAMPLE, "/admin/login/") as server:
        anonymous = server.http.get("/wurk/queues")
        assert anonymous.status_code == 302
        assert anonymous.headers["location"] == "/admin/login/?next=/wurk/queues"

        refused = log_in(server, "clerk", "clerk-pw", "/wurk/queues")  # not staff: the admin's form says no
        assert refused.status_code == 200
        assert "sessionid" not in server.http.cookies
        assert server.http.get("/wurk/queues").status_code == 302

        signed_in = log_in(server, "boss", "boss-pw", "/wurk/queues")
        assert signed_in.status_code == 302, re.findall(r"errornote\">(.*?)<", signed_in.text, re.S)
        assert signed_in.headers["location"] == "/wurk/queues"
        page = server.http.get("/wurk/queues")
        assert page.status_code == 200
        assert '<base href="/wurk/">' in page.text
        assert server.http.get("/wurk/api/queues").json() == {"queues": []}

        body = json.dumps({})
        json_type = {"Content-Type": "application/json"}
        forged = server.http.post(
            "/wurk/api/queues/mail/pause", content=body, headers={**json_type, "Origin": "http://elsewhere.example"}
        )
        assert forged.status_code == 403
        assert redis.smembers("paused") == set()
        paused = server.http.post(
            "/wurk/api/queues/mail/pause", content=body, headers={**json_type, "Origin": server.url}
        )
        assert paused.status_code == 200
        assert redis.smembers("paused") == {b"mail"}

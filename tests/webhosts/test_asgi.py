"""wurk.contrib.asgi: a FastAPI app that serves requests and runs its jobs in
one process (uvicorn), refuses the embedded worker under gunicorn's workers
and under WURK_DISABLED=1 while still serving and enqueueing, gives a
running job back to its queue when it shuts down, and mounts the dashboard
behind a hook."""

from __future__ import annotations

import json
import signal

import httpx
import pytest

import wurk
import wurk_web
from tests.helpers import ROOT, wait_for, with_db
from tests.web.live import client_for
from wurk.contrib.asgi import WurkLifespan, WurkMiddleware, mount_dashboard, wurk_lifespan
from wurk.errors import ConfigurationError
from wurk.redis import keys

from .servers import gunicorn, in_thread, receipts, uvicorn

REFUSAL = "not starting the embedded worker"


@pytest.fixture
def env(redis_url, tmp_path):
    return {"REDIS_URL": redis_url, "DATABASE_URL": f"sqlite:///{tmp_path / 'orders.db'}", "ADMIN_TOKEN": "s3cret"}


def test_one_uvicorn_process_serves_requests_and_runs_their_jobs(env, redis, tmp_path):
    with uvicorn("fastapi_app:app", tmp_path / "uvicorn.log", env) as server:
        pid = server.http.get("/pid").json()["pid"]
        assert pid == server.process.pid
        refused = server.http.post("/orders", params={"item": "lamp", "fail": "true"})
        assert refused.status_code == 409
        assert redis.llen("queue:default") == 0  # rolled back: nothing pushed
        placed = server.http.post("/orders", params={"item": "book"}).json()
        wait_for(lambda: receipts(tmp_path / "orders.db"), timeout=30)
        # The job ran in the web server's own process, and saw its committed order.
        assert receipts(tmp_path / "orders.db") == [(placed["order"], "book", pid)]
        (identity,) = redis.smembers(keys.PROCESSES)
        assert json.loads(redis.hget(identity, "info"))["embedded"] is True
        assert server.http.get("/wurk/queues").status_code == 403
        page = server.http.get("/wurk/queues", headers={"X-Admin-Token": "s3cret"})
        assert page.status_code == 200
        assert '<base href="/wurk/">' in page.text
        server.process.signal(signal.SIGTERM)
        # uvicorn shuts down gracefully, then re-raises the signal it caught.
        assert server.process.wait(30) == -signal.SIGTERM
    assert server.lines_with("bye"), server.text()
    assert redis.smembers(keys.PROCESSES) == set()


def test_a_shutdown_gives_the_running_job_back_to_its_queue(redis_url, redis, tmp_path):
    with uvicorn("tests.webhosts.asgi_app:app", tmp_path / "uvicorn.log", {"REDIS_URL": redis_url}, ROOT) as server:
        jid = server.http.post("/nap", params={"seconds": 120}).json()["jid"]
        wait_for(lambda: redis.llen("naps"), timeout=30)
        server.process.signal(signal.SIGTERM)
        assert server.process.wait(60) == -signal.SIGTERM
    assert server.lines_with("gave 1 unfinished job(s) back to their queues"), server.text()
    (payload,) = redis.lrange("queue:default", 0, -1)
    assert json.loads(payload)["jid"] == jid


def test_under_gunicorn_each_worker_refuses_the_embedded_worker_in_one_line_and_still_enqueues(env, redis, tmp_path):
    log = tmp_path / "gunicorn.log"
    with gunicorn("fastapi_app:app", log, env, "-k", "uvicorn.workers.UvicornWorker") as server:
        wait_for(lambda: len(server.lines_with(REFUSAL)) == 2, timeout=60)
        placed = server.http.post("/orders", params={"item": "book"})
        assert placed.status_code == 200
        (payload,) = redis.lrange("queue:default", 0, -1)
        assert json.loads(payload)["jid"] == placed.json()["jid"]
        # Both workers said no before serving: no worker was registered.
        assert redis.smembers(keys.PROCESSES) == set()
    for line in server.lines_with(REFUSAL):
        assert "this process is a gunicorn worker" in line
        assert "WURK_DISABLED=1" in line


def test_wurk_disabled_keeps_the_web_process_from_running_jobs(env, redis, tmp_path):
    with uvicorn("fastapi_app:app", tmp_path / "uvicorn.log", {**env, "WURK_DISABLED": "1"}) as server:
        (line,) = server.lines_with("WURK_DISABLED=1")
        assert "runs none" in line
        assert server.http.post("/orders", params={"item": "book"}).status_code == 200
        assert redis.llen("queue:default") == 1
        assert redis.smembers(keys.PROCESSES) == set()
    assert not server.lines_with(REFUSAL)


class Note(wurk.Job):
    def perform(self, text):
        pass


def test_settings_go_into_the_configuration_and_a_misspelt_key_is_refused(config):
    lifespan = WurkLifespan({"queues": ["mail", "default"], "timeout": 7})
    assert lifespan.config is config
    assert config.queues == ["mail", "default"]
    assert config["timeout"] == 7
    refusal = r"^Wurk settings: unknown option 'concurency'; did you mean 'concurrency'\?$"
    with pytest.raises(ConfigurationError, match=refusal):
        WurkLifespan({"concurency": 3})


def test_handlers_push_through_the_applications_own_configuration(config, redis_url, redis):
    from fastapi import FastAPI

    own = wurk.Config()
    own.redis = {"url": with_db(redis_url, 3)}
    try:
        app = FastAPI(lifespan=WurkLifespan({"queues": ["default"]}, config=own))
        app.add_middleware(WurkMiddleware, config=own)

        @app.post("/note")
        def note() -> dict[str, str | None]:
            return {"jid": Note.perform_async("hi")}

        @app.post("/anote")
        async def anote() -> dict[str, str | None]:
            return {"jid": Note.perform_async("hi")}

        with client_for(app) as client:
            client.post("/note").raise_for_status()
            client.post("/anote").raise_for_status()
        assert own.redis_pool.client.llen("queue:default") == 2
        assert redis.llen("queue:default") == 0  # not the process default's Redis
    finally:
        own.reset_redis_pools()


def test_wurk_lifespan_inside_a_lifespan_of_your_own(config, redis):
    from contextlib import asynccontextmanager

    from starlette.applications import Starlette
    from starlette.responses import JSONResponse
    from starlette.routing import Route

    seen = []

    @asynccontextmanager
    async def lifespan(app):
        async with wurk_lifespan(app, {"queues": ["default"]}, embedded=False) as wurk_config:
            seen.append(wurk_config)
            yield

    async def push(request):
        return JSONResponse({"jid": Note.perform_async("x")})

    app = Starlette(routes=[Route("/push", push, methods=["POST"])], lifespan=lifespan)
    with in_thread(app) as client:
        client.post("/push").raise_for_status()
    assert seen == [config]
    assert redis.llen("queue:default") == 1


def test_the_dashboard_behind_an_async_hook(config):
    from fastapi import FastAPI

    async def staff_only(request) -> bool:
        return request.headers.get("x-staff") == "yes"

    app = FastAPI()
    mount_dashboard(app, wurk_web.create_app(config), prefix="/ops/wurk", protect=staff_only)
    with client_for(app) as client:
        assert client.get("/ops/wurk/queues").status_code == 403
        page = client.get("/ops/wurk/queues", headers={"x-staff": "yes"})
        assert page.status_code == 200
        assert '<base href="/ops/wurk/">' in page.text
        with pytest.raises(httpx.HTTPStatusError):
            client.post("/ops/wurk/api/queues/mail/pause", json={}).raise_for_status()

"""wurk.contrib.flask: the example app under gunicorn's sync workers pushes
after its commits (never after a rollback) for a real worker that sees the
row, serves the dashboard behind its hook and refuses the embedded worker in
one line; under Flask's own server it runs its jobs in its own process."""

from __future__ import annotations

import json
import signal

import pytest
from flask import Flask, request

import wurk
import wurk_web
from tests.helpers import WorkerPool, wait_for, with_db
from wurk.contrib.flask import Wurk
from wurk.errors import ConfigurationError
from wurk.redis import keys
from wurk.redis.servers import free_port

from .servers import EXAMPLES, gunicorn, receipts, serving, uwsgi

REFUSAL = "not starting the embedded worker"


@pytest.fixture
def env(redis_url, tmp_path):
    return {"REDIS_URL": redis_url, "DATABASE_URL": f"sqlite:///{tmp_path / 'orders.db'}", "ADMIN_TOKEN": "s3cret"}


@pytest.fixture
def workers(redis_url, tmp_path, env):
    # The example's jobs are named after its module, flask_app: the worker
    # runs from its folder, as a deployment would.
    pool = WorkerPool(redis_url, tmp_path, "flask_app.py", env, cwd=EXAMPLES)
    yield pool
    pool.stop_all()


def test_under_gunicorn_pushes_after_commit_for_a_real_worker_and_serves_the_dashboard(env, redis, tmp_path, workers):
    log = tmp_path / "gunicorn.log"
    with gunicorn("flask_app:app", log, {**env, "WURK_EMBEDDED": "1"}) as server:
        # One refusal per worker; a worker gunicorn restarts on a slow machine
        # refuses again, so count at least one per worker.
        wait_for(lambda: len(server.lines_with(REFUSAL)) >= 2, timeout=60)
        assert redis.smembers(keys.PROCESSES) == set()
        refused = server.http.post("/orders", data={"item": "lamp"}, params={"fail": "1"})
        assert refused.status_code == 409
        assert redis.llen("queue:default") == 0  # rolled back: nothing pushed
        placed = server.http.post("/orders", data={"item": "book"}).json()
        (payload,) = redis.lrange("queue:default", 0, -1)
        assert json.loads(payload)["jid"] == placed["jid"]
        assert server.http.get("/wurk/queues").status_code == 403
        page = server.http.get("/wurk/queues", headers={"X-Admin-Token": "s3cret"})
        assert page.status_code == 200
        assert '<base href="/wurk/">' in page.text
    for line in server.lines_with(REFUSAL):
        assert "this process is a gunicorn worker" in line
    worker = workers.start()
    wait_for(lambda: receipts(tmp_path / "orders.db"), timeout=60)
    assert receipts(tmp_path / "orders.db") == [(placed["order"], "book", worker.pid)]


def test_under_uwsgi_each_worker_refuses_the_embedded_worker_in_one_line_and_enqueues(env, redis, tmp_path):
    # --lazy-apps: each worker loads the app after the fork, as gunicorn's do.
    with uwsgi("flask_app:app", tmp_path / "uwsgi.log", {**env, "WURK_EMBEDDED": "1"}, "--lazy-apps") as server:
        wait_for(lambda: len(server.lines_with(REFUSAL)) >= 2, timeout=60)
        placed = server.http.post("/orders", data={"item": "book"}).json()
        (payload,) = redis.lrange("queue:default", 0, -1)
        assert json.loads(payload)["jid"] == placed["jid"]
        assert redis.smembers(keys.PROCESSES) == set()
    for line in server.lines_with(REFUSAL):
        assert "this process is a uWSGI worker" in line


def test_an_app_loaded_in_uwsgis_master_refuses_once_there(env, redis, tmp_path):
    with uwsgi("flask_app:app", tmp_path / "uwsgi.log", {**env, "WURK_EMBEDDED": "1"}) as server:
        wait_for(lambda: server.lines_with(REFUSAL), timeout=60)
        placed = server.http.post("/orders", data={"item": "lamp"}).json()
        assert json.loads(redis.lrange("queue:default", 0, -1)[0])["jid"] == placed["jid"]
        assert redis.smembers(keys.PROCESSES) == set()
    assert len(server.lines_with(REFUSAL)) == 1


def test_an_app_preloaded_in_gunicorns_master_refuses_once_there_and_still_enqueues(env, redis, tmp_path):
    log = tmp_path / "gunicorn.log"
    with gunicorn("flask_app:app", log, {**env, "WURK_EMBEDDED": "1"}, "--preload") as server:
        # Loaded once, in the master, before the fork: one refusal, no threads to lose.
        wait_for(lambda: server.lines_with(REFUSAL), timeout=60)
        placed = server.http.post("/orders", data={"item": "book"}).json()
        (payload,) = redis.lrange("queue:default", 0, -1)
        assert json.loads(payload)["jid"] == placed["jid"]
        assert redis.smembers(keys.PROCESSES) == set()
    assert len(server.lines_with(REFUSAL)) == 1


def test_flasks_own_server_runs_the_jobs_in_its_own_process_and_drains_at_exit(env, redis, tmp_path):
    port = free_port()
    command = ["-m", "flask", "--app", "flask_app", "run", "--port", str(port)]
    # A developer's Ctrl-C in a terminal, where SIGINT has its default action
    # (even when the suite runs with it ignored): Flask's server is the host
    # and keeps its own signal handling, which the embedded worker leaves alone.
    with serving(command, port, tmp_path / "flask.log", {**env, "WURK_EMBEDDED": "1"}, sigint=signal.SIG_DFL) as server:
        pid = server.http.get("/pid").json()["pid"]
        placed = server.http.post("/orders", data={"item": "book"}).json()
        wait_for(lambda: receipts(tmp_path / "orders.db"), timeout=30)
        assert receipts(tmp_path / "orders.db") == [(placed["order"], "book", pid)]
        server.process.signal(signal.SIGINT)
        server.process.wait(30)
    assert server.lines_with("bye"), server.text()
    assert redis.smembers(keys.PROCESSES) == set()


class Note(wurk.Job):
    def perform(self, text):
        pass


def test_app_config_goes_into_the_configuration_and_a_misspelt_key_is_refused(config):
    app = Flask(__name__)
    app.config["WURK"] = {"queues": ["mail", "default"], "timeout": 7}
    extension = Wurk(app)
    assert extension.config is config
    assert app.extensions["wurk"] is extension
    assert config.queues == ["mail", "default"]
    assert config["timeout"] == 7
    typo = Flask(__name__)
    typo.config["WURK"] = {"tiemout": 7}
    refusal = r"""^app.config\["WURK"\]: unknown option 'tiemout'; did you mean 'timeout'\?$"""
    with pytest.raises(ConfigurationError, match=refusal):
        Wurk().init_app(typo)


def test_handlers_push_through_the_applications_own_configuration(config, redis_url, redis):
    own = wurk.Config()
    own.redis = {"url": with_db(redis_url, 3)}
    try:
        app = Flask(__name__)
        Wurk(app, config=own)

        @app.post("/note")
        def note() -> dict[str, str | None]:
            return {"jid": Note.perform_async(request.form["text"])}

        client = app.test_client()
        jid = client.post("/note", data={"text": "hi"}).get_json()["jid"]
        (payload,) = own.redis_pool.client.lrange("queue:default", 0, -1)
        assert json.loads(payload)["jid"] == jid
        assert redis.llen("queue:default") == 0  # not the process default's Redis
    finally:
        own.reset_redis_pools()


def test_the_dashboard_hook_runs_in_the_apps_request_context(config, redis):
    from flask import session

    app = Flask(__name__)
    app.secret_key = "test"
    extension = Wurk(app)

    @app.post("/login")
    def login() -> str:
        session["staff"] = True
        return "ok"

    dashboard = wurk_web.wsgi_app(config=config)
    extension.mount_dashboard(app, dashboard, prefix="/ops/wurk", protect=lambda: session.get("staff"))
    client = app.test_client()
    assert client.get("/ops/wurk/queues").status_code == 403
    client.post("/login")
    page = client.get("/ops/wurk/queues")
    assert page.status_code == 200
    assert '<base href="/ops/wurk/">' in page.get_data(as_text=True)
    assert client.get("/ops/wurk/api/queues").get_json() == {"queues": []}

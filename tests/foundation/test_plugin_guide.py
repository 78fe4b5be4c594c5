"""The plugin author's guide, checked the way an author would check it.

``docs/examples/wurk-audit`` is installed with pip into a fresh virtual
environment next to ``wurk-core`` (and nothing else of this repository), and
a real worker of that environment runs jobs with it: its option, setting,
middleware, Lua script, outcome listener, component, dashboard page and
command all have to work from the installed distribution alone.
"""

from __future__ import annotations

import json
import signal
import socket
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from tests.helpers import ROOT, Subprocess, wait_for

pytestmark = pytest.mark.slow

APP = """
import wurk


@wurk.configure_server
def tune(config):
    config["audit_summary_interval"] = 0.2
    config["audit_keep"] = 2


class Fine(wurk.Job):
    def perform(self, n):
        pass


class Broken(wurk.Job, retry=False):
    def perform(self):
        raise ValueError("broken on purpose")


class Unaudited(wurk.Job, audit=False):
    def perform(self):
        pass
"""

ENQUEUE = """
import app

app.Fine.perform_async(1)
app.Fine.perform_async(2)
app.Broken.perform_async()
app.Unaudited.perform_async()
"""

SWITCHED_OFF = """
try:
    import app

    app.Unaudited.perform_async()
except Exception as exc:
    print(type(exc).__name__, exc)
"""

DASHBOARD = """
import json
import wurk

pages, routes = {}, {}


class Recorder:  # stands in for the dashboard's registry (wurk.plugins.web.WebRegistry)
    def add_page(self, path, title, render, *, nav=True):
        pages[path] = (title, render)

    def add_api(self, path, handler, methods=("GET",)):
        routes[path] = handler

    def add_static(self, prefix, directory):
        pass


config = wurk.default_config()
config.plugins.call.register_web(Recorder())
title, render = pages["/audit"]
print(json.dumps({"title": title, "html": render(config), "api": routes["/api/audit"](config)}))
try:
    config["audit_keep"] = 0
except wurk.ConfigurationError as exc:
    print(exc)
"""


@pytest.fixture(scope="module")
def author_env(tmp_path_factory) -> Path:
    """A fresh venv with wurk-core and the example plugin, installed by pip."""
    venv = tmp_path_factory.mktemp("author") / "venv"
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True)
    packages = [str(ROOT / "packages" / "wurk-core"), str(ROOT / "docs" / "examples" / "wurk-audit")]
    pip = [str(venv / "bin" / "pip"), "install", "--quiet", "--disable-pip-version-check", *packages]
    installed = subprocess.run(pip, capture_output=True, text=True, timeout=600)
    assert installed.returncode == 0, installed.stdout + installed.stderr
    return venv


def run(author_env: Path, *args: str, cwd: Path, redis_url: str, env: dict[str, str] | None = None) -> str:
    done = subprocess.run(
        [str(author_env / "bin" / args[0]), *args[1:]],
        cwd=cwd,
        env={"REDIS_URL": redis_url, "PATH": str(author_env / "bin"), "PYTHONPATH": str(cwd), **(env or {})},
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    return done.stdout


def test_the_example_plugin_works_from_a_clean_install_on_a_real_worker(author_env, redis_url, redis, tmp_path):
    (tmp_path / "app.py").write_text(textwrap.dedent(APP))
    (tmp_path / "enqueue.py").write_text(textwrap.dedent(ENQUEUE))
    (tmp_path / "dashboard.py").write_text(textwrap.dedent(DASHBOARD))
    env = {"REDIS_URL": redis_url, "PATH": str(author_env / "bin"), "PYTHONPATH": str(tmp_path)}

    listing = run(author_env, "wurk", "plugins", cwd=tmp_path, redis_url=redis_url)
    assert ["audit", "wurk-audit", "1.0.0", "enabled"] in [line.split()[:4] for line in listing.splitlines()]

    # One thread: the jobs end in the order pushed, so the two the audit keeps
    # (audit_keep) are the last success and the death.
    worker = Subprocess(
        [str(author_env / "bin" / "wurk"), "-r", "app", "-q", "default", "-c", "1"],
        env=env,
        cwd=tmp_path,
        log=tmp_path / "worker.log",
    )
    try:
        run(author_env, "python", "enqueue.py", cwd=tmp_path, redis_url=redis_url)
        wait_for(lambda: redis.hgetall("audit:counts") == {b"succeeded": b"2", b"died": b"1"}, timeout=30)
        recent = [json.loads(entry) for entry in redis.lrange("audit:recent", 0, -1)]
        assert len(recent) == 2  # audit_keep, set by the app
        assert {entry["enqueued_by"] for entry in recent} == {socket.gethostname()}  # the middleware's stamp
        assert ("app.Broken", "died", "retry_false") in {(e["class"], e["kind"], e["reason"]) for e in recent}

        # The component writes the summary while this worker leads, under its fence.
        wait_for(lambda: redis.get("audit:summary"), timeout=30)
        identity = redis.smembers("processes").pop().decode()
        wait_for(
            lambda: json.loads(redis.get("audit:summary")).get("succeeded") == 2, timeout=30
        )  # an early one may predate the jobs
        assert json.loads(redis.get("audit:summary"))["by"] == identity
    finally:
        worker.signal(signal.SIGTERM)
        assert worker.wait(30) == 0, worker.output()

    assert run(author_env, "wurk", "audit", cwd=tmp_path, redis_url=redis_url).split("\n")[:2] == [
        "died: 1",
        "succeeded: 2",
    ]
    page_line, refused = run(author_env, "python", "dashboard.py", cwd=tmp_path, redis_url=redis_url).splitlines()
    page = json.loads(page_line)
    assert page["title"] == "Audit"
    assert "<td>succeeded</td><td>2</td>" in page["html"]
    assert page["api"] == {"died": 1, "succeeded": 2}
    assert refused == "audit_keep must be a whole number >= 1, got 0 (a setting of wurk-audit)"

    # Switched off, the plugin is not imported, and its job option is refused
    # at enqueue, named from the installed metadata (its wurk.options group).
    (tmp_path / "switched_off.py").write_text(textwrap.dedent(SWITCHED_OFF))
    off = run(
        author_env,
        "python",
        "switched_off.py",
        cwd=tmp_path,
        redis_url=redis_url,
        env={"WURK_DISABLE_PLUGINS": "audit"},
    )
    assert off.startswith(
        "UnknownOptionError job app.Unaudited: job option 'audit' belongs to the 'audit' plugin of wurk-audit, "
        "which is switched off by WURK_DISABLE_PLUGINS"
    )

"""Plugins add pages and routes through wurk_register_web; the dashboard calls it for every enabled plugin."""

from __future__ import annotations

import html
from pathlib import Path

import pytest

import wurk
import wurk_web
from wurk.errors import PluginError
from wurk.plugins.web import WebError, WebRegistry, WebRequest
from wurk.redis import keys
from wurk_web.registry import Dashboard

from .live import client_for


def render_reports(request: WebRequest) -> str:
    name = html.escape(request.params.get("name", "all"))
    return f"<p id='reports'>Reports for {name}; read-only: {request.read_only}</p>"


def list_reports(request: WebRequest) -> object:
    return {"reports": ["daily"], "size": int(request.config.redis_pool.client.llen(keys.queue("default")))}


def run_report(request: WebRequest) -> object:
    name = request.path_params["name"]
    if name != "daily":
        raise WebError(404, f"no report {name}")
    request.config.redis_pool.client.set("reports:last", name)
    return {"ran": name, "body": request.body}


class ReportsPlugin:
    """A feature package's dashboard pages, knowing only core's protocol."""

    @wurk.hookimpl
    def wurk_register_web(self, app: WebRegistry) -> None:
        app.add_page("/reports", "Reports", render_reports)
        app.add_api("/api/reports", list_reports)
        app.add_api("/api/reports/{name}/run", run_report, methods=("POST",))
        app.add_static("/static/reports", Path(__file__).parent)


@pytest.fixture
def with_reports(config):
    plugin = ReportsPlugin()
    config.plugins.register(plugin, name="reports")
    try:
        yield config
    finally:
        config.plugins.unregister(plugin)


def test_a_plugin_page_and_route_appear_in_the_dashboard(with_reports, redis):
    with client_for(wurk_web.create_app(with_reports)) as client:
        page = client.get("/reports", params={"name": "<x>"})
        assert page.status_code == 200
        assert "Reports for &lt;x&gt;" in page.text
        assert '<a href="reports">Reports</a>' in client.get("/").text  # in the navigation bar
        assert client.get("/api/reports").json() == {"reports": ["daily"], "size": 0}
        assert client.post("/api/reports/daily/run", json={"n": 1}).json() == {"ran": "daily", "body": {"n": 1}}
        assert client.post("/api/reports/weekly/run", json={}).status_code == 404
        assert client.get("/static/reports/test_registry.py").status_code == 200
        assert "/api/reports/{name}/run" in client.get("/api/openapi.json").json()["paths"]
        refused = client.post("/api/reports/daily/run", json={}, headers={"Sec-Fetch-Site": "cross-site"})
        assert refused.status_code == 403
    assert redis.get("reports:last") == b"daily"


def test_a_plugin_route_is_refused_in_read_only_mode(with_reports, redis):
    with client_for(wurk_web.create_app(with_reports, read_only=True)) as client:
        assert "read-only: True" in client.get("/reports").text
        assert client.post("/api/reports/daily/run", json={}).status_code == 403
    assert redis.get("reports:last") is None


def test_without_the_plugin_there_is_no_page(config):
    with client_for(wurk_web.create_app(config)) as client:
        assert client.get("/reports").status_code == 404
        assert "reports" not in client.get("/").text


def test_the_registry_refuses_clashes_and_bad_paths(tmp_path):
    app = Dashboard()
    app.add_api("/api/x", list_reports)
    with pytest.raises(PluginError, match="registered twice"):
        app.add_api("/api/x", list_reports)
    app.add_api("/api/x", run_report, methods=("post",))  # another method of the same path is fine
    with pytest.raises(PluginError, match="under /api/"):
        app.add_api("/x", list_reports)
    with pytest.raises(PluginError, match="methods"):
        app.add_api("/api/y", list_reports, methods=("FETCH",))
    with pytest.raises(PluginError, match="cannot live under"):
        app.add_page("/api/page", "P", render_reports)
    with pytest.raises(PluginError, match="not a directory"):
        app.add_static("/static/none", tmp_path / "missing")
    registry: WebRegistry = app  # the dashboard's registry is core's protocol
    assert registry is app


class ScriptedPlugin:
    """A page with its own script and stylesheet, served from the plugin's folder."""

    @wurk.hookimpl
    def wurk_register_web(self, app: WebRegistry) -> None:
        app.add_page(
            "/scripted",
            "Scripted",
            render_reports,
            scripts=("/static/scripted/test_registry.py",),
            styles=("/static/scripted/conftest.py",),
        )
        app.add_static("/static/scripted", Path(__file__).parent)


def test_a_page_loads_its_own_script_and_style_after_the_dashboards(config):
    plugin = ScriptedPlugin()
    config.plugins.register(plugin, name="scripted")
    try:
        with client_for(wurk_web.create_app(config)) as client:
            page = client.get("/scripted").text
            other = client.get("/queues").text
    finally:
        config.plugins.unregister(plugin)
    core = page.index('<script src="static/wurk/app.js" defer></script>')
    own = page.index('<script src="static/scripted/test_registry.py" defer></script>')
    assert core < own < page.index("</head>")
    assert '<link rel="stylesheet" href="static/scripted/conftest.py">' in page
    assert "static/scripted" not in other  # only its own page loads it


def test_a_page_asset_must_be_a_static_file_of_the_dashboard():
    app = Dashboard()
    for bad in ("https://cdn.example/x.js", "static/x.js", "/static/../secret.js"):
        with pytest.raises(PluginError, match="files under /static/"):
            app.add_page(f"/p{len(bad)}", "P", render_reports, scripts=(bad,))
    with pytest.raises(PluginError, match="list of URLs"):
        app.add_page("/q", "Q", render_reports, styles="/static/x.css")

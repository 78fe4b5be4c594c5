"""The dashboard mounted in FastAPI, Starlette, Django (ASGI and WSGI) and Flask.

Each host serves a page of its own beside the dashboard at /wurk, and a
change sent through the host reaches Redis.
"""

from __future__ import annotations

import sys
import types

import httpx
import pytest

import wurk_web
from wurk.redis import keys
from wurk_web import mount

from .live import client_for


def check_mounted(client, redis, own_page: str) -> None:
    assert client.get(own_page).status_code == 200
    page = client.get("/wurk/queues")
    assert page.status_code == 200
    assert '<base href="/wurk/">' in page.text  # links and API calls stay under the mount
    assert client.get("/wurk/static/wurk/app.js").status_code == 200
    # The icon every page links, and the one a browser asks for by default, both under the mount: no 404s.
    assert '<link rel="icon" href="static/wurk/favicon.svg"' in page.text
    for icon in ("/wurk/static/wurk/favicon.svg", "/wurk/favicon.ico"):
        answer = client.get(icon)
        assert (answer.status_code, answer.headers["content-type"]) == (200, "image/svg+xml"), icon
        assert answer.content.startswith(b"<svg ")
    assert client.get("/wurk/api/queues").json() == {"queues": []}
    assert client.post("/wurk/api/queues/mail/pause", json={}).status_code == 200
    assert redis.smembers(keys.PAUSED) == {b"mail"}


def test_fastapi(config, redis):
    from fastapi import FastAPI

    app = FastAPI()

    @app.get("/hello")
    def hello() -> dict[str, str]:
        return {"hello": "world"}

    app.mount("/wurk", wurk_web.create_app(config))
    with client_for(app) as client:
        check_mounted(client, redis, "/hello")


def test_starlette(config, redis):
    from starlette.applications import Starlette
    from starlette.responses import PlainTextResponse
    from starlette.routing import Mount, Route

    async def home(request):
        return PlainTextResponse("home")

    app = Starlette(routes=[Route("/", home), Mount("/wurk", wurk_web.create_app(config))])
    with client_for(app) as client:
        check_mounted(client, redis, "/")


@pytest.fixture(scope="module")
def django_site():
    """A one-view Django project, configured in this process."""
    import django
    from django.conf import settings
    from django.http import HttpResponse
    from django.urls import path

    urls = types.ModuleType("wurk_web_test_urls")
    urls.urlpatterns = [path("hello/", lambda request: HttpResponse("hello"))]  # type: ignore[attr-defined]
    sys.modules[urls.__name__] = urls
    if not settings.configured:
        settings.configure(ROOT_URLCONF=urls.__name__, ALLOWED_HOSTS=["*"], SECRET_KEY="test", DEBUG=False)
        django.setup()
    yield
    sys.modules.pop(urls.__name__, None)


def test_django_asgi(config, redis, django_site):
    from django.core.asgi import get_asgi_application

    application = mount.asgi("/wurk", wurk_web.create_app(config), get_asgi_application())
    with client_for(application) as client:
        check_mounted(client, redis, "/hello/")


def test_django_wsgi(config, redis, django_site):
    from django.core.wsgi import get_wsgi_application

    application = mount.wsgi("/wurk", wurk_web.wsgi_app(config=config), get_wsgi_application())
    with httpx.Client(transport=httpx.WSGITransport(app=application), base_url="http://testserver") as client:
        check_mounted(client, redis, "/hello/")


def test_flask(config, redis):
    from flask import Flask

    app = Flask(__name__)

    @app.get("/hello")
    def hello() -> str:
        return "hello"

    mount.flask(app, "/wurk", config=config)
    with httpx.Client(transport=httpx.WSGITransport(app=app.wsgi_app), base_url="http://testserver") as client:
        check_mounted(client, redis, "/hello")
        refused = client.post("/wurk/api/queues/mail/clear", json={}, headers={"Origin": "https://evil.example"})
        assert refused.status_code == 403


def test_a_mount_prefix_is_a_path():
    with pytest.raises(ValueError, match="prefix"):
        mount.wsgi("wurk", wurk_web.wsgi_app, wurk_web.wsgi_app)  # type: ignore[arg-type]

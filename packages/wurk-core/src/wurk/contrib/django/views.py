"""The dashboard as a Django view, behind Django's own authentication.

The view asks ``settings.WURK_DASHBOARD_ACCESS`` (a callable taking the
request, or its dotted path; staff users by default) and hands an allowed
request to the dashboard's WSGI application (:mod:`wurk_web.mount`), with
``SCRIPT_NAME`` set to where the URLconf put it, so its links and API calls
stay under that path. A visitor who is not logged in is sent to the login
page; a logged-in one who is not allowed gets a 403.

Django's CSRF middleware is left out for this view only: the dashboard
guards its own changes (same-origin requests only, JSON bodies only; see
docs/dashboard.md), and its pages do not carry Django's token.
"""

from __future__ import annotations

import io
import sys
import threading
from collections.abc import Callable, Iterable
from typing import Any

from django.conf import settings
from django.contrib.auth.views import redirect_to_login
from django.core.exceptions import ImproperlyConfigured
from django.http import HttpRequest, HttpResponse, HttpResponseForbidden, StreamingHttpResponse
from django.utils.module_loading import import_string
from django.views.decorators.csrf import csrf_exempt

ACCESS_SETTING = "WURK_DASHBOARD_ACCESS"

_lock = threading.Lock()
_app: Callable[..., Iterable[bytes]] | None = None


def staff_only(request: Any) -> bool:
    """The default rule: an active staff user."""
    user = getattr(request, "user", None)
    return bool(user is not None and user.is_active and user.is_staff)


def access_rule() -> Callable[[Any], bool]:
    rule = getattr(settings, ACCESS_SETTING, None)
    if rule is None:
        return staff_only
    if isinstance(rule, str):
        rule = import_string(rule)
    if not callable(rule):
        raise TypeError(f"settings.{ACCESS_SETTING} must be a callable taking the request, got {rule!r}")
    return rule  # type: ignore[no-any-return]


def dashboard_app() -> Callable[..., Iterable[bytes]]:
    """The dashboard's WSGI application, built once per process."""
    global _app
    with _lock:
        if _app is None:
            try:
                from wurk_web.mount import wsgi_app
            except ImportError as exc:
                raise ImproperlyConfigured(
                    "the dashboard is wurk-web's: pip install wurk-web, or leave wurk.contrib.django.urls out"
                ) from exc
            _app = wsgi_app()
        return _app


def environ_for(request: HttpRequest, path: str) -> dict[str, Any]:
    """A WSGI environ for the dashboard: the request's, mounted where ``path`` begins."""
    inner = "/" + path
    full = request.path
    mount = full[: len(full) - len(path)].rstrip("/") if full.endswith(path) else full.rstrip("/")
    environ = {key: value for key, value in request.META.items() if isinstance(key, str)}
    environ.update(
        {
            "SCRIPT_NAME": mount,
            "PATH_INFO": inner,
            "wsgi.input": io.BytesIO(request.body),
            "wsgi.errors": sys.stderr,
            "wsgi.url_scheme": request.scheme,
            "wsgi.version": (1, 0),
            "wsgi.multithread": True,
            "wsgi.multiprocess": True,
            "wsgi.run_once": False,
        }
    )
    environ["CONTENT_LENGTH"] = str(len(request.body))
    return environ


@csrf_exempt
def dashboard(request: HttpRequest, path: str = "") -> HttpResponse | StreamingHttpResponse:
    """Serve the dashboard page or API route at ``path`` below the mount point."""
    if not access_rule()(request):
        user = getattr(request, "user", None)
        if user is None or not user.is_authenticated:
            return redirect_to_login(request.get_full_path())
        return HttpResponseForbidden("The dashboard is for staff only.")
    started: dict[str, Any] = {}

    def start_response(status: str, headers: list[tuple[str, str]], exc_info: Any = None) -> None:
        started["status"], started["headers"] = status, headers

    body = dashboard_app()(environ_for(request, path), start_response)
    chunks = iter(body)
    first = next(chunks, b"")  # the application starts its response with its first chunk
    status = int(started["status"].split(" ", 1)[0])
    headers = {name.lower(): value for name, value in started["headers"]}
    response: HttpResponse | StreamingHttpResponse
    if headers.get("content-type", "").startswith("text/event-stream"):
        response = StreamingHttpResponse(_closing(first, chunks, body), status=status)
    else:
        response = HttpResponse(b"".join(_closing(first, chunks, body)), status=status)
    for name, value in started["headers"]:
        response[name] = value
    return response


def _closing(first: bytes, rest: Iterable[bytes], body: Iterable[bytes]) -> Iterable[bytes]:
    """The response's chunks, and the application's ``close`` once they are read."""
    try:
        yield first
        yield from rest
    finally:
        close = getattr(body, "close", None)
        if close is not None:
            close()

"""The opt-in health check: ``/live`` and ``/ready`` for orchestrators.

``config.health_check(port=7433)`` starts a small HTTP listener in each
worker process, last in the boot sequence, and closes it at shutdown.

* ``GET /live``: 200 while the process runs and is not quiet; 503 once it is
  quiet or stopping (so an orchestrator replaces a quieted pod).
* ``GET /ready``: 200 when Redis answers a PING and the last heartbeat is
  younger than ``ready_window`` seconds; 503 otherwise.
* Any other path is a 404 and any other method a 405, both with a JSON body.

The port is for probes, so it answers with as little as they need: no
request is echoed back, every answer is ``nosniff`` and ``no-store``, and a
connection that sends nothing for :data:`REQUEST_TIMEOUT` seconds is closed,
so idle connections cannot pile up threads in the worker (docs/security.md).

Port sharing (``share=True``): several worker processes of one host or pod
(a swarm's children) are configured with the same port, and a probe needs
only one of them to answer. The first to bind serves; each of the others
finds the port in use and, instead of failing its boot, tries again every
``retry`` seconds. When the serving process exits, however abruptly, the
kernel frees the port and a survivor takes it over within ``retry`` seconds.
Without sharing, a port in use fails the boot: a single process must not
start without the probes its orchestrator relies on.
"""

from __future__ import annotations

import errno
import json
import socketserver
import time
from http import HTTPStatus
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import TYPE_CHECKING, Any

from wurk.config.accessors import SHARE_RETRY
from wurk.errors import ConfigurationError
from wurk.plugins.component import Component

if TYPE_CHECKING:
    from wurk.config.configuration import Config
    from wurk.server.runtime import Runtime

#: The plugin API (docs/plugins.md): the swarm asks ``share_port`` whether its
#: children take turns on one health port.
__all__ = ["SHARE_RETRY", "HealthCheck", "share_port"]

#: Seconds the accept loop waits for a request before it checks for a stop request.
POLL = 0.2

#: Seconds a connection may stay silent before it is closed: a probe sends
#: its request at once, an idle or trickling connection only holds a thread.
REQUEST_TIMEOUT = 5.0


class HealthCheck(Component):
    name = "wurk-health"
    context = "health check"

    def __init__(
        self,
        runtime: Runtime,
        port: int,
        bind: str = "0.0.0.0",
        ready_window: float = 30,
        share: bool = False,
        retry: float = SHARE_RETRY,
    ) -> None:
        super().__init__(runtime.config)
        self.runtime = runtime
        self.ready_window = ready_window
        self.address = (bind, port)
        self.share = share
        self.retry = retry
        self.server: ThreadingHTTPServer | None = None
        # Bound here, at boot, so that a port in use fails the start, not a
        # thread; a shared port in use is taken over later by run().
        self.bind()

    @property
    def port(self) -> int:
        """The port served, or the one waited for while another process holds it."""
        if self.server is None:
            return self.address[1]
        return int(self.server.server_address[1])

    @property
    def serving(self) -> bool:
        return self.server is not None

    def bind(self) -> bool:
        """Take the port; whether this process now holds it.

        A port in use is a boot failure unless it is shared; any other
        error (a bad address, a privileged port) always is.
        """
        try:
            self.server = _Server(self.address, _handler_for(self))
        except OSError as exc:
            if exc.errno != errno.EADDRINUSE:
                raise
            if not self.share:
                bind, port = self.address
                raise ConfigurationError(
                    f"health check port {port} on {bind} is in use: stop whatever holds it, choose "
                    "another port, or pass share=True to config.health_check() when several worker "
                    "processes of one host are meant to share it"
                ) from exc
            return False
        return True

    def run(self) -> None:
        if self.server is None and not self._take_over():
            return
        server = self.server
        assert server is not None
        # One request at a time is accepted here (each is answered on a thread
        # of its own); the short timeout lets a stop request end the loop
        # without a second thread to call ``shutdown``.
        server.timeout = POLL
        while not self.stopping:
            server.handle_request()

    def _take_over(self) -> bool:
        """Wait for the shared port; whether it was taken (else: stopping)."""
        bind, port = self.address
        self.config.logger.info(
            "health check port %s on %s is served by another process; trying every %ss to take it over",
            port,
            bind,
            self.retry,
        )
        while not self.wait(self.backed_off(self.retry)):
            # Errors other than "in use" are reported and retried at the back-off's pace.
            if self.guarded(self.bind) and self.server is not None:
                self.config.logger.info("health check now serving on port %s", self.port)
                return True
        return False

    def finish(self) -> None:
        if self.server is not None:
            self.server.server_close()

    def live(self) -> tuple[int, dict[str, Any]]:
        runtime = self.runtime
        if runtime.stopping:
            return 503, {"status": "stopping"}
        if runtime.quieted:
            return 503, {"status": "quiet"}
        return 200, {"status": "live"}

    def ready(self) -> tuple[int, dict[str, Any]]:
        try:
            self.config.redis_pool.execute(lambda conn: conn.ping())
        except Exception as exc:
            return 503, {"status": "redis unreachable", "error": str(exc)}
        beat = self.runtime.last_beat
        if beat is None or time.time() - beat > self.ready_window:
            return 503, {"status": "heartbeat stale", "last_beat": beat}
        return 200, {"status": "ready", "last_beat": beat}


def share_port(config: Config, retry: float | None = None) -> bool:
    """Switch an opted-in health check to port sharing; whether one is configured.

    For a supervisor that runs several workers from one configuration (the
    swarm calls it in its parent, before forking): the user's
    ``config.health_check(port=...)`` stays as written, and every child
    shares that port. Without a health check it does nothing.
    """
    options = config.option("health_check_options")
    if not options:
        return False
    shared = {**options, "share": True}
    if retry is not None:
        shared["retry"] = retry
    config.health_check(**shared)
    return True


class _Server(ThreadingHTTPServer):
    """The listener, with the socket options that make a takeover work.

    ``SO_REUSEADDR`` lets a new owner bind while connections the last one
    answered still sit in TIME_WAIT (the server closes each connection, so
    they are on its side, for a minute): without it a takeover would fail
    until they expire. ``SO_REUSEPORT`` stays off: with it every process
    would bind at once and the kernel would spread probes over them, so a
    probe could no longer tell which process answered it, and an unrelated
    process of the same user could bind the port too.
    """

    allow_reuse_address = True
    allow_reuse_port = False
    daemon_threads = True  # a slow prober never holds a stopping process

    def server_bind(self) -> None:
        # HTTPServer's own server_bind resolves the host's FQDN, which can
        # wait on DNS for seconds at every attempt; the name is never used here.
        socketserver.TCPServer.server_bind(self)
        host, port = self.server_address[:2]
        self.server_name, self.server_port = str(host), int(port)


def _handler_for(check: HealthCheck) -> type[BaseHTTPRequestHandler]:
    routes = {"/live": check.live, "/ready": check.ready}

    class Handler(BaseHTTPRequestHandler):
        timeout = REQUEST_TIMEOUT
        # The default names the Python version: nothing a probe needs.
        server_version = "wurk"
        sys_version = ""

        def do_GET(self) -> None:
            route = routes.get(self.path.split("?", 1)[0])
            if route is None:
                self._reply(404, {"error": "no such route; try /live or /ready"})
            else:
                self._reply(*route())

        def _not_allowed(self) -> None:
            self._reply(405, {"error": f"{self.command} is not allowed; use GET"})

        do_POST = do_PUT = do_DELETE = do_PATCH = _not_allowed

        def send_error(self, code: int, message: str | None = None, explain: str | None = None) -> None:
            # The standard library's error page is HTML quoting the request
            # line; a probe needs the status, and the body stays JSON.
            self.close_connection = True
            self._reply(code, {"error": HTTPStatus(code).phrase.lower()})

        def _reply(self, status: int, body: dict[str, Any]) -> None:
            data = json.dumps(body).encode()
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            self.send_header("X-Content-Type-Options", "nosniff")
            self.send_header("Cache-Control", "no-store")
            self.end_headers()
            self.wfile.write(data)

        def log_message(self, format: str, *args: Any) -> None:
            pass  # probes every few seconds would flood the log

    return Handler

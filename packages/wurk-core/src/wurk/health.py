"""The opt-in health check: ``/live`` and ``/ready`` for orchestrators.

``config.health_check(port=7433)`` starts a small HTTP listener in each
worker process, last in the boot sequence, and closes it at shutdown.

* ``GET /live``: 200 while the process runs and is not quiet; 503 once it is
  quiet or stopping (so an orchestrator replaces a quieted pod).
* ``GET /ready``: 200 when Redis answers a PING and the last heartbeat is
  younger than ``ready_window`` seconds; 503 otherwise.
* Any other path is a 404 and any other method a 405, both with a JSON body.
"""

from __future__ import annotations

import json
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import TYPE_CHECKING, Any

from wurk.component import Component

if TYPE_CHECKING:
    from wurk.runtime import Runtime


class HealthCheck(Component):
    name = "wurk-health"
    context = "health check"

    def __init__(self, runtime: Runtime, port: int, bind: str = "0.0.0.0", ready_window: float = 30) -> None:
        super().__init__(runtime.config)
        self.runtime = runtime
        self.ready_window = ready_window
        # Bound here, at boot, so that a port in use fails the start, not a thread.
        self.server = ThreadingHTTPServer((bind, port), _handler_for(self))
        self.server.daemon_threads = True

    @property
    def port(self) -> int:
        return int(self.server.server_address[1])

    def run(self) -> None:
        self.server.serve_forever(poll_interval=0.2)

    def wake(self) -> None:
        # ``shutdown`` waits for the accept loop to end, and forever if it never
        # began: from a thread of its own, so a stop request never blocks.
        if self.running:
            threading.Thread(target=self.server.shutdown, name="wurk-health-stop", daemon=True).start()

    def finish(self) -> None:
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


def _handler_for(check: HealthCheck) -> type[BaseHTTPRequestHandler]:
    routes = {"/live": check.live, "/ready": check.ready}

    class Handler(BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            route = routes.get(self.path.split("?", 1)[0])
            if route is None:
                self._reply(404, {"error": f"no route {self.path}; try /live or /ready"})
            else:
                self._reply(*route())

        def _not_allowed(self) -> None:
            self._reply(405, {"error": f"{self.command} is not allowed; use GET"})

        do_POST = do_PUT = do_DELETE = do_PATCH = _not_allowed

        def _reply(self, status: int, body: dict[str, Any]) -> None:
            data = json.dumps(body).encode()
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def log_message(self, format: str, *args: Any) -> None:
            pass  # probes every few seconds would flood the log

    return Handler

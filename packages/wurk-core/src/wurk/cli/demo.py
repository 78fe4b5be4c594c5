"""``wurk demo``: the three parts of a Wurk setup, from nothing, in one terminal.

A server (the embedded Valkey that ``wurk server`` runs, here on a free port
and keeping nothing on disk, so that every demo starts from empty counters and
queues), a client (this process, enqueueing sample jobs the way a web
application would) and a worker (a real ``wurk -r wurk.cli.demo`` child
process, the command you run on your own app). It runs until Ctrl-C, so there
is time to open the dashboard it prints; ``--seconds`` bounds it.

This module is also the demo's application: it only *defines* jobs, so the
worker that imports it enqueues nothing; enqueueing is :func:`enqueue_samples`,
called by the demo command alone.
"""

from __future__ import annotations

import contextlib
import os
import random
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import click

import wurk
from wurk.cli import plural
from wurk.errors import WurkError
from wurk.redis.servers import embedded_server

#: The worker's command line after ``wurk``: the demo's queues, by weight. Its
#: environment is not "development", where a failing job logs its whole
#: traceback: the sample that always fails would fill the screen.
WORKER_ARGS = ("-r", "wurk.cli.demo", "-q", "critical,3", "-q", "default,2", "-q", "low", "-c", "5", "-e", "demo")
#: How long the worker may take to drain when the demo stops it (its shutdown timeout plus margin).
WORKER_STOP_TIMEOUT = 35.0


@wurk.job(queue="default")
def say_hello(name: str) -> str:
    return f"hello, {name}"


@wurk.job(queue="critical", retry=3)
def charge(order_id: int, cents: int) -> None:
    if cents < 0:
        raise ValueError(f"order {order_id}: cannot charge {cents} cents")


@wurk.job(queue="low")
def resize_image(path: str, width: int) -> None:
    sum(i * i for i in range(width * 100))


@wurk.job(queue="default", retry=1)
def flaky(order_id: int) -> None:
    raise ConnectionError(f"order {order_id}: the payment gateway timed out (this sample always fails)")


@wurk.configure_server
def _demo_pace(config: wurk.Config) -> None:
    # A demo lasts seconds: look for due scheduled jobs every second, from the
    # start, instead of the production pace (a first pass after 10 s).
    config["poll_interval_average"] = 1.0


def enqueue_samples(count: int) -> list[str | None]:
    """Enqueue ``count`` sample jobs now, one in 5 seconds, and one that fails into the retry set."""
    jids: list[str | None] = []
    names = ["Ada", "Grace", "Linus", "Guido", "Yukihiro", "Margaret"]
    for index in range(count):
        kind = index % 3
        if kind == 0:
            jids.append(say_hello.perform_async(random.choice(names)))
        elif kind == 1:
            jids.append(charge.perform_async(1000 + index, random.randint(100, 9000)))
        else:
            jids.append(resize_image.perform_async(f"/tmp/img-{index}.png", 640))
    jids.append(say_hello.perform_in(5, "from the future"))
    jids.append(flaky.perform_async(7))
    return jids


def summary(conn: Any) -> str:
    """One line of counts, read from Redis the way ``wurk stats`` reads them."""
    from wurk.redis import keys

    waiting = sum(conn.llen(keys.queue(q.decode())) for q in conn.smembers(keys.QUEUES))
    return (
        f"processed={int(conn.get(keys.STAT_PROCESSED) or 0)} failed={int(conn.get(keys.STAT_FAILED) or 0)} "
        f"waiting={waiting} scheduled={conn.zcard(keys.SCHEDULE)} retries={conn.zcard(keys.RETRY)} "
        f"dead={conn.zcard(keys.DEAD)}"
    )


def run_demo(data_dir: Path, count: int, seconds: float | None, *, web_port: int | None = None) -> None:
    """Server, client and worker until Ctrl-C or TERM, or for ``seconds`` when given.

    With ``web_port``, the dashboard (``wurk web``, a plugin's command) is
    served on it too, or on a free port when that one is taken.

    The server and the worker run in sessions of their own, so that a Ctrl-C
    reaches only the demo, which then stops each of them once. INT and TERM
    both get this process's own handler: a demo started in the background by
    a script (``wurk demo &``) inherits INT ignored, and Python then leaves it
    ignored, so Ctrl-C's signal would never stop it; TERM left to its default
    would end the demo at once and leave the server and the worker behind.
    """
    previous = {signum: signal.signal(signum, _interrupt) for signum in (signal.SIGINT, signal.SIGTERM)}
    try:
        _run(data_dir, count, seconds, web_port)
    finally:
        for signum, handler in previous.items():
            signal.signal(signum, handler)


def _interrupt(signum: int, frame: object) -> None:
    raise KeyboardInterrupt


def _run(data_dir: Path, count: int, seconds: float | None, web_port: int | None) -> None:
    server = embedded_server(data_dir, persist=False)
    click.echo(f"server: starting the embedded Valkey (what `wurk server` runs), empty, its log in {server.data_dir}")
    with server:
        click.echo(f"server: ready at {server.url}")
        config = wurk.default_config()
        config.redis = {"url": server.url}
        conn = config.redis_pool.client
        jids = enqueue_samples(count)
        click.echo(
            f"client: enqueued {plural(len(jids), 'job')} of wurk.cli.demo (one for in 5 s, one that fails and retries)"
        )
        click.echo(f"worker: REDIS_URL={server.url} wurk {' '.join(WORKER_ARGS)}")
        worker = subprocess.Popen(
            [sys.executable, "-m", "wurk.cli", *WORKER_ARGS],
            env={**os.environ, "REDIS_URL": server.url},
            start_new_session=True,  # Ctrl-C reaches the demo, which stops the worker once, gracefully
        )
        dashboard = None if web_port is None else _start_dashboard(server.url, web_port)
        length = "until you press Ctrl-C" if seconds is None else f"for {seconds:g} s (Ctrl-C stops it sooner)"
        click.echo(f"demo: running {length}; the counts below change as the jobs run")
        try:
            _watch(worker, conn, seconds)
        except KeyboardInterrupt:
            click.echo("demo: interrupted")
        finally:
            _stop_worker(worker)
            if dashboard is not None:
                _stop_worker(dashboard)
        click.echo(f"worker stopped: {summary(conn)}")
        config.reset_redis_pools()
    click.echo("server: stopped; it kept nothing, so the next `wurk demo` starts clean")


def _free_port(preferred: int) -> int:
    """``preferred`` when nothing listens on it on 127.0.0.1, else a free port."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
        try:
            probe.bind(("127.0.0.1", preferred))
        except OSError:
            probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def _start_dashboard(url: str, preferred: int) -> subprocess.Popen[bytes]:
    port = _free_port(preferred)
    dashboard = subprocess.Popen(
        [sys.executable, "-m", "wurk.cli", "web", "--port", str(port)],
        env={**os.environ, "REDIS_URL": url},
        stdout=subprocess.DEVNULL,
        start_new_session=True,
    )
    click.echo(f"dashboard: http://127.0.0.1:{port}/ (the demo's jobs, live, while it runs)")
    return dashboard


def _watch(worker: subprocess.Popen[bytes], conn: Any, seconds: float | None) -> None:
    """Print the counts each time they change, until ``seconds`` have passed (never, for None)."""
    deadline = None if seconds is None else time.monotonic() + seconds
    shown = None
    while deadline is None or time.monotonic() < deadline:
        wait = 1.0 if deadline is None else min(1.0, max(deadline - time.monotonic(), 0.0))
        try:
            code = worker.wait(timeout=wait)
        except subprocess.TimeoutExpired:
            counts = summary(conn)
            if counts != shown:  # a quiet line once the jobs are done, not one a second forever
                click.echo(f"demo: {counts}")
                shown = counts
            continue
        raise WurkError(f"the demo worker exited early with code {code}; its output is above")


def _stop_worker(worker: subprocess.Popen[bytes]) -> None:
    if worker.poll() is not None:
        return
    with contextlib.suppress(ProcessLookupError):
        worker.send_signal(signal.SIGTERM)
    try:
        worker.wait(WORKER_STOP_TIMEOUT)
    except (subprocess.TimeoutExpired, KeyboardInterrupt):  # stuck, or a second Ctrl-C: do not wait
        worker.kill()
        worker.wait()

"""``wurk demo``: Wurk on the embedded default, from nothing.

Starts an embedded Valkey persisted (AOF) under a local data directory,
enqueues a set of sample jobs through the real client, and reports what is in
Redis. The sample jobs below are ordinary Wurk jobs.
"""

from __future__ import annotations

import random
import time
from pathlib import Path
from typing import Any

import click

import wurk
from wurk.embedded import embedded_server


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


def enqueue_samples(count: int) -> list[str | None]:
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
    return jids


@wurk.job(queue="default", retry=1)
def flaky(order_id: int) -> None:
    raise ConnectionError(f"order {order_id}: the payment gateway timed out (this sample always fails)")


def _summary(conn: object) -> str:
    from wurk import keys

    c: Any = conn
    waiting = sum(c.llen(keys.queue(q.decode())) for q in c.smembers(keys.QUEUES))
    return (
        f"processed={int(c.get(keys.STAT_PROCESSED) or 0)} failed={int(c.get(keys.STAT_FAILED) or 0)} "
        f"waiting={waiting} scheduled={c.zcard(keys.SCHEDULE)} retries={c.zcard(keys.RETRY)} dead={c.zcard(keys.DEAD)}"
    )


@click.command("demo")
@click.option("--data-dir", default=".wurk", show_default=True, help="Where the embedded server keeps its data.")
@click.option("--jobs", "count", default=30, show_default=True, help="How many sample jobs to enqueue.")
@click.option("--seconds", default=15.0, show_default=True, help="How long the worker runs before the demo stops.")
def demo_command(data_dir: str, count: int, seconds: float) -> None:
    """Start the embedded server, enqueue sample jobs, and run a worker on them."""
    server = embedded_server(Path(data_dir))
    click.echo(f"starting the embedded Valkey server (data in {Path(data_dir).resolve()}) ...")
    with server:
        config = wurk.default_config()
        config.redis = {"url": server.url}
        config["poll_interval_average"] = 1.0
        config["heartbeat_interval"] = 2.0
        click.echo(f"server ready at {server.url}")
        enqueue_samples(count)
        flaky.perform_async(7)
        click.echo(f"enqueued {count + 2} sample jobs (one scheduled in 5 s, one that fails and retries)")
        conn = config.redis_pool.client
        instance = wurk.configure_embed(lambda cfg: cfg.update({"queues": ["critical,3", "default,2", "low,1"]}))
        instance.config.concurrency = 5
        instance.run()
        deadline = time.monotonic() + seconds
        try:
            while time.monotonic() < deadline:
                time.sleep(1.0)
                click.echo(f"  {_summary(conn)}")
        finally:
            instance.stop()
        click.echo(f"worker stopped: {_summary(conn)}")
        click.echo("jobs not yet run stay persisted; run `wurk demo` again to pick them up.")
    click.echo("embedded server stopped")

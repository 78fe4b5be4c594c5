"""``wurk demo``: Wurk on the embedded default, from nothing.

Starts an embedded Valkey persisted (AOF) under a local data directory,
enqueues a set of sample jobs through the real client, and reports what is in
Redis. The sample jobs below are ordinary Wurk jobs.
"""

from __future__ import annotations

import random
from pathlib import Path

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
    jids.append(say_hello.perform_in(60, "from the future"))
    return jids


@click.command("demo")
@click.option("--data-dir", default=".wurk", show_default=True, help="Where the embedded server keeps its data.")
@click.option("--jobs", "count", default=30, show_default=True, help="How many sample jobs to enqueue.")
def demo_command(data_dir: str, count: int) -> None:
    """Start the embedded server, enqueue sample jobs, and show them in Redis."""
    server = embedded_server(Path(data_dir))
    click.echo(f"starting the embedded Valkey server (data in {Path(data_dir).resolve()}) ...")
    with server:
        config = wurk.default_config()
        config.redis = {"url": server.url}
        click.echo(f"server ready at {server.url}")
        jids = enqueue_samples(count)
        click.echo(f"enqueued {len(jids)} sample jobs through the client")
        conn = config.redis_pool.client
        for queue in sorted(q.decode() for q in conn.smembers("queues")):
            click.echo(f"  queue:{queue:<9} {conn.llen(f'queue:{queue}'):>4} jobs waiting")
        click.echo(f"  schedule         {conn.zcard('schedule'):>4} scheduled")
        click.echo(
            "the worker runtime (wurk -r app.py) is not in this release yet, so the jobs stay queued;\n"
            "they are persisted and will be there the next time the embedded server starts."
        )
    click.echo("embedded server stopped")

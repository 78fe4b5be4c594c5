"""A complete third-party Wurk plugin, used by docs/architecture.md.

It stamps every pushed job with the host that enqueued it (a client
middleware), declares the job option it reads, and adds a ``wurk audit``
command. Publish it under the ``wurk`` entry-point group::

    [project.entry-points.wurk]
    audit = "audit_plugin"
"""

from __future__ import annotations

import socket

import click

import wurk


class StampEnqueuer(wurk.ClientMiddleware):
    """Record which host enqueued a job, unless the job opted out."""

    def call(self, job_class, job, queue, redis_pool, call_next):
        if job.get("audit", True):
            job.setdefault("enqueued_by", socket.gethostname())
        return call_next()


@wurk.hookimpl
def wurk_register_options(options):
    options.add("audit", owner="audit-plugin")


@wurk.hookimpl
def wurk_register_middleware(client, server, config):
    client.add(StampEnqueuer)


@click.command("audit")
def audit_command():
    """Say which host this process would stamp on the jobs it pushes."""
    click.echo(f"jobs pushed from here are stamped enqueued_by={socket.gethostname()}")


@wurk.hookimpl
def wurk_register_commands(cli):
    cli.add_command(audit_command)

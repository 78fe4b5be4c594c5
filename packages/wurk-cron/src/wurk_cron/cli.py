"""``wurk cron``: list the registered loops, pause, unpause, fire or enqueue one.

``wurk cron`` alone lists the loops, as ``wurk cron list`` does.

The operations the dashboard's Cron tab offers, for a shell. There is no
delete, as there is none in the dashboard: removing a loop is a code change
plus ``wurk_cron.unregister(lid)``.
"""

from __future__ import annotations

import json
from datetime import UTC, datetime

import click

from wurk_cron import firing
from wurk_cron.loop import Loop
from wurk_cron.registry import LoopSet

__all__ = ["cron_command"]


def _when(epoch: int | None) -> str:
    if epoch is None:
        return "-"
    return datetime.fromtimestamp(epoch, UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def _row(loop: Loop) -> dict[str, object]:
    return {
        "lid": loop.lid,
        "schedule": loop.schedule,
        "klass": loop.klass,
        "queue": loop.queue,
        "tz": loop.tz_name,
        "paused": loop.paused,
        "last_fired_at": loop.last_fired_at,
        "next_fire_at": loop.next_fire_at,
    }


def _unknown(lid: str) -> click.ClickException:
    return click.ClickException(f"no periodic loop {lid!r}; `wurk cron list` shows the registered lids")


@click.group("cron", invoke_without_command=True)
@click.pass_context
def cron_command(ctx: click.Context) -> None:
    """Periodic jobs: list the loops; pause, unpause, fire or enqueue one by lid.

    Without a subcommand, lists the loops (as `wurk cron list`).
    """
    # The list is what one comes for most often; the subcommands are in --help.
    if ctx.invoked_subcommand is None:
        ctx.invoke(list_command)


@cron_command.command("list")
@click.option("--json", "as_json", is_flag=True, help="Print JSON for scripts.")
def list_command(as_json: bool) -> None:
    """Every registered loop with its schedule, class, marks and state."""
    loops = list(LoopSet().each())
    if as_json:
        click.echo(json.dumps([_row(loop) for loop in loops], indent=2))
        return
    if not loops:
        click.echo("no periodic loops registered (they are written when a worker boots)")
        return
    table = [("LID", "SCHEDULE", "CLASS", "QUEUE", "TZ", "LAST", "NEXT", "STATE")]
    table += [
        (
            loop.lid,
            loop.schedule,
            loop.klass,
            loop.queue,
            loop.tz_name or "UTC",
            _when(loop.last_fired_at),
            _when(loop.next_fire_at),
            "paused" if loop.paused else "active",
        )
        for loop in loops
    ]
    widths = [max(len(row[col]) for row in table) for col in range(len(table[0]))]
    for row in table:
        click.echo("  ".join(cell.ljust(width) for cell, width in zip(row, widths, strict=True)).rstrip())


@cron_command.command("pause")
@click.argument("lid")
def pause_command(lid: str) -> None:
    """Pause a loop: the poller skips it until unpaused (survives deploys)."""
    if not firing.pause(lid):
        raise _unknown(lid)
    click.echo(f"paused {lid}")


@cron_command.command("unpause")
@click.argument("lid")
def unpause_command(lid: str) -> None:
    """Resume a loop from its next fire after now."""
    if not firing.unpause(lid):
        raise _unknown(lid)
    click.echo(f"unpaused {lid}")


@cron_command.command("fire")
@click.argument("lid")
def fire_command(lid: str) -> None:
    """Fire a loop now, as a tick would: enqueues, records history, moves the marks."""
    jid = firing.fire(lid)
    if jid is None and LoopSet().fetch(lid) is None:
        raise _unknown(lid)
    click.echo(f"fired {lid}: jid {jid}")


@cron_command.command("enqueue")
@click.argument("lid")
def enqueue_command(lid: str) -> None:
    """Push one run of a loop now without touching its schedule or history."""
    if LoopSet().fetch(lid) is None:
        raise _unknown(lid)
    click.echo(f"enqueued {lid}: jid {firing.enqueue_now(lid)}")


@cron_command.command("history")
@click.argument("lid")
def history_command(lid: str) -> None:
    """The last 25 fires of a loop, newest first."""
    if LoopSet().fetch(lid) is None:
        raise _unknown(lid)
    for fired_at, jid in firing.history(lid):
        click.echo(f"{_when(fired_at)}  {jid}")

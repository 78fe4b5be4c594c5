"""Operations from the shell: ``wurk stats``, ``wurk queues``, ``wurk job ...``.

(Listing the retry, dead and scheduled sets is :mod:`wurk.cli.sets`.)

Thin commands over :mod:`wurk.api`, for the moments a dashboard is not at
hand: what is queued and how late, one job by jid (show, retry, delete,
kill), a whole set at once, pausing a queue, and the live processes (quiet or
stop one). Output is for people by default; ``--json`` prints JSON for
scripts. The server is ``REDIS_URL``.
"""

from __future__ import annotations

import difflib
import json
import sys
import time
from collections.abc import Callable, Iterable, Sequence
from datetime import datetime
from typing import Any, TypeVar

import click

from wurk.cli import plural

SET_NAMES = ("scheduled", "retry", "dead")

F = TypeVar("F", bound=Callable[..., Any] | click.Command)


def _use_pool(ctx: click.Context, param: click.Parameter, name: str | None) -> None:
    """``--pool NAME``: the command reads and changes that shard instead of
    the main Redis. The shards are the configuration's (``WURK_SHARDS``), else
    those of the config file (``-C``, or ``config/wurk.yml`` found here)."""
    if not name:
        return
    from wurk.cli import boot
    from wurk.config.defaults import current_config

    root = ctx.find_root()
    config = current_config()  # the one the commands' data API objects read
    if name not in config.shards:
        boot.adopt_file_shards(config, root.params.get("config_file"), root.params.get("environment"))
    config.use_shard(name)


def pool_option(command: F) -> F:
    """Give a command ``--pool NAME`` (``--shard NAME``), a configured shard to act on."""
    return click.option(
        "--pool",
        "--shard",
        "pool",
        metavar="NAME",
        expose_value=False,
        callback=_use_pool,
        help="Act on this configured shard instead of the main Redis (REDIS_URL).",
    )(command)


def _api() -> Any:
    from wurk import api

    return api


def _set(name: str) -> Any:
    api = _api()
    return {"scheduled": api.ScheduledSet, "retry": api.RetrySet, "dead": api.DeadSet}[name]()


def _emit(data: Any, as_json: bool, rows: Sequence[Sequence[Any]] | None = None) -> None:
    if as_json:
        click.echo(json.dumps(data, indent=2, default=str))
    elif rows is not None:
        _table(rows)


def _cell(value: Any) -> str:
    """A table cell; arguments and other structures as JSON, the form they
    have on the wire and the one a user can paste back into Python or Ruby."""
    if isinstance(value, list | tuple | dict):
        return json.dumps(value, ensure_ascii=False, default=str)
    return str(value)


def _table(rows: Sequence[Sequence[Any]]) -> None:
    text = [[_cell(cell) for cell in row] for row in rows]
    if not text:
        return
    widths = [max(len(row[col]) for row in text) for col in range(len(text[0]))]
    for row in text:
        click.echo("  ".join(cell.ljust(width) for cell, width in zip(row, widths, strict=True)).rstrip())


def _seconds(value: float) -> str:
    if value < 60:
        return f"{value:.1f}s"
    if value < 3600:
        return f"{value / 60:.1f}m"
    return f"{value / 3600:.1f}h"


def stats_data() -> dict[str, Any]:
    stats = _api().Stats()
    return {
        "processed": stats.processed,
        "failed": stats.failed,
        "expired": stats.expired,
        "rescheduled": stats.rescheduled,
        "enqueued": stats.enqueued,
        "scheduled": stats.scheduled_size,
        "retries": stats.retry_size,
        "dead": stats.dead_size,
        "processes": stats.processes_size,
        "busy": stats.workers_size,
        "default_latency": round(stats.default_queue_latency, 3),
    }


@pool_option
@click.command("stats")
@click.option("--json", "as_json", is_flag=True, help="Print JSON for scripts.")
def stats_command(as_json: bool) -> None:
    """Counters and set sizes, cluster-wide."""
    data = stats_data()
    _emit(data, as_json, [(name, value) for name, value in data.items()])


def queues_data() -> list[dict[str, Any]]:
    return [
        {"name": s.name, "size": s.size, "latency": round(s.latency, 3), "paused": s.paused}
        for s in _api().Stats().queue_summaries
    ]


@pool_option
@click.command("queues")
@click.option("--json", "as_json", is_flag=True, help="Print JSON for scripts.")
def queues_command(as_json: bool) -> None:
    """Every queue: size, latency of its oldest job, paused or not."""
    data = queues_data()
    rows = [("QUEUE", "SIZE", "LATENCY", "STATE")]
    rows += [(q["name"], q["size"], _seconds(q["latency"]), "paused" if q["paused"] else "") for q in data]
    _emit(data, as_json, rows if data else [("no queues",)])


def find(jid: str) -> tuple[str, Any] | None:
    """Where a job is: ("queue:<name>", record) or ("<set>", entry)."""
    api = _api()
    for name in SET_NAMES:
        entry = _set(name).find_job(jid)
        if entry is not None:
            return name, entry
    for queue in api.Queue.all():
        record = queue.find_job(jid)
        if record is not None:
            return f"queue:{queue.name}", record
    return None


def _describe(where: str, record: Any) -> dict[str, Any]:
    data: dict[str, Any] = {
        "where": where,
        "jid": record.jid,
        "class": record.display_class,
        "args": record.display_args,
        "queue": record.queue,
    }
    for field in ("error_class", "error_message", "retry_count"):
        value = record.get(field)
        if value is not None:
            data[field] = value
    score = getattr(record, "score", None)
    if score is not None:
        data["at"] = datetime.fromtimestamp(score).isoformat(timespec="seconds")
    return data


@click.group("job")
def job_group() -> None:
    """Show, retry, delete or kill one job by its jid.

    No jid at hand? 'wurk retries', 'wurk dead' and 'wurk scheduled' list the
    jobs of each set, filtered by class and queue.
    """


def _located(jid: str) -> tuple[str, Any]:
    found = find(jid)
    if found is None:
        raise click.ClickException(f"no job {jid} in any queue or in the scheduled, retry or dead sets")
    return found


def _shown(key: str, value: Any) -> Any:
    """A ``job show`` value as the table prints it. A negative ``retry_count``
    is a job retried by hand after its first failure: a manual retry gives the
    attempt back (one lower, as Sidekiq's), so a failure of this run is booked
    as retry 0 again; the bare -1 reads like a bug, so it says so."""
    if key == "retry_count" and isinstance(value, int) and value < 0:
        return f"{value} (retried by hand: this run does not use up an attempt; a failure is booked as retry 0)"
    return value


@job_group.command("show")
@pool_option
@click.argument("jid")
@click.option("--json", "as_json", is_flag=True, help="Print JSON for scripts.")
def job_show(jid: str, as_json: bool) -> None:
    """Where a job is, its class, arguments and error.

    Looks in every queue and in the scheduled, retry and dead sets. A job that
    failed shows its last error and retry count. JID is the job's id: 'wurk
    retries', 'wurk dead' and 'wurk scheduled' list them.
    """
    where, record = _located(jid)
    data = _describe(where, record)
    _emit(data, as_json, [(key, _shown(key, value)) for key, value in data.items()])


@job_group.command("retry")
@pool_option
@click.argument("jid")
def job_retry(jid: str) -> None:
    """Put a scheduled, retrying or dead job on its queue now."""
    where, record = _located(jid)
    if where.startswith("queue:"):
        raise click.ClickException(f"job {jid} is already waiting in {where}")
    done = record.add_to_queue() if where == "scheduled" else record.retry()
    if not done:
        raise click.ClickException(f"job {jid} left the {where} set before it could be moved")
    click.echo(f"job {jid} moved from {where} to queue:{record.queue}")


@job_group.command("delete")
@pool_option
@click.argument("jid")
def job_delete(jid: str) -> None:
    """Remove a job from its queue or set for good.

    Nothing else happens: no death handlers run, nothing goes to the dead set.
    """
    where, record = _located(jid)
    if not record.delete():
        raise click.ClickException(f"job {jid} was no longer in {where}")
    click.echo(f"job {jid} deleted from {where}")


@job_group.command("kill")
@pool_option
@click.argument("jid")
def job_kill(jid: str) -> None:
    """Move a job to the dead set (death handlers run, as for a manual kill)."""
    where, record = _located(jid)
    if where == "dead":
        raise click.ClickException(f"job {jid} is already dead")
    if where.startswith("queue:"):
        if not record.delete():
            raise click.ClickException(f"job {jid} was no longer in {where}")
        _api().DeadSet().kill(record.value)
    elif not record.kill():
        raise click.ClickException(f"job {jid} left the {where} set before it could be killed")
    click.echo(f"job {jid} moved from {where} to the dead set")


@pool_option
@click.command("retry-all")
@click.argument("set_name", type=click.Choice(SET_NAMES))
def retry_all_command(set_name: str) -> None:
    """Put every job of a set on its queue now."""
    click.echo(f"{plural(_set(set_name).retry_all(), 'job')} moved from {set_name} to their queues")


def _confirm(question: str, yes: bool) -> None:
    """Ask before a bulk change that cannot be undone; without a terminal to
    ask on (a script, a pipe, cron), refuse rather than wait for an answer
    that never comes, and say how to proceed."""
    if yes:
        return
    if not sys.stdin.isatty():
        raise click.ClickException(f"{question} Not confirmed (no terminal to ask on): pass --yes to go ahead.")
    click.confirm(question, abort=True)


YES = click.option("--yes", "-y", is_flag=True, help="Do not ask for confirmation.")


@pool_option
@click.command("kill-all")
@click.argument("set_name", type=click.Choice(SET_NAMES[:2]))
@YES
def kill_all_command(set_name: str, yes: bool) -> None:
    """Move every scheduled or retrying job to the dead set.

    Death handlers run for each job and the dead set is trimmed to its cap
    afterwards, so this asks first (--yes to skip the question).
    """
    jobs = _set(set_name)
    count = jobs.size
    if not count:
        click.echo(f"no jobs in {set_name}")
        return
    _confirm(f"Move {'the 1 job' if count == 1 else f'all {count} jobs'} in {set_name} to the dead set?", yes)
    click.echo(f"{plural(jobs.kill_all(), 'job')} moved from {set_name} to the dead set")


@pool_option
@click.command("pause")
@click.argument("queue")
def pause_command(queue: str) -> None:
    """Stop workers fetching from QUEUE (running jobs finish).

    A queue no job has been pushed to yet can be paused ahead of time, but
    since that is more often a typo, it is paused with a warning.
    """
    from wurk.config.capsule import QUEUE_PREFIX

    if queue.startswith(QUEUE_PREFIX):
        raise click.ClickException(
            f"name the queue without the {QUEUE_PREFIX!r} prefix: wurk pause {queue[len(QUEUE_PREFIX) :]}"
        )
    api = _api()
    known = [q.name for q in api.Queue.all()]
    if queue not in known:
        close = difflib.get_close_matches(queue, known, n=1, cutoff=0.6)
        hint = f"; did you mean {close[0]!r}?" if close else "."
        click.echo(f"warning: no job has been pushed to queue {queue!r} yet{hint} Pausing it anyway.", err=True)
    api.Queue(queue).pause()
    click.echo(f"queue {queue} paused")


@pool_option
@click.command("unpause")
@click.argument("queue")
def unpause_command(queue: str) -> None:
    """Let workers fetch from QUEUE again."""
    _api().Queue(queue).unpause()
    click.echo(f"queue {queue} unpaused")


def processes_data() -> list[dict[str, Any]]:
    return [
        {
            "identity": process.identity,
            "tag": process.tag,
            "queues": process.queues,
            "concurrency": process.concurrency,
            "busy": process.busy,
            "rss_kb": process.rss,
            "quiet": process.stopping,
            "beat": process.beat,
        }
        for process in _api().ProcessSet()
    ]


@pool_option
@click.command("processes")
@click.option("--json", "as_json", is_flag=True, help="Print JSON for scripts.")
def processes_command(as_json: bool) -> None:
    """The live worker processes."""
    data = processes_data()
    rows = [("IDENTITY", "TAG", "QUEUES", "BUSY", "RSS", "STATE")]
    rows += [
        (
            p["identity"],
            p["tag"] or "",
            ",".join(p["queues"]),
            f"{p['busy']}/{p['concurrency']}",
            f"{p['rss_kb'] // 1024} MB",
            "quiet" if p["quiet"] else "",
        )
        for p in data
    ]
    _emit(data, as_json, rows if data else [("no live processes",)])


def _signal(identities: Iterable[str], everyone: bool, action: str) -> None:
    wanted = set(identities)
    if not wanted and not everyone:
        raise click.UsageError(f"name a process identity to {action}, or pass --all")
    matched = 0
    for process in _api().ProcessSet():
        if everyone or process.identity in wanted:
            getattr(process, action)()
            matched += 1
            click.echo(f"{action}: {process.identity}")
    if not matched:
        raise click.ClickException(f"no live process matches {', '.join(sorted(wanted)) or 'anything'}")


@pool_option
@click.command("quiet")
@click.argument("identities", nargs=-1)
@click.option("--all", "everyone", is_flag=True, help="Every live process.")
def quiet_command(identities: tuple[str, ...], everyone: bool) -> None:
    """Ask worker processes to stop fetching (they act on their next heartbeat)."""
    _signal(identities, everyone, "quiet")


@pool_option
@click.command("stop")
@click.argument("identities", nargs=-1)
@click.option("--all", "everyone", is_flag=True, help="Every live process.")
def stop_command(identities: tuple[str, ...], everyone: bool) -> None:
    """Ask worker processes to shut down gracefully (on their next heartbeat)."""
    _signal(identities, everyone, "stop")


@pool_option
@click.command("top")
@click.option("--interval", default=2.0, show_default=True, help="Seconds between refreshes.")
@click.option("--once", is_flag=True, help="Print one screen and exit.")
def top_command(interval: float, once: bool) -> None:
    """A live view of counters, queues and processes (Ctrl-C to leave)."""
    while True:
        screen = [f"wurk top — {datetime.now().isoformat(timespec='seconds')}", ""]
        stats = stats_data()
        screen.append("  ".join(f"{name}={value}" for name, value in stats.items()))
        screen.append("")
        for queue in queues_data():
            state = " (paused)" if queue["paused"] else ""
            screen.append(f"  {queue['name']:<20} {queue['size']:>8}  {_seconds(queue['latency']):>8}{state}")
        screen.append("")
        for process in processes_data():
            quiet = " (quiet)" if process["quiet"] else ""
            busy = f"{process['busy']}/{process['concurrency']} busy"
            screen.append(f"  {process['identity']:<40} {process['tag'] or '':<12} {busy}{quiet}")
        if not once and sys.stdout.isatty():
            click.clear()
        click.echo("\n".join(screen))
        if once:
            return
        time.sleep(interval)


OPS_COMMANDS: tuple[click.Command, ...] = (
    stats_command,
    queues_command,
    job_group,
    retry_all_command,
    kill_all_command,
    pause_command,
    unpause_command,
    processes_command,
    quiet_command,
    stop_command,
    top_command,
)

"""The wurk-batches plugin: how batches attach to core.

* server middleware, right inside core's ``InterruptHandler``, books each run;
* a push writer stamps ``bid`` on the jobs pushed inside a ``jobs`` block and
  counts them in the same script that pushes them;
* the Lua scripts of ``lua/``;
* an outcome listener books deaths, and finished callbacks of child batches;
* the ``batch_callbacks_first`` setting;
* the dashboard's Batches pages (:mod:`wurk_batches.dashboard`).

Switch it off with ``WURK_DISABLE_PLUGINS=batches``.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from wurk.errors import ConfigurationError
from wurk.plugins.hookspecs import hookimpl
from wurk.server.builtin_middleware import InterruptHandler

# Importing the package defines its jobs (CallbackJob, Empty), so a worker
# that loads the plugin can run them without importing anything else.
from wurk_batches.books import Books
from wurk_batches.constants import CALLBACK_JOB
from wurk_batches.middleware import ServerMiddleware
from wurk_batches.writer import BatchWriter

if TYPE_CHECKING:
    from wurk.client.middleware import Chain
    from wurk.client.writers import PushWriterRegistry
    from wurk.config.configuration import Config
    from wurk.config.settings import SettingRegistry
    from wurk.plugins.outcomes import Outcome
    from wurk.plugins.web import WebRegistry
    from wurk.redis.scripts import ScriptRegistry

#: The plugin API this plugin was built for; core refuses to load it if it
#: provides another major, or an older minor (see ``wurk.PLUGIN_API``).
WURK_PLUGIN_API = (1, 7)  # wurk.server.retry.shutdown_of_task


def _boolean(key: str, value: Any) -> None:
    if not isinstance(value, bool):
        raise ConfigurationError(f"{key} must be True or False, got {value!r}")


@hookimpl
def wurk_register_settings(settings: SettingRegistry) -> None:
    settings.add(
        "batch_callbacks_first",
        default=True,
        check=_boolean,
        owner="wurk-batches",
        doc="Push batch callback jobs to the end of their queue that the next fetch takes from.",
    )


@hookimpl
def wurk_register_scripts(scripts: ScriptRegistry) -> None:
    scripts.register_package("wurk_batches", namespace="batches")


@hookimpl
def wurk_register_middleware(client: Chain, server: Chain, config: Config) -> None:
    server.insert_after(InterruptHandler, ServerMiddleware)


@hookimpl
def wurk_register_push_writers(writers: PushWriterRegistry, config: Config) -> None:
    writers.add(BatchWriter(config))


@hookimpl
def wurk_job_outcome(outcome: Outcome, config: Config) -> None:
    job = outcome.job
    jid = outcome.jid
    if jid is None:
        return
    if job.get("class") == CALLBACK_JOB:
        args = job.get("args") or []
        if outcome.kind in ("succeeded", "died") and len(args) >= 2 and args[1] in ("complete", "success"):
            Books.of(config).callback_finished(str(args[0]), jid)
        return
    bid = job.get("bid")
    # An expired job returned through the batch middleware: a success already.
    if bid and outcome.kind == "died" and outcome.reason != "expired":
        Books.of(config).ack_death(str(bid), jid)


@hookimpl
def wurk_register_web(app: WebRegistry) -> None:
    # Imported here: a worker never builds the dashboard.
    from wurk_batches.dashboard import register

    register(app)

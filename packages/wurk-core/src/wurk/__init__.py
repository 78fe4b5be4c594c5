"""Wurk: a fast, reliable background-job system for Python that speaks
Sidekiq's Redis protocol, so Python and Ruby processes can share one Redis."""

from wurk import builtins, testing
from wurk._version import __version__
from wurk.client.job import Job, job
from wurk.client.middleware import Chain, ClientMiddleware, ServerMiddleware
from wurk.client.payload import ComplexArgumentError, InvalidJobError
from wurk.client.push import Client
from wurk.config.configuration import Config
from wurk.config.defaults import (
    configure_client,
    configure_server,
    current_capsule,
    current_config,
    default_config,
    set_default_config,
)
from wurk.config.shards import shard, via
from wurk.errors import (
    ConfigurationError,
    CursorError,
    FrozenConfigError,
    Interrupted,
    LostReplyError,
    NotReplicatedError,
    PluginError,
    RedisConnectionError,
    ScriptError,
    Shutdown,
    UnknownOptionError,
    WurkError,
)
from wurk.iterable import IterableJob
from wurk.plugins.component import Component
from wurk.plugins.hookspecs import hookimpl, hookspec
from wurk.plugins.manager import PLUGIN_API, provide_core_plugin
from wurk.server.embedded import configure_embed
from wurk.server.propagation import propagate
from wurk.types import Payload

# Core's own plugin sits above the server and metrics it registers; the plugin
# manager below them is handed it here, before any configuration can load it.
provide_core_plugin(builtins)

__all__ = [
    "PLUGIN_API",
    "Chain",
    "Client",
    "ClientMiddleware",
    "ComplexArgumentError",
    "Component",
    "Config",
    "ConfigurationError",
    "CursorError",
    "FrozenConfigError",
    "Interrupted",
    "InvalidJobError",
    "IterableJob",
    "Job",
    "LostReplyError",
    "NotReplicatedError",
    "Payload",
    "PluginError",
    "RedisConnectionError",
    "ScriptError",
    "ServerMiddleware",
    "Shutdown",
    "UnknownOptionError",
    "WurkError",
    "__version__",
    "configure_client",
    "configure_embed",
    "configure_server",
    "current_capsule",
    "current_config",
    "default_config",
    "hookimpl",
    "hookspec",
    "job",
    "propagate",
    "set_default_config",
    "shard",
    "testing",
    "via",
]

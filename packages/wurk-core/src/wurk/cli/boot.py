"""Booting a worker from the command line: options, config file, app, checks.

Precedence, highest first: the application's own Python configuration (it is
imported last, so it wins), command-line flags, the config file's section for
the environment, the config file's top level, ``RAILS_MAX_THREADS`` (for
concurrency only), and the defaults.

The config file is ``-C path``, or the first of ``config/wurk.yml``,
``config/sidekiq.yml`` found beside the app. It is YAML, with ``${VAR}`` and
``${VAR:-default}`` expanded from the environment; keys may be written
``concurrency:`` or Sidekiq's ``:concurrency:``.

The app given with ``-r`` is imported before the checks; an error while
importing it becomes a one-line :class:`AppImportError`. Its top-level package
and the ``job_packages`` option then become the only packages a payload's
``class`` can make the worker import from (see :mod:`wurk.client.registry`).
"""

from __future__ import annotations

import difflib
import importlib
import importlib.util
import os
import re
import sys
import traceback
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import yaml

from wurk.config import env
from wurk.config.capsule import parse_queue
from wurk.config.catalog import TYPO_CUTOFF
from wurk.config.configuration import Config
from wurk.config.settings import check_module_names
from wurk.config.tracebacks import is_wurk_file
from wurk.errors import ConfigurationError

#: The plugin API (docs/plugins.md): the steps of a worker's boot, for a
#: supervisor (the swarm) that boots its processes exactly as ``wurk`` does.
__all__ = [
    "CONFIG_FILES",
    "AppImportError",
    "adopt_file_shards",
    "allow_app_jobs",
    "apply_options",
    "build_options",
    "check_server_version",
    "expand_env",
    "find_config_file",
    "load_config_file",
    "options_from",
    "queue_flag",
    "refuse_misspelt",
    "require_app",
    "serve_shard",
    "validate",
]

CONFIG_FILES = ("config/wurk.yml", "config/wurk.yaml", "config/sidekiq.yml", "config/sidekiq.yaml")
MIN_SERVER_VERSION = (7, 0, 0)
_VAR = re.compile(r"\$\{([A-Za-z_][A-Za-z0-9_]*)(?::-([^}]*))?\}")


def expand_env(text: str, environ: Mapping[str, str] | None = None) -> str:
    """Replace ``${VAR}`` and ``${VAR:-default}``; an unset ``${VAR}`` is an error."""
    environ = os.environ if environ is None else environ

    def substitute(match: re.Match[str]) -> str:
        name, default = match.group(1), match.group(2)
        value = environ.get(name)
        if value is None or (value == "" and default is not None):
            if default is None:
                raise ConfigurationError(f"config file uses ${{{name}}}, which is not set (write ${{{name}:-default}})")
            return default
        return value

    return _VAR.sub(substitute, text)


def _symbolize(value: Any) -> Any:
    if isinstance(value, dict):
        return {str(key).lstrip(":"): _symbolize(item) for key, item in value.items()}
    if isinstance(value, list):
        return [_symbolize(item) for item in value]
    return value


def load_config_file(path: str | Path, environment: str, environ: Mapping[str, str] | None = None) -> dict[str, Any]:
    """The options in a YAML config file, with the environment's section merged in."""
    path = Path(path)
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as exc:
        raise ConfigurationError(f"cannot read config file {path}: {exc.strerror}") from None
    try:
        data = yaml.safe_load(expand_env(text, environ)) or {}
    except yaml.YAMLError as exc:
        raise ConfigurationError(f"config file {path} is not valid YAML: {exc}") from None
    if not isinstance(data, dict):
        raise ConfigurationError(f"config file {path} must hold a mapping of options")
    return options_from(data, environment)


def options_from(data: Mapping[Any, Any], environment: str) -> dict[str, Any]:
    """The options in a config file's mapping (or an integration's, such as
    Django's ``settings.WURK``), with the environment's section merged in."""
    options: dict[str, Any] = _symbolize(dict(data))
    overlay = options.pop(environment, None)
    if isinstance(overlay, dict):
        options.update(overlay)
    options.pop("strict", None)  # strict fetch no longer exists
    return options


#: Keys a config file may hold besides the declared settings: what
#: :func:`apply_options` and the flags read themselves.
FILE_KEYS = frozenset({"capsules", "redis", "labels", "require", "environment", "config_file", "verbose"})


def refuse_misspelt(config: Config, options: Mapping[str, Any], source: str) -> None:
    """Refuse a key of ``options`` that looks like a misspelling of a known
    one, in one line naming ``source``; other unknown keys pass, since the
    configuration is open to the keys of the application's own middleware.

    Options read at start-up go through this, where a typo would silently
    leave the setting at its default: a config file (``source`` is its
    path), an integration's settings. A key the application writes in code
    is only warned about (:mod:`wurk.config.catalog`).
    """
    known = config.settings.names() | FILE_KEYS | {"concurrency", "queues"}
    for key in options:
        if key in known:
            continue
        close = difflib.get_close_matches(str(key), known, n=1, cutoff=TYPO_CUTOFF)
        if close:
            raise ConfigurationError(f"{source}: unknown option {key!r}; did you mean {close[0]!r}?")


def find_config_file(require: str) -> Path | None:
    base = Path(require)
    roots = [base if base.is_dir() else base.parent, Path.cwd()]
    for root in roots:
        for name in CONFIG_FILES:
            candidate = root / name
            if candidate.is_file():
                return candidate
    return None


def build_options(flags: Mapping[str, Any], environ: Mapping[str, str] | None = None) -> dict[str, Any]:
    """Flags merged over the config file, with the defaults the CLI applies."""
    environment = env.environment(flags.get("environment"), environ)
    require = flags.get("require") or "."
    config_file = flags.get("config_file") or find_config_file(require)
    options: dict[str, Any] = load_config_file(config_file, environment, environ) if config_file else {}
    options.update({key: value for key, value in flags.items() if value not in (None, (), [])})
    options["environment"] = environment
    options["require"] = require
    if config_file:
        options["config_file"] = str(config_file)
    if not options.get("queues"):
        options["queues"] = ["default"]
    if options.get("concurrency") is None:
        options["concurrency"] = env.max_threads(environ) or 5
    return options


def apply_options(config: Config, options: Mapping[str, Any]) -> None:
    """Write CLI/YAML options into the configuration, after refusing a key of
    the config file that looks like a misspelt option (naming the file)."""
    options = dict(options)
    if options.get("config_file"):
        refuse_misspelt(config, options, str(options["config_file"]))
    capsules = options.pop("capsules", None) or {}
    redis_options = options.pop("redis", None)
    labels = options.pop("labels", None)
    for key in ("concurrency", "timeout"):
        if key in options:
            options[key] = _positive_int(key, options[key])
    config.update(options)
    if labels is not None:
        config["labels"] = set(labels) if isinstance(labels, list | tuple | set) else {str(labels)}
    if redis_options:
        config.redis = redis_options
    if not isinstance(capsules, dict):
        raise ConfigurationError("capsules must map capsule names to {concurrency, queues}")
    for name, spec in capsules.items():
        spec = spec or {}
        config.capsule(
            str(name),
            concurrency=_positive_int(f"capsule {name} concurrency", spec.get("concurrency", config.concurrency)),
            queues=spec.get("queues") or ["default"],
        )


def _positive_int(what: str, value: Any) -> int:
    try:
        number = int(value)
    except (TypeError, ValueError):
        raise ConfigurationError(f"{what} must be a whole number > 0, got {value!r}") from None
    if number <= 0:
        raise ConfigurationError(f"{what} must be > 0, got {number}")
    return number


class AppImportError(ConfigurationError):
    """The application given with ``-r`` raised while being imported.

    A configuration error, so the command line prints it as one line and
    exits with 2: a broken import is the user's to fix, and a traceback
    through importlib would bury the one line that matters. The original
    error is the ``__cause__``.
    """


def require_app(require: str) -> str | None:
    """Import the application: a ``.py`` file, a directory, or a module name.

    Returns the module name it was imported under (None for a directory,
    which is only put on ``sys.path``).
    """
    path = Path(require)
    if require.endswith(".py"):
        if not path.is_file():
            raise ConfigurationError(f"-r {require}: no such file (working directory {os.getcwd()})")
        folder = str(path.resolve().parent)
        if folder not in sys.path:
            sys.path.insert(0, folder)
        _import_app(path.stem, require)
        return path.stem
    if path.is_dir():
        folder = str(path.resolve())
        if folder not in sys.path:
            sys.path.insert(0, folder)
        return None
    if "/" in require or not _importable(require):
        raise ConfigurationError(
            f"-r {require}: not a .py file, a directory, or an importable module (working directory {os.getcwd()})"
        )
    _import_app(require, require)
    return require


def app_module_name(require: str) -> str | None:
    """The module name ``require_app`` loads ``require`` under, without importing it."""
    if require.endswith(".py"):
        return Path(require).stem
    if Path(require).is_dir() or "/" in require:
        return None
    return require


def _importable(module: str) -> bool:
    try:
        return importlib.util.find_spec(module) is not None
    except ModuleNotFoundError as exc:
        if exc.name and (module == exc.name or module.startswith(exc.name + ".")):
            return False  # a parent package of it does not exist
        raise _import_failed(module, exc) from exc
    except ValueError:
        return False  # not a module name at all (".app")
    except Exception as exc:  # a parent package raised while being imported
        raise _import_failed(module, exc) from exc


def _import_app(module: str, shown: str) -> None:
    try:
        importlib.import_module(module)
    except Exception as exc:
        raise _import_failed(shown, exc) from exc


def _import_failed(shown: str, exc: BaseException) -> AppImportError:
    text = exc.msg if isinstance(exc, SyntaxError) else str(exc)  # _where gives the location
    return AppImportError(f"-r {shown}: importing it failed with {type(exc).__name__}: {text}{_where(exc)}")


def _where(exc: BaseException) -> str:
    """Where the error was raised, as `` (file line N)``: the innermost frame
    of the application's code, not importlib's, nor Wurk's when the app
    called Wurk with something it refused."""
    if isinstance(exc, SyntaxError) and exc.filename:
        return f" ({exc.filename} line {exc.lineno})"
    frames = [frame for frame in traceback.extract_tb(exc.__traceback__) if not frame.filename.startswith("<")]
    frames = [frame for frame in frames if not is_wurk_file(frame.filename)] or frames
    if not frames:
        return ""
    return f" ({frames[-1].filename} line {frames[-1].lineno})"


def allow_app_jobs(config: Config) -> None:
    """Tell job lookup which packages are the application's own, the only ones
    a payload's ``class`` may cause an import from: the top-level package of
    the ``-r`` module (``myapp`` for ``-r myapp.worker``; the module itself
    for ``-r app.py``) and the configured ``job_packages``.

    Runs from :func:`validate`, after the app is imported, so ``job_packages``
    set by the app's own ``configure_server`` counts.
    """
    packages = check_module_names("job_packages", config.option("job_packages") or [])
    for package in packages:
        _check_job_package(package)
    module = app_module_name(str(config.option("require") or "."))
    own = [module.partition(".")[0]] if module else []
    config.jobs.allow(*own, *packages)


def _check_job_package(package: str) -> None:
    try:
        found = importlib.util.find_spec(package) is not None
    except Exception as exc:  # finding a subpackage imports its parents, which may raise
        raise ConfigurationError(f"job_packages: looking up {package} failed with {type(exc).__name__}: {exc}") from exc
    if not found:
        raise ConfigurationError(f"job_packages: no module named {package!r} (working directory {os.getcwd()})")


def adopt_file_shards(config: Config, config_file: str | None = None, environment: str | None = None) -> None:
    """The shards of the config file (``config_file``, else the one found in
    the working directory), for a command that reads no application code
    (``wurk stats --pool east``, ``wurk web``): they replace the configuration's."""
    path = config_file or find_config_file(".")
    if path:
        found = load_config_file(path, env.environment(environment)).get("shards")
        if found:
            config["shards"] = found


def serve_shard(config: Config) -> None:
    """With ``--shard NAME`` (``config["shard"]``), make that shard the
    worker's main Redis. Done after the app is imported, so that shards the
    app configures count, and so that an app writing ``config.redis`` in its
    ``configure_server`` does not silently send the worker back to the main
    server."""
    name = config.option("shard")
    if not name:
        return
    config.use_shard(name)
    from wurk.redis.connection import mask_url

    config.logger.info("serving shard %s at %s", name, mask_url(str(config.redis["url"])))


def validate(config: Config) -> None:
    """The boot checks, in order, before any thread starts, and the job
    lookup's allowed packages, which need the app imported first. A worker
    given a shard switches to it first (:func:`serve_shard`)."""
    serve_shard(config)
    for name, capsule in config.capsules.items():
        if capsule.concurrency <= 0:
            raise ConfigurationError(f"capsule {name}: concurrency must be > 0")
    if float(config["timeout"]) <= 0:
        raise ConfigurationError(f"timeout must be > 0, got {config['timeout']}")
    allow_app_jobs(config)
    info = config.redis_pool.execute(lambda conn: conn.info("server"))
    check_server_version(info)
    # From INFO, not CONFIG GET: a least-privilege ACL user (docs/deployment.md)
    # has no right to CONFIG, which would also show it the server's secrets.
    memory = config.redis_pool.execute(lambda conn: conn.info("memory"))
    value = memory.get("maxmemory_policy", "noeviction") if isinstance(memory, dict) else "noeviction"
    if value not in ("noeviction", b"noeviction"):
        config.logger.warning(
            "Redis maxmemory-policy is %s: under memory pressure Redis may evict jobs; use noeviction", value
        )
    for name, capsule in config.capsules.items():
        if capsule.redis_pool.size < capsule.concurrency:
            raise ConfigurationError(
                f"Pool size too small for capsule {name}: {capsule.redis_pool.size} < concurrency {capsule.concurrency}"
            )


def check_server_version(info: Mapping[str, Any]) -> None:
    if "valkey_version" in info or info.get("server_name") == "valkey":
        return  # every Valkey speaks what Wurk needs (Valkey 7.2 is Redis 7.2)
    version = str(info.get("redis_version", "0"))
    parts = tuple(int(part) for part in re.findall(r"\d+", version)[:3])
    if parts < MIN_SERVER_VERSION:
        raise ConfigurationError(f"Wurk needs Redis >= 7.0.0; the server is {version}")


def queue_flag(value: str) -> str:
    """Check a ``-q name[,weight]`` flag early, for a clear usage error."""
    parse_queue(value)
    return value

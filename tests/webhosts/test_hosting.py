"""What the integrations share: ``import wurk`` imports no web framework, the
application's settings are the YAML file's keys, and a preforking server's
worker is recognised."""

from __future__ import annotations

import json
import logging
import subprocess
import sys
import types

import pytest

from wurk.contrib.hosting import configure_from, preforking_server, start_embedded
from wurk.errors import ConfigurationError
from wurk.redis import keys

FRAMEWORKS = ["flask", "werkzeug", "fastapi", "starlette", "django", "sqlalchemy", "uvicorn", "gunicorn", "wurk_web"]


def test_importing_wurk_imports_no_web_framework():
    probe = (
        f"import sys, wurk, wurk.contrib; print(sorted(m for m in sys.modules if m.split('.')[0] in {FRAMEWORKS!r}))"
    )
    out = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "[]"


def test_the_probe_sees_a_framework_when_one_is_imported():
    probe = f"import sys, wurk.contrib.sqlalchemy; print(sorted(m for m in sys.modules if m in {FRAMEWORKS!r}))"
    out = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, check=True).stdout
    assert "sqlalchemy" in out


def test_settings_take_the_yaml_files_keys(config):
    configure_from(
        config,
        {
            "concurrency": 3,
            "queues": ["critical", "default"],
            "capsules": {"single": {"concurrency": 1, "queues": ["serial"]}},
            "labels": ["web"],
            "redis": {"url": config.redis["url"]},
            "my_middleware_setting": 1,  # a key of the application's own: kept
        },
        "settings",
    )
    assert config.concurrency == 3
    assert config.queues == ["critical", "default"]
    assert config.capsules["single"].queues == ["serial"]
    assert config["labels"] == {"web"}
    assert config["my_middleware_setting"] == 1


def test_a_misspelt_key_or_a_bad_value_is_refused_in_one_line(config):
    with pytest.raises(ConfigurationError) as caught:
        configure_from(config, {"queues": ["a"], "concurrncy": 2}, "settings")
    assert str(caught.value) == "settings: unknown option 'concurrncy'; did you mean 'concurrency'?"
    with pytest.raises(ConfigurationError, match="concurrency"):
        configure_from(config, {"concurrency": 0}, "settings")
    with pytest.raises(ConfigurationError, match="must be a mapping"):
        configure_from(config, ["queues"], "settings")  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("environ", "expected"),
    [({"SERVER_SOFTWARE": "gunicorn/23.0.0"}, "gunicorn"), ({"SERVER_SOFTWARE": "uvicorn"}, None), ({}, None)],
)
def test_a_gunicorn_worker_is_recognised_by_its_server_software(environ, expected):
    assert preforking_server(environ) == expected


@pytest.fixture
def logged(config, caplog):
    """The configuration's log, as records pytest captures."""
    config.logger = logging.getLogger("tests.webhosts")
    caplog.set_level(logging.INFO, logger="tests.webhosts")
    return caplog


def test_an_embedded_worker_takes_the_settings_concurrency_over_its_default_of_two(config, redis, logged):
    instance = start_embedded(config, {"concurrency": 3})
    assert instance is not None
    try:
        assert config.concurrency == 3
        assert any("starting 3 threads" in message for message in logged.messages)
        (identity,) = redis.smembers(keys.PROCESSES)
        assert json.loads(redis.hget(identity, "info"))["embedded"] is True
    finally:
        instance.stop()
    assert redis.smembers(keys.PROCESSES) == set()


def test_wurk_disabled_starts_no_embedded_worker_and_says_so_in_one_line(config, redis, logged, monkeypatch):
    monkeypatch.setenv("WURK_DISABLED", "1")
    assert start_embedded(config, {}) is None
    (record,) = logged.records
    assert record.levelno == logging.INFO
    assert record.getMessage() == "WURK_DISABLED=1: this web process enqueues jobs but runs none (no embedded worker)"
    assert redis.smembers(keys.PROCESSES) == set()
    assert not config.frozen  # nothing booted


def test_a_gunicorn_worker_refuses_in_one_line(config, logged, monkeypatch):
    monkeypatch.setenv("SERVER_SOFTWARE", "gunicorn/23.0.0")
    assert start_embedded(config, {}) is None
    (record,) = logged.records
    assert record.levelno == logging.WARNING
    assert "\n" not in record.getMessage()
    assert record.getMessage().startswith("not starting the embedded worker: this process is a gunicorn worker")


def test_a_uwsgi_worker_is_recognised_by_the_module_uwsgi_gives_its_workers(monkeypatch):
    # uWSGI builds its ``uwsgi`` module into the interpreters of its workers;
    # no uWSGI server runs in this suite, so the module stands in for one.
    monkeypatch.setitem(sys.modules, "uwsgi", types.ModuleType("uwsgi"))
    assert preforking_server({}) == "uWSGI"


def test_settings_read_like_a_config_file_with_the_environments_section_merged(config, monkeypatch):
    monkeypatch.setenv("APP_ENV", "production")
    applied = configure_from(config, {":concurrency": 2, "queues": ["a"], "production": {"queues": ["b"]}}, "settings")
    assert applied == {"concurrency": 2, "queues": ["b"]}
    assert config.queues == ["b"]
    assert config.concurrency == 2

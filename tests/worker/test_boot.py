"""Booting from the command line: config files, precedence, validation."""

from __future__ import annotations

import textwrap

import pytest

import wurk
from tests.helpers import Subprocess
from wurk.cli import boot
from wurk.errors import ConfigurationError


def write(path, text):
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(textwrap.dedent(text))
    return path


def test_yaml_with_sidekiq_keys_env_overlay_and_variables(tmp_path, monkeypatch):
    monkeypatch.setenv("WORKERS", "12")
    monkeypatch.delenv("UNSET_THING", raising=False)
    file = write(
        tmp_path / "config" / "wurk.yml",
        """
        :concurrency: 5
        :timeout: 8
        :tag: ${APP_TAG:-billing}
        :queues:
          - critical,3
          - [default, 2]
          - [low]
        :strict: false
        :capsules:
          single:
            :concurrency: 1
            :queues: [serial]
        production:
          :concurrency: ${WORKERS}
        """,
    )
    options = boot.load_config_file(file, "production")
    assert options["concurrency"] == 12  # expanded before parsing, so it is a number
    assert options["tag"] == "billing"
    assert options["queues"] == ["critical,3", ["default", 2], ["low"]]
    assert "strict" not in options
    assert "production" not in options
    development = boot.load_config_file(file, "development")
    assert development["concurrency"] == 5


def test_flags_win_over_the_file_and_the_file_is_found_beside_the_app(tmp_path, monkeypatch):
    write(tmp_path / "config" / "sidekiq.yml", ":concurrency: 3\n:queues: [a, b]\n:timeout: 9\n")
    app = write(tmp_path / "app.py", "")
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("RAILS_MAX_THREADS", raising=False)
    options = boot.build_options({"require": str(app), "concurrency": 7, "queues": []})
    assert options["concurrency"] == 7
    assert options["queues"] == ["a", "b"]
    assert options["config_file"].endswith("config/sidekiq.yml")
    assert boot.build_options({"require": str(app)}, environ={"RAILS_MAX_THREADS": "4"})["concurrency"] == 3


def test_defaults_and_rails_max_threads(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    options = boot.build_options({"require": "."}, environ={"RAILS_MAX_THREADS": "4"})
    assert (options["queues"], options["concurrency"], options["environment"]) == (["default"], 4, "development")
    assert boot.build_options({"require": ".", "environment": "staging"}, environ={})["environment"] == "staging"
    assert boot.build_options({"require": "."}, environ={"APP_ENV": "qa", "RAILS_ENV": "x"})["environment"] == "qa"


def test_applying_options_builds_capsules_and_rejects_nonsense(monkeypatch):
    config = wurk.Config()
    boot.apply_options(
        config,
        {
            "concurrency": "4",
            "queues": ["critical,3", "default"],
            "labels": ["blue", "canary"],
            "capsules": {"single": {"concurrency": 1, "queues": ["serial"]}},
        },
    )
    assert config.concurrency == 4
    assert config.default_capsule.weights == {"critical": 3, "default": 0}
    assert config.capsule("single").queues == ["serial"]
    assert config.total_concurrency == 5
    assert config["labels"] == {"blue", "canary"}
    with pytest.raises(ConfigurationError, match="concurrency must be > 0"):
        boot.apply_options(wurk.Config(), {"concurrency": 0})
    with pytest.raises(ConfigurationError, match="timeout must be a whole number"):
        boot.apply_options(wurk.Config(), {"timeout": "soon"})


def test_config_file_errors_name_the_problem(tmp_path, monkeypatch):
    monkeypatch.delenv("NOT_SET_AT_ALL", raising=False)
    bad = write(tmp_path / "bad.yml", "concurrency: [unclosed\n")
    with pytest.raises(ConfigurationError, match="not valid YAML"):
        boot.load_config_file(bad, "development")
    unset = write(tmp_path / "unset.yml", "tag: ${NOT_SET_AT_ALL}\n")
    with pytest.raises(ConfigurationError, match=r"\$\{NOT_SET_AT_ALL\}"):
        boot.load_config_file(unset, "development")
    with pytest.raises(ConfigurationError, match="cannot read config file"):
        boot.load_config_file(tmp_path / "missing.yml", "development")
    listy = write(tmp_path / "list.yml", "- a\n- b\n")
    with pytest.raises(ConfigurationError, match="mapping"):
        boot.load_config_file(listy, "development")


def test_require_loads_files_and_modules(tmp_path):
    app = write(tmp_path / "boot_probe_app.py", "LOADED = True\n")
    assert boot.require_app(str(app)) == "boot_probe_app"
    import boot_probe_app  # noqa: F401 - imported by require_app under its file name

    with pytest.raises(ConfigurationError, match="no such file"):
        boot.require_app(str(tmp_path / "missing.py"))
    with pytest.raises(ConfigurationError, match=r"not a \.py file"):
        boot.require_app("no_such_module_anywhere")


def test_an_import_error_in_the_app_is_a_configuration_error_with_its_cause(tmp_path):
    app = write(tmp_path / "boot_broken_app.py", "import os\nimport wurk_boot_no_such_dependency\n")
    with pytest.raises(boot.AppImportError) as caught:
        boot.require_app(str(app))
    assert isinstance(caught.value, ConfigurationError)
    assert isinstance(caught.value.__cause__, ModuleNotFoundError)
    assert str(caught.value) == (
        f"-r {app}: importing it failed with ModuleNotFoundError: "
        f"No module named 'wurk_boot_no_such_dependency' ({app} line 2)"
    )


@pytest.mark.parametrize(
    ("source", "error", "line"),
    [
        ("import os\nimport wurk_boot_no_such_dependency\n", "No module named 'wurk_boot_no_such_dependency'", 2),
        ("x = 1\n\nraise RuntimeError('bad settings')\n", "RuntimeError: bad settings", 3),
        ("def broken(:\n    pass\n", "SyntaxError", 1),
    ],
)
def test_a_broken_app_stops_the_worker_with_one_line_and_exit_2(tmp_path, redis_url, monkeypatch, source, error, line):
    write(tmp_path / "broken_app.py", source)
    monkeypatch.delenv("WURK_DEBUG", raising=False)
    worker = Subprocess.python("-m", "wurk.cli", "-r", "broken_app.py", env={"REDIS_URL": redis_url}, cwd=tmp_path)
    output = worker.output()  # read before asserting, so the pipe is always drained and closed
    assert worker.wait(30) == 2, output
    assert "Traceback" not in output
    [message] = [text for text in output.splitlines() if text.startswith("wurk: ")]
    assert message.startswith("wurk: -r broken_app.py: importing it failed with ")
    assert error in message
    assert f"broken_app.py line {line})" in message
    assert len(output.strip().splitlines()) <= 2


def test_server_version_check():
    boot.check_server_version({"redis_version": "7.0.15"})
    boot.check_server_version({"redis_version": "7.2.4", "valkey_version": "9.1.2"})
    with pytest.raises(ConfigurationError, match=r"Redis >= 7.0.0; the server is 6.2.14"):
        boot.check_server_version({"redis_version": "6.2.14"})


def test_validate_against_the_real_server(config, redis, caplog):
    boot.validate(config)
    redis.config_set("maxmemory-policy", "allkeys-lru")
    config.logger.propagate = True
    try:
        boot.validate(config)
    finally:
        config.logger.propagate = False
        redis.config_set("maxmemory-policy", "noeviction")
    assert "maxmemory-policy is allkeys-lru" in caplog.text
    config.redis = {"size": 2}
    config.concurrency = 5
    with pytest.raises(ConfigurationError, match="Pool size too small"):
        boot.validate(config)

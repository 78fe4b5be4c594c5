"""Job lookup: a payload's ``class`` never makes a worker import a module
outside the application's own packages, and an unknown job says why."""

from __future__ import annotations

import json
import os
import sys
import textwrap
from collections.abc import Iterator
from pathlib import Path

import pytest

import wurk
from tests.helpers import WorkerPool, wait_for
from wurk.cli import boot
from wurk.client.registry import UnknownJobError
from wurk.errors import ConfigurationError

PROBES = ("lkp_allowed", "lkp_outside")


class Renamed(wurk.Job):
    wire_name = "RubyStyleRenamed"

    def perform(self):
        pass


@wurk.job
def lookup_function_job():
    pass


def write(path: Path, text: str) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(textwrap.dedent(text))
    return path


@pytest.fixture
def probes(tmp_path, monkeypatch) -> Iterator[Path]:
    """Importable probe modules whose import leaves a marker file, removed
    from ``sys.modules`` afterwards so no other test sees them."""
    markers = tmp_path / "markers"
    markers.mkdir()
    monkeypatch.setenv("LOOKUP_MARKERS", str(markers))
    side_effect = "import os, pathlib\npathlib.Path(os.environ['LOOKUP_MARKERS'], __name__).touch()\n"
    write(tmp_path / "lkp_outside.py", side_effect + "import wurk\nclass Job(wurk.Job):\n    pass\n")
    write(tmp_path / "lkp_allowed" / "__init__.py", "")
    write(
        tmp_path / "lkp_allowed" / "jobs.py",
        side_effect
        + textwrap.dedent(
            """
        import wurk

        class Charge(wurk.Job):
            def perform(self):
                pass

        class Duck:
            def perform(self):
                pass
        """
        ),
    )
    write(tmp_path / "lkp_allowed" / "broken.py", "import lkp_no_such_dependency\n")
    write(tmp_path / "lkp_allowed" / "raising.py", "raise RuntimeError('the app module is broken')\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    yield markers
    for name in list(sys.modules):
        if name.split(".")[0] in PROBES:
            del sys.modules[name]


def test_defined_job_classes_and_registered_names_resolve_without_an_import(config):
    assert config.jobs.allowed == ()
    assert config.jobs.resolve("RubyStyleRenamed") is Renamed
    assert config.jobs.resolve(f"{__name__}.lookup_function_job") is lookup_function_job.job_class
    config.jobs.register("ForeignName", Renamed)
    assert config.jobs.resolve("ForeignName") is Renamed


def test_nothing_is_imported_outside_the_allowed_packages(config, probes):
    with pytest.raises(UnknownJobError, match="no -r module or job_packages is configured") as caught:
        config.jobs.resolve("lkp_outside.Job")
    assert caught.value.__cause__ is None
    assert "lkp_outside" not in sys.modules
    assert not (probes / "lkp_outside").exists()
    config.jobs.allow("lkp_allowed")
    with pytest.raises(UnknownJobError, match="imports only from lkp_allowed"):
        config.jobs.resolve("lkp_outside.Job")
    assert not (probes / "lkp_outside").exists()
    with pytest.raises(UnknownJobError):
        config.jobs.resolve("os.system")  # loaded already, but not a job and not the app's


def test_allowed_packages_are_imported_on_first_use_and_must_hold_real_jobs(config, probes):
    config.jobs.allow("lkp_allowed")
    charge = config.jobs.resolve("lkp_allowed.jobs.Charge")
    assert charge.__name__ == "Charge"
    assert (probes / "lkp_allowed.jobs").exists()
    with pytest.raises(UnknownJobError, match=r"not a wurk\.Job subclass"):
        config.jobs.resolve("lkp_allowed.jobs.Duck")  # has a perform, is not a job
    with pytest.raises(UnknownJobError, match=r"not a wurk\.Job subclass"):
        config.jobs.resolve("lkp_allowed.jobs.os")


def test_an_unknown_job_carries_the_import_error_and_says_what_to_fix(config, probes):
    config.jobs.allow("lkp_allowed")
    with pytest.raises(UnknownJobError) as caught:
        config.jobs.resolve("lkp_allowed.broken.Job")
    error = caught.value
    assert isinstance(error.__cause__, ModuleNotFoundError)
    assert error.__cause__.name == "lkp_no_such_dependency"
    message = str(error)
    assert "importing lkp_allowed.broken failed with ModuleNotFoundError" in message
    assert "No module named 'lkp_no_such_dependency'" in message
    assert "-r" in message
    assert "job_packages" in message
    assert os.getcwd() in message
    with pytest.raises(UnknownJobError, match="RuntimeError: the app module is broken") as raised:
        config.jobs.resolve("lkp_allowed.raising.Job")
    assert isinstance(raised.value.__cause__, RuntimeError)
    with pytest.raises(UnknownJobError, match="has no attribute 'Gone'") as missing:
        config.jobs.resolve("lkp_allowed.jobs.Gone")
    assert isinstance(missing.value.__cause__, AttributeError)
    with pytest.raises(UnknownJobError, match=r"No module named 'lkp_allowed\.nope'") as absent:
        config.jobs.resolve("lkp_allowed.nope.Job")
    assert isinstance(absent.value.__cause__, ModuleNotFoundError)


def test_a_misspelt_job_name_says_which_known_job_it_is_close_to(config):
    function_job = f"{__name__}.lookup_function_job"
    with pytest.raises(UnknownJobError) as caught:
        config.jobs.resolve(f"{__name__}.lookup_functon_job")
    assert f"(did you mean {function_job!r}?)" in str(caught.value)
    assert "nothing was imported" in str(caught.value)  # and still why it is unknown
    config.jobs.register("HardJob", Renamed)
    with pytest.raises(UnknownJobError, match=r"^no job named 'HardJb' \(did you mean 'HardJob'\?\): "):
        config.jobs.resolve("HardJb")
    # The right class under a shortened module path.
    with pytest.raises(UnknownJobError, match=f"did you mean {function_job!r}"):
        config.jobs.resolve("jobs.lookup_function_job")
    # Nothing near: no guess.
    with pytest.raises(UnknownJobError) as unrelated:
        config.jobs.resolve("billing.jobs.ChargeCustomerCard")
    assert "did you mean" not in str(unrelated.value)


def test_boot_allows_the_app_package_and_checked_job_packages(config, probes):
    config["require"] = "tests.worker.lookup_app"
    config["job_packages"] = ["lkp_allowed.jobs"]
    boot.allow_app_jobs(config)
    assert config.jobs.allowed == ("tests", "lkp_allowed.jobs")
    with pytest.raises(ConfigurationError, match="job_packages must be a list"):
        config["job_packages"] = "lkp_allowed"  # refused as it is set, as every option is
    with pytest.raises(ConfigurationError, match="not a dotted module name"):
        config["job_packages"] = ["lkp_allowed/jobs"]
    config["job_packages"] = ["lkp_no_such_package"]
    with pytest.raises(ConfigurationError, match="job_packages: no module named 'lkp_no_such_package'"):
        boot.allow_app_jobs(config)
    assert boot.app_module_name("app.py") == "app"
    assert boot.app_module_name(".") is None


def test_configured_job_packages_count_without_the_command_line(config, probes):
    """An embedded worker never runs the command line's boot: the configured
    packages still decide what lookup may import."""
    # A module of this test's own: a class another test imported would
    # resolve as already defined, with no import to allow.
    module = probes.parent / "lkp_allowed" / "embedded_only.py"
    write(module, "import wurk\n\nclass OnlyHere(wurk.Job):\n    def perform(self):\n        pass\n")
    with pytest.raises(UnknownJobError):
        config.jobs.resolve("lkp_allowed.embedded_only.OnlyHere")
    config["job_packages"] = ["lkp_allowed"]
    assert config.jobs.resolve("lkp_allowed.embedded_only.OnlyHere").__name__ == "OnlyHere"


# -- real workers ------------------------------------------------------------------


@pytest.fixture
def lookup_workers(config, redis_url, tmp_path) -> Iterator[WorkerPool]:
    path = os.pathsep.join(filter(None, [str(tmp_path / "app"), os.environ.get("PYTHONPATH")]))
    env = {"PYTHONPATH": path, "LOOKUP_MARKERS": str(tmp_path)}
    pool = WorkerPool(redis_url, tmp_path, "tests.worker.lookup_app", env)
    yield pool
    pool.stop_all()


def retry_entries(redis) -> dict[str, dict]:
    entries = (json.loads(member) for member in redis.zrange("retry", 0, -1))
    return {entry["class"]: entry for entry in entries}


def test_a_payload_cannot_make_a_worker_import_a_module(lookup_workers, redis, tmp_path):
    write(
        tmp_path / "app" / "lookup_side_effect.py",
        "import os, pathlib\npathlib.Path(os.environ['LOOKUP_MARKERS'], 'imported').touch()\n",
    )
    for name in ("this.Nope", "lookup_side_effect.Nope", "tests.worker.lookup_app.DuckJob"):
        wurk.Client().push({"class": name, "args": ["duck"]})
    worker = lookup_workers.start("-c", "1")
    wait_for(lambda: redis.zcard("retry") == 3, timeout=30)
    wurk.Client().push({"class": "tests.worker.lookup_app.Modules", "args": ["this", "lookup_side_effect"]})
    wait_for(lambda: redis.llen("modules") == 1, timeout=30)
    assert json.loads(redis.lindex("modules", 0)) == {"this": False, "lookup_side_effect": False}
    assert not (tmp_path / "imported").exists()
    assert not redis.hexists("executions", "duck")
    entries = retry_entries(redis)
    for name in ("this.Nope", "lookup_side_effect.Nope"):
        assert entries[name]["error_class"] == "wurk.client.registry.UnknownJobError"
        assert "nothing was imported" in entries[name]["error_message"]
        assert "imports only from tests" in entries[name]["error_message"]
    assert "not a wurk.Job subclass" in entries["tests.worker.lookup_app.DuckJob"]["error_message"]
    worker.stop()


def test_a_worker_names_the_job_a_misspelt_class_was_meant_to_be(lookup_workers, redis):
    # Enqueueing takes any name (another process may define it); the worker's error says which was meant.
    wurk.Client().push({"class": "tests.worker.lookup_app.Moduls", "args": []})
    worker = lookup_workers.start("-c", "1")
    wait_for(lambda: redis.zcard("retry") == 1, timeout=30)
    failed = retry_entries(redis)["tests.worker.lookup_app.Moduls"]
    assert failed["error_class"] == "wurk.client.registry.UnknownJobError"
    assert "(did you mean 'tests.worker.lookup_app.Modules'?)" in failed["error_message"]
    worker.stop()


def test_job_packages_let_a_worker_import_its_jobs_on_first_use(lookup_workers, redis, tmp_path):
    write(tmp_path / "app" / "lazyjobs" / "__init__.py", "")
    write(
        tmp_path / "app" / "lazyjobs" / "billing.py",
        """
        import os

        import redis

        import wurk

        class Charge(wurk.Job):
            def perform(self, key):
                url = os.environ.get("WURK_TEST_EVIDENCE_URL") or os.environ["REDIS_URL"]
                redis.Redis.from_url(url).hincrby("executions", key, 1)
        """,
    )
    write(tmp_path / "app" / "lazyjobs" / "broken.py", "import lazy_missing_dependency\n")
    wurk.Client().push({"class": "lazyjobs.billing.Charge", "args": ["paid"]})
    wurk.Client().push({"class": "lazyjobs.broken.Job", "args": []})
    worker = lookup_workers.start("-c", "1", env={"TEST_JOB_PACKAGES": "lazyjobs"})
    wait_for(lambda: redis.hget("executions", "paid") == b"1" and redis.zcard("retry") == 1, timeout=30)
    failed = retry_entries(redis)["lazyjobs.broken.Job"]
    assert failed["error_class"] == "wurk.client.registry.UnknownJobError"
    assert "No module named 'lazy_missing_dependency'" in failed["error_message"]
    worker.stop()


def test_bad_job_packages_stop_a_worker_at_boot(lookup_workers):
    worker = lookup_workers.start("-c", "1", env={"TEST_JOB_PACKAGES": "no_such_job_package"})
    assert worker.wait(30) == 2
    output = worker.output()
    assert "job_packages: no module named 'no_such_job_package'" in output
    assert "Traceback" not in output

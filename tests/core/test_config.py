"""The configuration: defaults, hash-like access, capsules and queues, freezing,
lifecycle events, error handling, Redis options and pools, and the
configure decorators."""

from __future__ import annotations

import logging

import pytest
import redis as redis_py

import wurk
import wurk_web
from tests.helpers import wait_for
from wurk.config.capsule import parse_queue
from wurk.config.configuration import DEFAULTS, default_error_handler
from wurk.config.defaults import default_config, enter_server_mode
from wurk.errors import ConfigurationError, FrozenConfigError, RedisConnectionError
from wurk.plugins.hookspecs import LIFECYCLE_EVENTS
from wurk.redis.connection import PoolTimeoutError


class ListHandler(logging.Handler):
    def __init__(self):
        super().__init__(logging.DEBUG)
        self.records: list[logging.LogRecord] = []

    def emit(self, record):
        self.records.append(record)


@pytest.fixture
def captured(monkeypatch):
    """A configuration whose logger records into a list (not the shared ``wurk`` logger)."""
    monkeypatch.delenv("WURK_DEBUG", raising=False)
    monkeypatch.delenv("SIDEKIQ_DEBUG", raising=False)
    config = wurk.Config()
    logger = logging.getLogger(f"wurk.test.config.{id(config)}")
    logger.propagate = False
    logger.setLevel(logging.INFO)
    handler = ListHandler()
    logger.addHandler(handler)
    config.logger = logger
    yield config, handler
    logger.removeHandler(handler)


# -- DEFAULTS ---------------------------------------------------------------------


def test_defaults_table():
    config = wurk.Config()
    expected = {
        "labels": set(),
        "require": ".",
        "environment": None,
        "concurrency": 5,
        "timeout": 25,
        "poll_interval_average": None,
        "average_scheduled_poll_interval": 5,
        "on_complex_arguments": "raise",
        "max_iteration_runtime": None,
        "death_handlers": [],
        "dead_max_jobs": 10_000,
        "dead_timeout_in_seconds": 15_552_000,
        "logged_job_attributes": ["bid", "tags"],
        "redis_idle_timeout": None,
        "redis_error_handlers": [],
    }
    for key, value in expected.items():
        assert config[key] == value, key
        assert DEFAULTS[key] == value, key
    assert config["error_handlers"] == [default_error_handler]
    assert config["lifecycle_events"] == {event: [] for event in LIFECYCLE_EVENTS}
    assert set(config["lifecycle_events"]) == {
        "startup",
        "before_fork",
        "fork",
        "quiet",
        "shutdown",
        "exit",
        "heartbeat",
        "beat",
        "leader",
        "leader_lost",
    }
    assert set(DEFAULTS) <= set(config)


def test_default_callables():
    config = wurk.Config()
    assert config["reloader"](lambda: "ran") == "ran"
    lines = ["a.py:1", "b.py:2"]
    assert config["backtrace_cleaner"](lines) == lines


def test_each_config_has_its_own_mutable_defaults():
    first, second = wurk.Config(), wurk.Config()
    first["labels"].add("blue")
    first["logged_job_attributes"].append("jid")
    first.on("startup", lambda: None)
    first.death_handlers.append(lambda job, exc: None)
    first.error_handlers.append(lambda exc, ctx, cfg: None)
    assert second["labels"] == set()
    assert second["logged_job_attributes"] == ["bid", "tags"]
    assert second["lifecycle_events"]["startup"] == []
    assert second.death_handlers == []
    assert second.error_handlers == [default_error_handler]
    assert DEFAULTS["labels"] == set()
    assert DEFAULTS["error_handlers"] == []
    assert DEFAULTS["lifecycle_events"]["startup"] == []


def test_runtime_keys_are_unset_until_assigned():
    config = wurk.Config()
    for key in ("tag", "identity", "verbose", "max_retries", "fetch_class", "scheduled_enq", "job_logger"):
        assert key not in config
    assert config.server is False
    assert config.thread_priority == -1
    assert config.default_job_options == {"retry": True, "queue": "default"}


# -- hash-like access -------------------------------------------------------------


def test_getitem_setitem():
    config = wurk.Config()
    config["timeout"] = 8
    config["tag"] = "billing"
    assert config["timeout"] == 8
    assert config["tag"] == "billing"
    with pytest.raises(KeyError):
        config["no_such_option"]


def test_get():
    config = wurk.Config()
    assert config.get("timeout") == 25
    assert config.get("concurrency") == 5
    assert config.get("queues") == ["default"]
    assert config.get("missing") is None
    assert config.get("missing", 3) == 3


def test_fetch():
    config = wurk.Config()
    assert config.fetch("timeout") == 25
    assert config.fetch("missing", 7) == 7
    assert config.fetch("missing", None) is None
    assert config.fetch("timeout", 7) == 25
    with pytest.raises(KeyError, match="max_retries"):
        config.fetch("max_retries")


def test_contains_and_iteration():
    config = wurk.Config()
    assert "timeout" in config
    assert "concurrency" in config
    assert "queues" in config
    assert "missing" not in config
    config["missing"] = None
    assert "missing" in config  # present, even if None
    assert "timeout" in list(config)


def test_update_merges_and_goes_through_the_accessors():
    config = wurk.Config()
    config.update({"timeout": 10, "concurrency": 3, "queues": ["critical,2", "default"], "tag": "x"})
    assert config["timeout"] == 10
    assert config.default_capsule.concurrency == 3
    assert config.default_capsule.weights == {"critical": 2, "default": 0}
    assert config["tag"] == "x"
    assert config["require"] == "."  # untouched keys stay


def test_options_given_to_the_constructor():
    config = wurk.Config({"concurrency": 12, "timeout": 4})
    assert config.concurrency == 12
    assert config["timeout"] == 4


def test_dig():
    config = wurk.Config()
    config.health_check(7433)
    assert config.dig("health_check_options", "port") == 7433
    assert config.dig("logged_job_attributes", 0) == "bid"
    assert config.dig("lifecycle_events", "startup") == []
    assert config.dig("timeout") == 25
    assert config.dig("missing", "x") is None
    assert config.dig("logged_job_attributes", 9) is None
    assert config.dig("timeout", "x") is None  # an int has no keys


def test_setdefault():
    config = wurk.Config()
    assert config.setdefault("timeout", 99) == 25
    assert config.setdefault("max_retries", 10) == 10
    assert config["max_retries"] == 10
    assert config.setdefault("max_retries", 3) == 10


def test_option_reads_the_raw_store():
    config = wurk.Config()
    config.concurrency = 9
    assert config.option("concurrency") == 9
    assert config.option("missing", "fallback") == "fallback"


@pytest.mark.parametrize("mode", ["raise", "warn", False])
def test_on_complex_arguments_accepts_the_three_modes(mode):
    config = wurk.Config()
    config["on_complex_arguments"] = mode
    assert config["on_complex_arguments"] == mode


def test_on_complex_arguments_rejects_anything_else():
    config = wurk.Config()
    with pytest.raises(ConfigurationError, match="'raise', 'warn' or False"):
        config["on_complex_arguments"] = "ignore"
    assert config["on_complex_arguments"] == "raise"


# -- concurrency, queues, capsules ---------------------------------------------------


def test_concurrency_writes_the_default_capsule():
    config = wurk.Config()
    assert config.concurrency == 5
    config.concurrency = 10
    assert config.default_capsule.concurrency == 10
    assert config["concurrency"] == 10
    config["concurrency"] = 7
    assert config.concurrency == 7
    assert config.default_capsule.concurrency == 7


def test_new_capsules_start_from_the_configured_concurrency():
    config = wurk.Config()
    config.concurrency = 8
    assert config.capsule("reports").concurrency == 8
    pinned = config.capsule("critical", concurrency=2)
    config.concurrency = 3
    assert pinned.concurrency == 2


@pytest.mark.parametrize("value", [0, -1, 1.5, "5", True, None])
def test_concurrency_must_be_a_whole_number_above_zero(value):
    config = wurk.Config()
    with pytest.raises(ConfigurationError, match="concurrency"):
        config.concurrency = value
    with pytest.raises(ConfigurationError, match="concurrency"):
        config["concurrency"] = value
    with pytest.raises(ConfigurationError, match="concurrency"):
        config.default_capsule.concurrency = value
    assert config.concurrency == 5


def test_queues_default_and_assignment():
    config = wurk.Config()
    assert config.queues == ["default"]
    assert config["queues"] == ["default"]
    config.queues = ["critical", "default", "low"]
    assert config.queues == ["critical", "default", "low"]
    assert config.default_capsule.queues == ["critical", "default", "low"]
    config["queues"] = "only"
    assert config.queues == ["only"]


def test_total_concurrency_sums_every_capsule():
    config = wurk.Config()
    config.concurrency = 5
    config.capsule("critical", concurrency=2)
    config.capsule("reports", concurrency=3)
    assert config.total_concurrency == 10


def test_capsule_is_created_once_and_looked_up_after():
    config = wurk.Config()
    created = config.capsule("critical", concurrency=2, queues=["critical"])
    assert created.name == "critical"
    assert created.config is config
    assert config.capsule("critical") is created
    assert (created.concurrency, created.queues) == (2, ["critical"])
    assert config.capsule("critical", concurrency=4).concurrency == 4  # lookup applies settings too
    assert set(config.capsules) == {"default", "critical"}
    assert config.default_capsule is config.capsule("default")
    assert "critical" in repr(created)


def test_capsules_is_a_copy():
    config = wurk.Config()
    config.capsules.clear()
    assert "default" in config.capsules


def test_a_new_capsule_with_invalid_settings_is_not_kept():
    config = wurk.Config()
    with pytest.raises(ConfigurationError):
        config.capsule("broken", concurrency=0)
    with pytest.raises(ConfigurationError):
        config.capsule("broken", queues=["a,0"])
    assert "broken" not in config.capsules
    assert config.total_concurrency == 5


@pytest.mark.parametrize("name", ["", "   ", None])
def test_a_capsule_needs_a_name(name):
    with pytest.raises(ConfigurationError, match="name"):
        wurk.Config().capsule(name)


@pytest.mark.parametrize(
    ("entries", "weights", "queues", "mode"),
    [
        (["high", "default", "low"], {"high": 0, "default": 0, "low": 0}, ["high", "default", "low"], "strict"),
        (
            ["high,3", "default,2", "low,1"],
            {"high": 3, "default": 2, "low": 1},
            ["high"] * 3 + ["default"] * 2 + ["low"],
            "weighted",
        ),
        (["a,1", "b,1", "c,1"], {"a": 1, "b": 1, "c": 1}, ["a", "b", "c"], "random"),
        ([["a", 2], ["b", 2]], {"a": 2, "b": 2}, ["a", "a", "b", "b"], "random"),
        ([["a"], ["b", 3]], {"a": 0, "b": 3}, ["a", "b", "b", "b"], "weighted"),
        ([("a", 1), "b,2"], {"a": 1, "b": 2}, ["a", "b", "b"], "weighted"),
        (["critical, 2", " low "], {"critical": 2, "low": 0}, ["critical", "critical", "low"], "weighted"),
        (["a", ["b", "2"]], {"a": 0, "b": 2}, ["a", "b", "b"], "weighted"),
        ("solo", {"solo": 0}, ["solo"], "strict"),
    ],
)
def test_queue_entry_forms_and_mode(entries, weights, queues, mode):
    capsule = wurk.Config().default_capsule
    capsule.queues = entries
    assert capsule.weights == weights
    assert capsule.queues == queues
    assert capsule.mode == mode


def test_queue_specs_round_trip():
    config = wurk.Config()
    config.queues = ["critical,3", ["default"], ("low", 1)]
    specs = config.default_capsule.queue_specs
    assert specs == ["critical,3", "default", "low,1"]
    other = wurk.Config()
    other.queues = specs
    assert other.default_capsule.weights == config.default_capsule.weights


@pytest.mark.parametrize(
    ("concurrency", "entries", "description"),
    [
        (2, ["critical,3", "default"], "2 threads on queues critical (weight 3), default (weight 1)"),
        (1, ["high", "low"], "1 thread on queues high, low, in this order"),
        (5, ["a,2", "b,2"], "5 threads on queues a, b, in random order"),
        (5, ["solo,4"], "5 threads on queue solo"),
    ],
)
def test_a_capsule_describes_its_threads_and_queues_for_people(concurrency, entries, description):
    capsule = wurk.Config().default_capsule
    capsule.concurrency = concurrency
    capsule.queues = entries
    assert capsule.description == description


def test_default_capsule_mode_is_strict():
    assert wurk.Config().default_capsule.mode == "strict"


@pytest.mark.parametrize("entry", ["a,0", ["a", 0], "a,-2", ["a", -1]])
def test_weight_zero_or_negative_is_rejected(entry):
    with pytest.raises(ConfigurationError, match=r"must be > 0"):
        parse_queue(entry)


@pytest.mark.parametrize("entry", ["a,1.5", ["a", 1.5], ["a", 2.0], ["a", "x"], "a,", "a,3,4", ["a", True]])
def test_non_integer_weight_is_rejected(entry):
    with pytest.raises(ConfigurationError, match="whole number"):
        parse_queue(entry)


@pytest.mark.parametrize("entry", ["", " ", ",3", [None], [3], [], ["a", 1, 2], 3, None])
def test_malformed_queue_entries_are_rejected(entry):
    with pytest.raises(ConfigurationError, match="queue"):
        parse_queue(entry)


def test_an_empty_queue_list_is_rejected_and_the_old_one_kept():
    config = wurk.Config()
    config.queues = ["a", "b"]
    with pytest.raises(ConfigurationError, match="at least one queue"):
        config.queues = []
    with pytest.raises(ConfigurationError):
        config.queues = ["c", "d,0"]
    assert config.queues == ["a", "b"]


def test_error_messages_name_the_queue():
    with pytest.raises(ConfigurationError, match="'critical'"):
        parse_queue("critical,0")
    with pytest.raises(ConfigurationError, match="'critical'"):
        parse_queue(["critical", "many"])


def test_parse_queue_returns_name_and_weight():
    assert parse_queue("a") == ("a", 0)
    assert parse_queue("a,3") == ("a", 3)
    assert parse_queue(["a"]) == ("a", 0)
    assert parse_queue(["a", 3]) == ("a", 3)


# -- freezing -----------------------------------------------------------------------


def test_freeze_blocks_every_write(config):
    capsule = config.capsule("critical", concurrency=2)
    config.freeze()
    assert config.frozen
    writes = [
        lambda: config.__setitem__("timeout", 1),
        lambda: config.update({"timeout": 1}),
        lambda: config.setdefault("brand_new", 1),
        lambda: setattr(config, "redis", {"url": "redis://elsewhere:6379/0"}),
        lambda: setattr(config, "concurrency", 3),
        lambda: setattr(config, "queues", ["other"]),
        lambda: setattr(config, "error_handlers", []),
        lambda: setattr(config, "fetch_poll_interval", 1),
        lambda: config.__setitem__("memory_limit_mb", 100),
        lambda: config.health_check(7433),
        lambda: config.capsule("new"),
        lambda: config.capsule("critical", concurrency=4),
        lambda: setattr(capsule, "concurrency", 4),
        lambda: setattr(capsule, "queues", ["x"]),
    ]
    for write in writes:
        with pytest.raises(FrozenConfigError, match="frozen"):
            write()
    assert config["timeout"] == 25
    assert config.concurrency == 5
    assert capsule.concurrency == 2
    assert "new" not in config.capsules


def test_reads_and_lookups_still_work_when_frozen(config):
    config.capsule("critical")
    config.freeze()
    assert config.capsule("critical").name == "critical"
    assert config.setdefault("timeout", 1) == 25
    assert config.redis["url"]
    assert config.redis_pool.ping()


def test_freeze_takes_the_plugin_defaults_first(config):
    config.freeze()
    assert config.plugins.is_enabled("core")
    assert config["web_pool_size"] == 5  # contributed by the wurk-web plugin
    assert config["cron_tick_interval"] == 60  # contributed by the wurk-cron plugin


def test_frozen_config_error_is_a_runtime_error():
    config = wurk.Config()
    config.freeze()
    with pytest.raises(RuntimeError):
        config["timeout"] = 1


# -- lifecycle events ----------------------------------------------------------------


def test_on_rejects_an_unknown_event_and_names_the_valid_ones():
    config = wurk.Config()
    with pytest.raises(ConfigurationError, match="'startpu'") as caught:
        config.on("startpu")
    for event in LIFECYCLE_EVENTS:
        assert event in str(caught.value)


def test_on_rejects_a_non_callable():
    config = wurk.Config()
    with pytest.raises(ConfigurationError, match="callable"):
        config.on("startup")("not callable")
    with pytest.raises(ConfigurationError, match="callable"):
        config.on("startup", 42)
    assert config["lifecycle_events"]["startup"] == []


def test_on_as_decorator_and_direct_call():
    config = wurk.Config()

    @config.on("startup")
    def hello():
        return "hi"

    def bye():
        pass

    assert hello() == "hi"  # the decorator gives the function back
    assert config.on("exit", bye) is bye
    assert config["lifecycle_events"]["startup"] == [hello]
    assert config["lifecycle_events"]["exit"] == [bye]


def test_events_are_oneshot_except_beat_and_before_fork():
    # before_fork fires in the parent once per child it forks.
    repeating = ("beat", "before_fork")
    config = wurk.Config()
    ran = []
    for event in LIFECYCLE_EVENTS:
        config.on(event, lambda event=event: ran.append(event))
    for event in LIFECYCLE_EVENTS:
        config.fire_event(event)
        config.fire_event(event)
    for event in LIFECYCLE_EVENTS:
        if event in repeating:
            assert ran.count(event) == 2, event
            assert len(config["lifecycle_events"][event]) == 1, event
        else:
            assert ran.count(event) == 1, event
            assert config["lifecycle_events"][event] == []


@pytest.mark.parametrize("event", ["quiet", "shutdown", "exit"])
def test_stopping_events_run_last_registered_first(event):
    config = wurk.Config()
    order = []
    for number in (1, 2, 3):
        config.on(event, lambda number=number: order.append(number))
    config.fire_event(event)
    assert order == [3, 2, 1]


@pytest.mark.parametrize("event", ["startup", "fork", "heartbeat", "beat", "leader"])
def test_other_events_run_in_registration_order(event):
    config = wurk.Config()
    order = []
    for number in (1, 2, 3):
        config.on(event, lambda number=number: order.append(number))
    config.fire_event(event)
    assert order == [1, 2, 3]


def test_a_failing_callback_is_reported_and_the_rest_still_run():
    config = wurk.Config()
    reported = []
    config.error_handlers = [lambda exc, ctx, cfg: reported.append((exc, ctx, cfg))]
    order = []

    def broken():
        raise RuntimeError("flush failed")

    config.on("shutdown", lambda: order.append("first"))
    config.on("shutdown", broken)
    config.on("shutdown", lambda: order.append("last"))
    config.fire_event("shutdown")
    assert order == ["last", "first"]
    ((exc, ctx, cfg),) = reported
    assert str(exc) == "flush failed"
    assert ctx == {"context": "exception in shutdown event"}
    assert cfg is config


def test_startup_with_reraise_propagates_the_failure():
    config = wurk.Config()
    reported = []
    config.error_handlers = [lambda exc, ctx, cfg: reported.append(exc)]
    after = []

    def broken():
        raise RuntimeError("cannot boot")

    config.on("startup", broken)
    config.on("startup", lambda: after.append(1))
    with pytest.raises(RuntimeError, match="cannot boot"):
        config.fire_event("startup", reraise=True)
    assert after == []
    assert reported == []


def test_a_callback_registered_during_dispatch_waits_for_the_next_one():
    config = wurk.Config()
    ran = []

    def first():
        ran.append("first")
        config.on("heartbeat", lambda: ran.append("second"))

    config.on("heartbeat", first)
    config.fire_event("heartbeat")
    assert ran == ["first"]
    config.fire_event("heartbeat")
    assert ran == ["first", "second"]


def test_fire_event_rejects_an_unknown_event():
    with pytest.raises(ConfigurationError, match="unknown lifecycle event"):
        wurk.Config().fire_event("restart")


def test_fire_event_also_calls_the_plugins_hooks():
    config = wurk.Config()
    seen = []

    class Listener:
        @wurk.hookimpl
        def wurk_leader(self, config):
            seen.append(("plugin", config))

    config.plugins.register(Listener(), name="listener")
    config.on("leader", lambda: seen.append(("callback", None)))
    config.fire_event("leader")
    assert seen == [("callback", None), ("plugin", config)]


# -- error handlers and death handlers -----------------------------------------------


def test_error_handlers_start_with_the_default_one():
    assert wurk.Config().error_handlers == [default_error_handler]


def test_appending_keeps_the_default_and_assigning_replaces_it(captured):
    config, log = captured
    seen = []
    config.error_handlers.append(lambda exc, ctx, cfg: seen.append("mine"))
    config.handle_exception(ValueError("x"))
    assert seen == ["mine"]
    assert len(log.records) == 1  # the default handler logged it too

    config.error_handlers = [lambda exc, ctx, cfg: seen.append("only")]
    config.handle_exception(ValueError("y"))
    assert seen == ["mine", "only"]
    assert len(log.records) == 1
    assert default_error_handler not in config["error_handlers"]


@pytest.mark.parametrize("value", ["handler", [1], None])
def test_handler_lists_must_hold_callables(value):
    config = wurk.Config()
    with pytest.raises(ConfigurationError):
        config.error_handlers = value
    with pytest.raises(ConfigurationError):
        config.death_handlers = value
    assert config.error_handlers == [default_error_handler]


def test_handle_exception_passes_exception_context_and_config():
    config = wurk.Config()
    seen = []
    config.error_handlers = [lambda exc, ctx, cfg: seen.append((exc, ctx, cfg))]
    error = ValueError("boom")
    context = {"context": "job failed", "jid": "abc"}
    config.handle_exception(error, context)
    assert seen == [(error, context, config)]
    assert seen[0][1] is not context  # handlers get their own copy
    config.handle_exception(error)
    assert seen[1][1] == {}


def test_a_raising_error_handler_is_logged_and_the_others_still_run(captured):
    config, log = captured
    ran = []

    def broken(exc, ctx, cfg):
        raise RuntimeError("reporter down")

    config.error_handlers = [broken, lambda exc, ctx, cfg: ran.append(exc)]
    config.handle_exception(ValueError("original"))
    assert [str(exc) for exc in ran] == ["original"]
    (record,) = log.records
    assert record.levelno == logging.ERROR
    assert record.getMessage().startswith("error_handler raised")
    assert "reporter down" in record.getMessage()


def test_death_handlers():
    config = wurk.Config()
    assert config.death_handlers == []

    def handler(job, exc):
        pass

    config.death_handlers.append(handler)
    assert config["death_handlers"] == [handler]
    config.death_handlers = []
    assert config.death_handlers == []


def test_default_handler_logs_one_line_at_info(captured):
    config, log = captured
    config.handle_exception(ValueError("bad input"), {"context": "job failed", "jid": "abc", "job": {"x": 1}})
    (record,) = log.records
    assert record.levelno == logging.INFO
    assert record.getMessage() == "ValueError: bad input (context=job failed jid=abc)"
    assert record.exc_info is None


def test_default_handler_without_context_or_message(captured):
    config, log = captured
    config.handle_exception(KeyboardInterrupt())
    assert log.records[0].getMessage() == "KeyboardInterrupt"


@pytest.mark.parametrize(
    "error",
    [
        redis_py.exceptions.ConnectionError("refused"),
        redis_py.exceptions.ResponseError("WRONGTYPE"),
        PoolTimeoutError("no free connection"),
        RedisConnectionError("redis://localhost:1/0", OSError("refused")),
    ],
)
def test_default_handler_logs_redis_errors_as_warnings(captured, error):
    config, log = captured
    config.handle_exception(error)
    assert log.records[0].levelno == logging.WARNING


def test_default_handler_logs_the_traceback_with_wurk_debug(captured, monkeypatch):
    config, log = captured
    monkeypatch.setenv("WURK_DEBUG", "1")
    try:
        raise ValueError("deep")
    except ValueError as exc:
        config.handle_exception(exc, {"context": "x"})
    (record,) = log.records
    assert record.getMessage() == "ValueError: deep (context=x)"
    assert record.exc_info is not None
    assert "Traceback" in logging.Formatter().format(record)


def test_default_handler_logs_the_traceback_at_debug_level(captured):
    config, log = captured
    config.logger.setLevel(logging.DEBUG)
    try:
        raise ValueError("deep")
    except ValueError as exc:
        config.handle_exception(exc)
    assert log.records[0].exc_info is not None
    assert log.records[0].levelno == logging.INFO


def test_default_handler_writes_through_the_wurk_logger(monkeypatch):
    monkeypatch.delenv("WURK_DEBUG", raising=False)
    config = wurk.Config()
    logger = logging.getLogger("wurk")
    handler = ListHandler()
    logger.addHandler(handler)
    level = logger.level
    try:
        assert config.logger is logger
        logger.setLevel(logging.INFO)
        config.handle_exception(ValueError("seen by wurk"))
    finally:
        logger.removeHandler(handler)
        logger.setLevel(level)
    assert [record.getMessage() for record in handler.records] == ["ValueError: seen by wurk"]


# -- Redis options and pools ---------------------------------------------------------


def test_redis_url_falls_back_to_redis_url_then_localhost(monkeypatch):
    monkeypatch.delenv("REDIS_URL", raising=False)
    config = wurk.Config()
    assert config.redis["url"] == "redis://localhost:6379/0"
    monkeypatch.setenv("REDIS_URL", "redis://cache:6380/2")
    assert config.redis["url"] == "redis://cache:6380/2"
    config.redis = {"url": "redis://primary:6379/1"}
    assert config.redis["url"] == "redis://primary:6379/1"


def test_redis_assignment_merges_and_returns_copies():
    config = wurk.Config()
    config.redis = {"url": "redis://a:6379/0", "read_timeout": 5}
    config.redis = {"size": 15}
    assert config.redis == {"url": "redis://a:6379/0", "read_timeout": 5, "size": 15}
    config.redis["url"] = "changed"
    assert config.redis["url"] == "redis://a:6379/0"


def test_redis_assignment_resets_the_pools(config, redis_url):
    main, fetch, shared = config.redis_pool, config.default_capsule.fetch_redis_pool, config.shared_redis_pool("s", 2)
    custom = config.new_redis_pool(2)
    assert main is config.redis_pool  # cached until reset
    config.redis = {"read_timeout": 3}
    assert config.redis_pool is not main
    assert config.default_capsule.fetch_redis_pool is not fetch
    assert config.shared_redis_pool("s", 2) is not shared
    assert config.redis_pool.url == redis_url
    assert custom.ping()  # a dropped pool still reconnects on use


def test_pool_sizes_and_names(config):
    assert (config.redis_pool.name, config.redis_pool.size) == ("default-main", 10)
    fetch = config.default_capsule.fetch_redis_pool
    assert (fetch.name, fetch.size) == ("default-fetch", 6)  # a connection per thread, one for the claims
    web = wurk_web.redis_pool(config)  # wurk-web's own pool, one of the shared ones
    assert (web.name, web.size) == ("web", 5)
    assert web.connection_pool.timeout == 1.0

    config.concurrency = 20
    config.reset_redis_pools()
    assert config.redis_pool.size == 25
    assert config.default_capsule.fetch_redis_pool.size == 21

    config.redis = {"size": 15}
    assert config.redis_pool.size == 15  # pins the main pool only
    assert config.default_capsule.fetch_redis_pool.size == 21

    capsule = config.capsule("critical", concurrency=2)
    assert (capsule.redis_pool.name, capsule.redis_pool.size) == ("critical-main", 15)
    assert (capsule.fetch_redis_pool.name, capsule.fetch_redis_pool.size) == ("critical-fetch", 3)


def test_web_pool_size(config):
    assert config["web_pool_size"] == 5
    config["web_pool_size"] = 8
    assert wurk_web.redis_pool(config).size == 8
    for bad in (0, -1, "5", 2.5):
        with pytest.raises(ConfigurationError, match="web_pool_size"):
            config["web_pool_size"] = bad


def test_a_shared_pool_is_built_once_per_name(config, redis):
    first = config.shared_redis_pool("reports", 3, read_timeout=2.0)
    assert (first.name, first.size) == ("reports", 3)
    assert config.shared_redis_pool("reports", 7) is first  # the first ask decides
    assert config.shared_redis_pool("other", 1) is not first
    first.execute(lambda conn: conn.set("shared", "yes"))
    assert redis.get("shared") == b"yes"
    config.reset_redis_pools()
    assert config.shared_redis_pool("reports", 1).size == 1  # rebuilt after a reset


def test_pools_talk_to_the_configured_server(config, redis):
    config.redis_pool.execute(lambda conn: conn.set("greeting", "hello"))
    assert redis.get("greeting") == b"hello"
    custom = config.new_redis_pool(3, "reports")
    assert (custom.name, custom.size) == ("reports", 3)
    assert custom.execute(lambda conn: conn.get("greeting")) == b"hello"
    assert config.new_redis_pool(1).name == "custom"


def test_reset_redis_pools_disconnects(config, redis):
    config.redis = {"client_name": "wurk-reset-test"}

    def connected():
        return [c for c in redis.client_list() if c["name"] == "wurk-reset-test"]

    pool = config.redis_pool
    pool.ping()
    config.new_redis_pool(1).ping()
    assert len(connected()) == 2
    config.reset_redis_pools()
    wait_for(lambda: not connected())
    assert config.redis_pool is not pool


def test_on_redis_error_handlers_are_called_by_the_pools(config, redis_url):
    config.redis = {"pool_timeout": 0.05}
    pool = config.new_redis_pool(1, "tiny")
    early = []
    record_early = early.append
    assert config.on_redis_error(record_early) is record_early
    later = []
    held = pool.connection_pool.get_connection()
    try:
        config.on_redis_error(later.append)  # registered after the pool was built
        with pytest.raises(PoolTimeoutError):
            pool.execute(lambda conn: conn.ping())
    finally:
        pool.connection_pool.release(held)
    summary = [(info["attempt"], info["retried"], info["pool"]) for info in early]
    assert summary == [(1, True, "tiny"), (2, False, "tiny")]
    assert later == early
    assert all(isinstance(info["error"], PoolTimeoutError) for info in early)


def test_on_redis_error_works_as_a_decorator_and_after_reassignment(config):
    config.redis = {"pool_timeout": 0.05}
    pool = config.new_redis_pool(1, "tiny")
    seen = []

    @config.on_redis_error
    def telemetry(info):
        seen.append(("decorated", info["retried"]))

    def broken(info):
        raise RuntimeError("telemetry down")

    config["redis_error_handlers"] = [broken, *config["redis_error_handlers"]]
    held = pool.connection_pool.get_connection()
    try:
        with pytest.raises(PoolTimeoutError):
            pool.execute(lambda conn: conn.ping())
    finally:
        pool.connection_pool.release(held)
    assert seen == [("decorated", True), ("decorated", False)]


# -- other named options -------------------------------------------------------------


def test_health_check_stores_its_options():
    config = wurk.Config()
    config.health_check(7433)
    assert config["health_check_options"] == {
        "port": 7433,
        "bind": "0.0.0.0",
        "ready_window": 30,
        "share": False,
        "retry": 5.0,
    }
    config.health_check(0, bind="127.0.0.1", ready_window=2.5, share=True, retry=0.5)
    assert config["health_check_options"] == {
        "port": 0,
        "bind": "127.0.0.1",
        "ready_window": 2.5,
        "share": True,
        "retry": 0.5,
    }
    config.health_check(65535)
    assert config.dig("health_check_options", "port") == 65535


@pytest.mark.parametrize("port", [-1, 65536, "7433", 7433.0, True, None])
def test_health_check_port_range(port):
    with pytest.raises(ConfigurationError, match="port"):
        wurk.Config().health_check(port)


@pytest.mark.parametrize("bind", ["", "   ", None])
def test_health_check_bind_must_not_be_empty(bind):
    with pytest.raises(ConfigurationError, match="bind"):
        wurk.Config().health_check(7433, bind=bind)


@pytest.mark.parametrize("window", [0, -5, "30", None, False])
def test_health_check_ready_window_must_be_positive(window):
    config = wurk.Config()
    with pytest.raises(ConfigurationError, match="ready_window"):
        config.health_check(7433, ready_window=window)
    assert "health_check_options" not in config


@pytest.mark.parametrize(
    ("option", "value"), [("share", 1), ("share", "yes"), ("retry", 0), ("retry", -1), ("retry", True)]
)
def test_health_check_share_and_retry_are_checked(option, value):
    config = wurk.Config()
    with pytest.raises(ConfigurationError, match=option):
        config.health_check(7433, **{option: value})
    assert "health_check_options" not in config


def test_fetch_poll_interval():
    config = wurk.Config()
    assert config.fetch_poll_interval == 2.0
    config.fetch_poll_interval = 0.5
    assert config.fetch_poll_interval == 0.5
    assert config["fetch_poll_interval"] == 0.5


@pytest.mark.parametrize("value", [0, -1, "1", True, None])
def test_fetch_poll_interval_must_be_positive(value):
    config = wurk.Config()
    with pytest.raises(ConfigurationError, match="fetch_poll_interval"):
        config.fetch_poll_interval = value
    with pytest.raises(ConfigurationError, match="fetch_poll_interval"):
        config["fetch_poll_interval"] = value
    assert config.fetch_poll_interval == 2.0


def test_super_fetch_and_reliable_scheduler():
    config = wurk.Config()
    config.super_fetch()
    assert "super_fetch_callback" not in config

    def recovered(job, pill):
        pass

    config.super_fetch(recovered)
    assert config["super_fetch_callback"] is recovered
    assert "scheduled_enq" not in config
    config.reliable_scheduler()
    assert config["scheduled_enq"] == "reliable"


def test_statsd_factory_is_called_once_and_failures_are_reported():
    config = wurk.Config()
    assert config.statsd is None
    config.statsd_increment("jobs.count")  # no client: nothing happens
    built = []

    class Broken:
        def increment(self, metric, tags=None):
            raise OSError("no route")

    config.dogstatsd = lambda: built.append(1) or Broken()
    reported = []
    config.error_handlers = [lambda exc, ctx, cfg: reported.append(ctx["context"])]
    config.statsd_increment("jobs.count")
    config.statsd_increment("jobs.count")
    assert built == [1]
    assert reported == ["statsd jobs.count", "statsd jobs.count"]


# -- service locator -------------------------------------------------------------------


def test_register_and_lookup():
    config = wurk.Config()
    service = object()
    config.register("audit", service)
    assert config.lookup("audit") is service
    assert config.lookup("missing") is None


def test_lookup_builds_a_default_once_with_the_config():
    config = wurk.Config()
    built = []

    class Tracker:
        def __init__(self, cfg):
            built.append(cfg)

    first = config.lookup("tracker", Tracker)
    assert isinstance(first, Tracker)
    assert config.lookup("tracker", Tracker) is first
    assert config.lookup("tracker") is first
    assert built == [config]


# -- configure_server / configure_client -------------------------------------------


def test_configure_client_runs_outside_server_mode(config):
    ran = []

    @wurk.configure_client
    def client_side(cfg):
        ran.append(("client", cfg))

    @wurk.configure_server
    def server_side(cfg):
        ran.append(("server", cfg))

    assert ran == [("client", config)]
    assert callable(client_side)
    assert callable(server_side)


def test_configure_server_runs_in_server_mode(config):
    assert enter_server_mode() is config
    assert config.server
    ran = []

    @wurk.configure_server
    def server_side(cfg):
        cfg.concurrency = 10
        ran.append("server")

    @wurk.configure_client
    def client_side(cfg):
        ran.append("client")

    assert ran == ["server"]
    assert config.concurrency == 10


def test_configure_blocks_accumulate_on_one_config(config):
    wurk.configure_client(lambda cfg: cfg.update({"timeout": 10}))
    wurk.configure_client(lambda cfg: cfg.update({"tag": "web"}))
    assert (config["timeout"], config["tag"]) == (10, "web")


def test_default_config_is_created_on_first_use_and_swappable(config):
    assert default_config() is config
    previous = wurk.set_default_config(None)
    try:
        created = default_config()
        assert isinstance(created, wurk.Config)
        assert created is not config
        assert default_config() is created
    finally:
        wurk.set_default_config(previous)
    assert default_config() is config


# -- a failed job's log line ------------------------------------------------------------


def failed_job(config, environment):
    config["environment"] = environment
    job = {"class": "app.jobs.HardJob", "jid": "9f8e7d6c5b4a39281706f5e4", "args": [1]}
    try:
        raise ValueError("card declined")
    except ValueError as exc:
        config.handle_exception(exc, {"context": "Job raised exception", "job": job})


def test_a_failed_job_is_a_warning_naming_the_job_with_its_traceback_in_development(captured):
    config, log = captured
    failed_job(config, "development")
    (record,) = log.records
    assert record.levelno == logging.WARNING
    assert record.getMessage() == "app.jobs.HardJob jid=9f8e7d6c5b4a39281706f5e4 failed: ValueError: card declined"
    assert record.exc_info is not None
    assert 'raise ValueError("card declined")' in logging.Formatter().format(record)


def test_a_failed_job_has_no_traceback_in_production(captured):
    config, log = captured
    failed_job(config, "production")
    (record,) = log.records
    assert record.levelno == logging.WARNING
    assert record.getMessage().endswith("failed: ValueError: card declined")
    assert record.exc_info is None


def test_without_an_environment_option_the_environment_variables_decide(captured, monkeypatch):
    config, log = captured
    monkeypatch.setenv("APP_ENV", "production")
    failed_job(config, None)
    monkeypatch.delenv("APP_ENV")
    monkeypatch.delenv("RAILS_ENV", raising=False)
    monkeypatch.delenv("RACK_ENV", raising=False)
    failed_job(config, None)  # nothing set: development
    assert [record.exc_info is not None for record in log.records] == [False, True]


def test_a_wrapped_job_is_named_by_the_class_it_wraps(captured):
    config, log = captured
    job = {"class": "Sidekiq::ActiveJob::Wrapper", "wrapped": "InvoiceJob", "jid": "ab" * 12}
    config.handle_exception(KeyError("id"), {"context": "Job raised exception", "job": job})
    assert log.records[0].getMessage() == f"InvoiceJob jid={'ab' * 12} failed: KeyError: 'id'"


# -- misspelt option names ------------------------------------------------------------------


def warnings_of(log):
    return [record.getMessage() for record in log.records if record.levelno == logging.WARNING]


def test_a_misspelt_option_is_warned_about_with_the_nearest_name(captured):
    config, log = captured
    config["concurency"] = 5
    config.update({"timeouts": 3, "queue": "critical"})
    assert warnings_of(log) == [
        "unknown option 'concurency'; did you mean 'concurrency'?",
        "unknown option 'timeouts'; did you mean 'timeout'?",
        "unknown option 'queue'; did you mean 'queues'?",
    ]
    assert config["concurency"] == 5  # warned, not refused: the key is stored as written
    config["concurency"] = 6
    assert len(warnings_of(log)) == 3  # once per key


def test_unknown_keys_unlike_any_option_pass_silently(captured):
    config, log = captured
    config.update({"pidfile": "tmp/w.pid", "schedule": {}, "my_middleware_rate": 3, "staging": {"concurrency": 2}})
    config["max_retries"] = 7
    config.setdefault("leader_ttl", 40)
    assert warnings_of(log) == []


class OwnsAnOption:
    @wurk.hookimpl
    def wurk_configure(self, config):
        config.setdefault("invoice_batch_size", 100)


def plugins_with(plugin):
    from wurk.plugins.manager import Plugins

    plugins = Plugins(entry_points=False)
    plugins.register(plugin, name="owns-an-option")
    return plugins


def test_a_plugins_options_count_as_known_once_it_has_loaded(captured):
    config, log = captured
    config.use_plugins(plugins_with(OwnsAnOption()))
    config["invoice_batch_size"] = 50
    config["invoice_batch_sise"] = 50
    assert warnings_of(log) == ["unknown option 'invoice_batch_sise'; did you mean 'invoice_batch_size'?"]


def test_keys_written_before_the_plugins_loaded_are_checked_at_freeze(captured):
    config, log = captured
    config["invoice_batch_sise"] = 50  # the plugin that owns the real name has not loaded yet
    assert warnings_of(log) == []
    config.use_plugins(plugins_with(OwnsAnOption()))
    config.freeze()
    assert warnings_of(log) == ["unknown option 'invoice_batch_sise'; did you mean 'invoice_batch_size'?"]


def test_a_yaml_file_goes_through_the_same_check(captured, tmp_path):
    from wurk.cli import boot

    config, log = captured
    path = tmp_path / "wurk.yml"
    path.write_text(":concurency: 3\n:timeout: 9\nproduction:\n  :concurrency: 20\n", encoding="utf-8")
    boot.apply_options(config, boot.load_config_file(path, "development"))
    assert warnings_of(log) == ["unknown option 'concurency'; did you mean 'concurrency'?"]
    assert config["timeout"] == 9


# -- queue names are not Redis keys -------------------------------------------------------


@pytest.mark.parametrize("entry", ["queue:mail", "queue:mail,2", ["queue:mail", 2]])
def test_a_queue_named_by_its_redis_key_is_refused(entry):
    with pytest.raises(ConfigurationError, match=r"'queue:mail'.*without the 'queue:' prefix \('mail'\)"):
        parse_queue(entry)
    config = wurk.Config()
    with pytest.raises(ConfigurationError, match="prefix"):
        config.queues = ["default", entry]
    assert config.queues == ["default"]


def test_a_yaml_queue_with_the_prefix_is_refused(tmp_path):
    from wurk.cli import boot

    path = tmp_path / "wurk.yml"
    path.write_text("queues:\n  - queue:mail\ncapsules:\n  serial:\n    queues: [queue:imports]\n", encoding="utf-8")
    with pytest.raises(ConfigurationError, match="'queue:mail'"):
        boot.apply_options(wurk.Config(), boot.load_config_file(path, "development"))

"""Middleware chains: the list API, per-job instances, capsule copies, and the
onion that ``invoke`` builds (plus one push through the real client)."""

from __future__ import annotations

import asyncio
import json
import time

import pytest

import wurk
from wurk.client.middleware import Chain, Entry, Middleware


class A:
    pass


class B:
    pass


class C:
    pass


class D:
    pass


def names(chain: Chain) -> list[str]:
    return [entry.klass.__name__ for entry in chain]


def chain_of(*classes: type) -> Chain:
    chain = Chain()
    for klass in classes:
        chain.add(klass)
    return chain


# -- the list API -----------------------------------------------------------------


def test_a_new_chain_is_empty():
    chain = Chain()
    assert chain.empty()
    assert len(chain) == 0
    assert chain.entries == []
    assert list(chain) == []


def test_add_appends_in_order():
    chain = chain_of(A, B, C)
    assert names(chain) == ["A", "B", "C"]
    assert not chain.empty()
    assert len(chain) == 3


def test_add_of_a_registered_class_moves_it_to_the_end_once():
    chain = chain_of(A, B, C)
    chain.add(A)
    assert names(chain) == ["B", "C", "A"]
    assert len(chain) == 3


def test_add_again_replaces_the_arguments():
    chain = Chain()
    chain.add(A, 1, key="old")
    chain.add(A, 2, key="new")
    assert [(entry.args, entry.kwargs) for entry in chain] == [((2,), {"key": "new"})]


def test_prepend_puts_a_class_first():
    chain = chain_of(A, B)
    chain.prepend(C)
    assert names(chain) == ["C", "A", "B"]


def test_prepend_moves_a_registered_class_to_the_front():
    chain = chain_of(A, B, C)
    chain.prepend(C)
    assert names(chain) == ["C", "A", "B"]


def test_insert_before_an_anchor():
    chain = chain_of(A, B, C)
    chain.insert_before(B, D)
    assert names(chain) == ["A", "D", "B", "C"]


def test_insert_after_an_anchor():
    chain = chain_of(A, B, C)
    chain.insert_after(B, D)
    assert names(chain) == ["A", "B", "D", "C"]


def test_insert_after_the_last_entry():
    chain = chain_of(A, B)
    chain.insert_after(B, C)
    assert names(chain) == ["A", "B", "C"]


def test_insert_before_moves_a_registered_class():
    chain = chain_of(A, B, C)
    chain.insert_before(A, C)
    assert names(chain) == ["C", "A", "B"]
    assert len(chain) == 3


def test_insert_after_moves_a_registered_class():
    chain = chain_of(A, B, C)
    chain.insert_after(B, A)
    assert names(chain) == ["B", "A", "C"]
    assert len(chain) == 3


def test_moving_keeps_the_registered_arguments_unless_new_ones_are_given():
    chain = Chain()
    chain.add(A, limit=5)
    chain.add(B)
    chain.insert_after(B, A)
    assert [(entry.klass, entry.kwargs) for entry in chain] == [(B, {}), (A, {"limit": 5})]
    chain.insert_before(B, A, limit=9)
    assert [(entry.klass, entry.kwargs) for entry in chain] == [(A, {"limit": 9}), (B, {})]


def test_insert_before_an_absent_anchor_falls_back_to_the_front():
    chain = chain_of(A, B)
    chain.insert_before(D, C)
    assert names(chain) == ["C", "A", "B"]


def test_insert_after_an_absent_anchor_falls_back_to_the_end():
    chain = chain_of(A, B)
    chain.insert_after(D, C)
    assert names(chain) == ["A", "B", "C"]


def test_insert_into_an_empty_chain():
    chain = Chain()
    chain.insert_before(A, B)
    chain.insert_after(A, C)
    assert names(chain) == ["B", "C"]


def test_remove():
    chain = chain_of(A, B, C)
    chain.remove(B)
    assert names(chain) == ["A", "C"]
    chain.remove(D)  # absent: nothing happens
    assert names(chain) == ["A", "C"]


def test_exists_and_in():
    chain = chain_of(A)
    assert chain.exists(A)
    assert A in chain
    assert not chain.exists(B)
    assert B not in chain


def test_membership_is_by_class_identity_not_subclass():
    class SubA(A):
        pass

    chain = chain_of(A)
    assert SubA not in chain


def test_clear_drops_everything():
    chain = chain_of(A, B)
    chain.clear()
    assert chain.empty()
    assert names(chain) == []


def test_entries_is_a_copy():
    chain = chain_of(A, B)
    entries = chain.entries
    entries.clear()
    assert names(chain) == ["A", "B"]
    assert all(isinstance(entry, Entry) for entry in chain.entries)


def test_iteration_survives_mutation_during_the_loop():
    chain = chain_of(A, B, C)
    seen = []
    for entry in chain:
        seen.append(entry.klass)
        chain.remove(entry.klass)
    assert seen == [A, B, C]
    assert chain.empty()


def test_an_empty_chain_is_still_truthy():
    # ``chain or fallback`` must keep a deliberately empty chain.
    assert Chain()
    assert Chain().empty()


def test_registering_an_instance_is_refused_at_once():
    chain = Chain()
    with pytest.raises(TypeError, match="class"):
        chain.add(A())
    with pytest.raises(TypeError):
        chain.prepend(A())
    with pytest.raises(TypeError):
        chain.insert_before(A, B())
    with pytest.raises(TypeError):
        chain.insert_after(A, B())
    assert chain.empty()


def test_repr_lists_the_class_names():
    assert repr(chain_of(A, B)) == "<Chain ['A', 'B']>"


# -- retrieve: fresh instances per job --------------------------------------------


class Parameterised:
    def __init__(self, threshold, *, unit="ms"):
        self.threshold = threshold
        self.unit = unit


class Plain:
    """Has no ``config`` attribute, so the chain leaves it alone."""

    __slots__ = ()


class WithConfig(Middleware):
    pass


def test_retrieve_builds_new_instances_every_time():
    chain = chain_of(A, B)
    first = chain.retrieve()
    second = chain.retrieve()
    assert [type(item) for item in first] == [A, B]
    assert all(x is not y for x, y in zip(first, second, strict=True))


def test_retrieve_passes_constructor_arguments():
    chain = Chain()
    chain.add(Parameterised, 500, unit="s")
    (instance,) = chain.retrieve()
    assert (instance.threshold, instance.unit) == (500, "s")


def test_arguments_are_not_shared_between_instances_and_the_caller():
    options = {"unit": "s"}
    chain = Chain()
    chain.add(Parameterised, 1, **options)
    options["unit"] = "changed"
    assert chain.retrieve()[0].unit == "s"


def test_retrieve_assigns_config_where_the_instance_has_the_attribute():
    config = wurk.Config()
    chain = Chain(config)
    chain.add(WithConfig)
    chain.add(Plain)
    with_config, plain = chain.retrieve()
    assert with_config.config is config
    assert not hasattr(plain, "config")


def test_retrieve_without_a_config_leaves_the_default():
    chain = chain_of(WithConfig)
    assert chain.retrieve()[0].config is None


def test_middleware_base_reaches_logger_and_pool_through_its_config():
    config = wurk.Config()
    chain = Chain(config)
    chain.add(WithConfig)
    instance = chain.retrieve()[0]
    assert instance.logger is config.logger
    assert instance.redis_pool is config.redis_pool
    assert WithConfig().logger.name == "wurk"  # unbound: the library logger


class Shared(Middleware):
    stateless = True

    def call(self, job_instance, job, queue, call_next):
        job.setdefault("seen", []).append(id(self))
        return call_next()


class PerJob(Shared):
    stateless = False


def test_a_stateless_class_is_built_once_per_chain_and_shared_by_every_job():
    config = wurk.Config()
    chain = Chain(config)
    chain.add(Shared)
    chain.add(PerJob)
    jobs = [{}, {}, {}]
    for job in jobs:
        chain.invoke(None, job, "default", final=lambda: None)
    shared = {job["seen"][0] for job in jobs}
    per_job = {job["seen"][1] for job in jobs}
    assert len(shared) == 1
    assert chain.retrieve()[0] is chain.retrieve()[0]
    assert chain.retrieve()[0].wurk_config is config
    # Fresh instances may reuse a freed address, so compare the objects
    # retrieve hands out rather than ids of collected ones.
    assert chain.retrieve()[1] is not chain.retrieve()[1]
    assert per_job  # each job ran the per-job class


def test_changing_the_entries_rebuilds_the_shared_instances():
    first, second = wurk.Config(), wurk.Config()
    chain = Chain(first)
    chain.add(Shared)
    before = chain.retrieve()[0]
    chain.add(A)
    assert chain.retrieve()[0] is not before
    assert names(chain) == ["Shared", "A"]
    copy = chain.copy_for(second)
    assert copy.retrieve()[0].config is second
    assert chain.retrieve()[0].config is first


def test_every_built_in_middleware_is_shared():
    from wurk.metrics import History, Statsd
    from wurk.server.builtin_middleware import Expiry, InterruptHandler

    assert all(klass.stateless for klass in (Expiry, InterruptHandler, History, Statsd))


# -- copies --------------------------------------------------------------------------


def test_copy_for_is_independent_and_bound_to_the_new_config():
    first, second = wurk.Config(), wurk.Config()
    original = Chain(first)
    original.add(WithConfig)
    copy = original.copy_for(second)
    assert copy.config is second
    assert copy.retrieve()[0].config is second
    copy.add(A)
    original.add(B)
    assert names(original) == ["WithConfig", "B"]
    assert names(copy) == ["WithConfig", "A"]


def test_capsule_chains_are_copied_lazily_and_then_independent():
    config = wurk.Config()
    capsule = config.capsule("critical")
    config.server_middleware.add(A)  # after the capsule exists, before first access
    config.client_middleware.add(C)
    builtins = names(config.server_middleware)[:-1]
    assert names(capsule.server_middleware) == [*builtins, "A"]
    assert names(capsule.client_middleware)[-1] == "C"
    assert capsule.server_middleware is capsule.server_middleware  # copied once
    config.server_middleware.add(B)
    capsule.server_middleware.add(D)
    assert names(config.server_middleware) == [*builtins, "A", "B"]
    assert names(capsule.server_middleware) == [*builtins, "A", "D"]


def test_capsule_chains_bind_middleware_to_the_capsule():
    config = wurk.Config()
    capsule = config.capsule("critical")
    config.server_middleware.add(WithConfig)
    assert capsule.server_middleware.config is capsule
    assert capsule.server_middleware.retrieve()[-1].config is capsule
    assert config.server_middleware.retrieve()[-1].config is config


def test_capsule_prepare_takes_the_copies_now():
    config = wurk.Config()
    capsule = config.capsule("critical")
    config.server_middleware.add(A)
    config.client_middleware.add(A)
    capsule.prepare()
    config.server_middleware.add(B)
    config.client_middleware.add(B)
    assert A in capsule.server_middleware
    assert A in capsule.client_middleware
    assert B not in capsule.server_middleware
    assert B not in capsule.client_middleware


def test_the_global_chains_hold_the_plugins_middleware_before_user_code():
    from wurk.server.builtin_middleware import Expiry, InterruptHandler

    config = wurk.Config()
    config.server_middleware.add(A)
    chain = names(config.server_middleware)
    assert chain[0] == InterruptHandler.__name__  # outermost, so nothing swallows an interruption
    assert chain.index(Expiry.__name__) < chain.index("A")  # user middleware sits inside the built-ins


def test_a_capsule_copy_includes_the_plugins_middleware():
    from wurk.server.builtin_middleware import InterruptHandler

    config = wurk.Config()
    capsule = config.capsule("critical")
    capsule.prepare()  # the first thing to touch a chain
    assert InterruptHandler in capsule.server_middleware


# -- invoke ---------------------------------------------------------------------


calls: list[str] = []


class Recording:
    label = "?"

    def call(self, *args):
        *_, call_next = args
        calls.append(f"{self.label}>")
        result = call_next()
        calls.append(f"<{self.label}")
        return result


class Outer(Recording):
    label = "outer"


class Middle(Recording):
    label = "middle"


class Inner(Recording):
    label = "inner"


@pytest.fixture
def recorded():
    calls.clear()
    yield calls
    calls.clear()


def test_invoke_with_an_empty_chain_just_runs_final():
    assert Chain().invoke("x", final=lambda: 42) == 42


def test_entry_zero_is_outermost(recorded):
    chain = chain_of(Middle, Inner)
    chain.prepend(Outer)

    def final():
        recorded.append("perform")
        return "done"

    assert chain.invoke("job_instance", {}, "default", final=final) == "done"
    assert recorded == ["outer>", "middle>", "inner>", "perform", "<inner", "<middle", "<outer"]


def test_invoke_passes_the_arguments_and_a_callable_next():
    seen = []

    class Spy:
        def call(self, job_class, job, queue, redis_pool, call_next):
            seen.append((job_class, job, queue, redis_pool))
            return call_next()

    chain = chain_of(Spy)
    job = {"jid": "abc"}
    assert chain.invoke("app.Hard", job, "critical", "pool", final=lambda: job) is job
    assert seen == [("app.Hard", job, "critical", "pool")]


def test_mutations_of_the_job_are_seen_by_inner_middleware_and_final():
    class Stamp:
        def call(self, job_instance, job, queue, call_next):
            job["stamped"] = True
            return call_next()

    class Check:
        def call(self, job_instance, job, queue, call_next):
            assert job["stamped"]
            job["checked"] = True
            return call_next()

    job: dict = {}
    chain_of(Stamp, Check).invoke(None, job, "default", final=lambda: None)
    assert job == {"stamped": True, "checked": True}


def test_invoke_uses_fresh_instances_for_each_call():
    built = []

    class Counter:
        def __init__(self):
            self.count = 0
            built.append(self)

        def call(self, *args):
            self.count += 1
            return args[-1]()

    chain = chain_of(Counter)
    chain.invoke(None, {}, "q", final=lambda: None)
    chain.invoke(None, {}, "q", final=lambda: None)
    assert len(built) == 2
    assert built[0] is not built[1]
    assert [instance.count for instance in built] == [1, 1]


class Halt:
    def call(self, job_class, job, queue, redis_pool, call_next):
        return None


class HaltFalse:
    def call(self, job_class, job, queue, redis_pool, call_next):
        return False


@pytest.mark.parametrize("halting", [Halt, HaltFalse])
def test_a_falsy_client_middleware_return_halts_before_final(recorded, halting):
    chain = chain_of(Outer, halting, Inner)
    result = chain.invoke("cls", {}, "default", None, final=lambda: recorded.append("push") or {"pushed": 1})
    assert not result
    assert recorded == ["outer>", "<outer"]


class SkipPerform:
    def call(self, job_instance, job, queue, call_next):
        calls.append("skipped")


def test_server_middleware_not_calling_next_skips_perform(recorded):
    chain = chain_of(Outer, SkipPerform, Inner)
    chain.invoke(object(), {}, "default", final=lambda: recorded.append("perform"))
    assert recorded == ["outer>", "skipped", "<outer"]


def test_an_exception_propagates_through_the_outer_middleware(recorded):
    class Boom:
        def call(self, *args):
            raise RuntimeError("boom")

    class Catch:
        def call(self, *args):
            try:
                return args[-1]()
            except RuntimeError as exc:
                recorded.append(f"caught {exc}")
                raise

    with pytest.raises(RuntimeError, match="boom"):
        chain_of(Catch, Boom).invoke(None, {}, "q", final=lambda: None)
    assert recorded == ["caught boom"]


def test_the_default_base_classes_pass_through():
    client = Chain()
    client.add(wurk.ClientMiddleware)
    assert client.invoke("cls", {}, "q", None, final=lambda: "pushed") == "pushed"
    server = Chain()
    server.add(wurk.ServerMiddleware)
    assert server.invoke(object(), {}, "q", final=lambda: "performed") == "performed"


# -- end to end: a client middleware changes what lands in Redis ------------------


class Tagged(wurk.Job):
    def perform(self, value):
        pass


class RequestIdTagger(wurk.ClientMiddleware):
    def __init__(self, request_id):
        self.request_id = request_id

    def call(self, job_class, job, queue, redis_pool, call_next):
        assert job_class == f"{__name__}.Tagged"
        assert redis_pool is self.config.redis_pool
        job.setdefault("request_id", self.request_id)
        job["args"] = [arg * 2 for arg in job["args"]]
        return call_next()


class DropOdd(wurk.ClientMiddleware):
    def call(self, job_class, job, queue, redis_pool, call_next):
        if job["args"][0] % 2:
            return None
        return call_next()


def test_client_middleware_mutation_is_what_lands_in_redis(config, redis):
    config.client_middleware.add(RequestIdTagger, "req-42")
    jid = Tagged.perform_async(21)
    assert jid
    (raw,) = redis.lrange("queue:default", 0, -1)
    payload = json.loads(raw)
    assert payload["jid"] == jid
    assert payload["class"] == f"{__name__}.Tagged"
    assert payload["args"] == [42]
    assert payload["request_id"] == "req-42"


def test_a_halting_client_middleware_writes_nothing(config, redis):
    config.client_middleware.add(DropOdd)
    assert Tagged.perform_async(1) is None
    assert redis.llen("queue:default") == 0
    assert Tagged.perform_async(2)
    assert redis.llen("queue:default") == 1


def awaited_through(chain: Chain, job: dict) -> list[str]:
    """The coroutines an async job's ``perform`` is awaited through, outermost
    first, read while it waits."""

    async def walk() -> list[str]:
        gate = asyncio.Event()

        async def perform() -> str:
            await gate.wait()
            return "performed"

        task = asyncio.ensure_future(chain.invoke_async(None, job, "default", final=perform))
        await asyncio.sleep(0)
        names, coroutine = [], task.get_coro()
        while coroutine is not None and hasattr(coroutine, "cr_code"):
            names.append(coroutine.cr_code.co_qualname)
            coroutine = coroutine.cr_await
        gate.set()
        assert await task == "performed"
        return names

    return asyncio.run(walk())


def test_an_async_job_awaits_through_no_coroutine_of_a_middleware_with_nothing_to_do():
    """Each coroutine between a job's task and ``perform`` is entered and left
    again at every await of the job. The chain itself, ``Expiry`` for a job
    with no expiry and ``Statsd`` with no statsd client hand back the rest of
    the chain's awaitable instead of awaiting it; ``History`` hands back its
    tracker's."""
    config = wurk.Config()
    names = awaited_through(config.server_middleware, {"class": "app.Crawl", "jid": "j1", "args": []})
    assert names[0] == "InterruptHandler.call_async"
    assert "ExecutionTracker.track_async" in names
    assert names[-2:] == ["awaited_through.<locals>.walk.<locals>.perform", "Event.wait"]
    for idle in ("Chain.invoke_async", "Expiry.call_async", "Statsd.call_async", "History.call_async"):
        assert idle not in names


def test_an_expired_async_job_is_dropped_before_perform():
    config = wurk.Config()
    ran = []

    async def perform() -> str:
        ran.append(True)
        return "performed"

    job = {"class": "app.Crawl", "jid": "j2", "args": [], "expiry": time.time() - 60}
    assert asyncio.run(_awaited(config.server_middleware.invoke_async(None, job, "default", final=perform))) is None
    assert ran == []


async def _awaited(awaitable):
    return await awaitable

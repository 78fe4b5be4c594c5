"""wurk.contrib.sqlalchemy: a push inside a session's transaction reaches
Redis at the commit and never on a rollback; the jid is known at once."""

from __future__ import annotations

import asyncio
import gc
import json
import weakref

import pytest
from sqlalchemy import create_engine, text
from sqlalchemy.orm import Session, sessionmaker

import wurk
from wurk.contrib.sqlalchemy import transactional_push


class Ship(wurk.Job):
    def perform(self, order_id):
        pass


@pytest.fixture
def sessions(config, tmp_path):
    engine = create_engine(f"sqlite:///{tmp_path / 'shop.db'}")
    with engine.begin() as connection:
        connection.execute(text("CREATE TABLE orders (id INTEGER PRIMARY KEY)"))
    factory = sessionmaker(engine)
    transactional_push(factory, config)
    yield factory
    engine.dispose()


def queued(redis) -> list[str]:
    return [json.loads(payload)["jid"] for payload in reversed(redis.lrange("queue:default", 0, -1))]


def test_a_push_waits_for_the_commit_and_its_jid_is_known_at_once(sessions, redis):
    with sessions.begin() as session:
        session.execute(text("INSERT INTO orders (id) VALUES (1)"))
        jid = Ship.perform_async(1)
        assert len(jid) == 24
        assert queued(redis) == []
    assert queued(redis) == [jid]


def place_and_refuse(sessions) -> None:
    with sessions.begin() as session:
        session.execute(text("INSERT INTO orders (id) VALUES (1)"))
        Ship.perform_async(1)
        raise RuntimeError("refused")


def test_a_rollback_drops_the_push(sessions, redis):
    with pytest.raises(RuntimeError, match="refused"):
        place_and_refuse(sessions)
    with sessions() as session:
        session.execute(text("SELECT 1"))
        session.rollback()
    after = Ship.perform_async(2)  # no transaction open: at once
    assert queued(redis) == [after]


def test_a_session_closed_without_a_commit_drops_the_push(sessions, redis):
    session = sessions()
    session.execute(text("INSERT INTO orders (id) VALUES (1)"))
    Ship.perform_async(1)
    session.close()
    with sessions.begin() as again:
        jid = Ship.perform_async(2)
        again.execute(text("INSERT INTO orders (id) VALUES (2)"))
    assert queued(redis) == [jid]


def test_a_savepoints_rollback_drops_only_the_pushes_made_inside_it(sessions, redis):
    with sessions.begin() as session:
        first = Ship.perform_async(1)
        savepoint = session.begin_nested()
        Ship.perform_async(2)
        savepoint.rollback()
        with session.begin_nested():
            third = Ship.perform_async(3)  # released, then committed with the rest
        assert queued(redis) == []
    assert queued(redis) == [first, third]


def test_the_innermost_open_session_takes_the_push(sessions, redis):
    outer = sessions()
    outer.execute(text("SELECT 1"))
    with sessions.begin() as inner:
        inner.execute(text("INSERT INTO orders (id) VALUES (1)"))
        jid = Ship.perform_async(1)
    assert queued(redis) == [jid]  # the inner session committed it
    waiting = Ship.perform_async(2)  # the outer one is still open
    assert queued(redis) == [jid]
    outer.commit()
    assert queued(redis) == [jid, waiting]
    outer.close()


def test_sessions_of_another_factory_do_not_hold_pushes(sessions, redis, tmp_path):
    other = Session(create_engine(f"sqlite:///{tmp_path / 'other.db'}"))
    other.execute(text("SELECT 1"))
    jid = Ship.perform_async(1)
    assert queued(redis) == [jid]
    other.rollback()
    assert queued(redis) == [jid]
    other.close()


def test_an_async_session_holds_its_pushes_to_its_commit(config, redis, tmp_path):
    from sqlalchemy.ext.asyncio import async_sessionmaker, create_async_engine

    class ShopSession(Session):
        """Its own class: the listeners go on the synchronous session class."""

    engine = create_async_engine(f"sqlite+aiosqlite:///{tmp_path / 'shop.db'}")
    factory = async_sessionmaker(engine, sync_session_class=ShopSession)
    transactional_push(factory, config)
    other = Session(create_engine(f"sqlite:///{tmp_path / 'other.db'}"))
    other.execute(text("SELECT 1"))  # a plain session's transaction, open throughout

    async def place() -> tuple[str, str]:
        async with factory() as session:
            async with session.begin():
                await session.execute(text("CREATE TABLE orders (id INTEGER PRIMARY KEY)"))
                committed = Ship.perform_async(1)
                assert queued(redis) == []
            await session.begin()
            Ship.perform_async(2)
            await session.rollback()
            after = Ship.perform_async(3)  # no transaction open: at once
        await engine.dispose()
        return committed, after

    committed, after = asyncio.run(place())
    assert queued(redis) == [committed, after]
    other.close()


def test_a_session_dropped_without_being_closed_is_not_kept_alive(sessions, redis):
    session = sessions()
    session.execute(text("SELECT 1"))
    dropped = weakref.ref(session)
    del session
    gc.collect()
    assert dropped() is None
    jid = Ship.perform_async(1)  # no session left open: at once
    assert queued(redis) == [jid]

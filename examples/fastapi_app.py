"""A FastAPI application with Wurk: orders stored with SQLAlchemy, a receipt
job pushed after each order's commit, the dashboard at /wurk for admins, and
an embedded worker started by the application's lifespan, so that one
process serves requests and runs jobs.

::

    cd examples && uvicorn fastapi_app:app

Under gunicorn (``gunicorn -w 2 -k uvicorn.workers.UvicornWorker
fastapi_app:app``) the embedded worker is refused, in one line of the log:
run ``wurk -r fastapi_app.py`` beside it. ``WURK_DISABLED=1`` keeps any web
process from running jobs. ``DATABASE_URL`` (default ``sqlite:///orders.db``),
``REDIS_URL`` and ``ADMIN_TOKEN`` (the ``X-Admin-Token`` header that opens the
dashboard) come from the environment. See docs/asgi.md.
"""

from __future__ import annotations

import os

from fastapi import FastAPI, HTTPException, Request
from sqlalchemy import ForeignKey, String, create_engine
from sqlalchemy.exc import OperationalError
from sqlalchemy.orm import DeclarativeBase, Mapped, mapped_column, sessionmaker

import wurk
import wurk_web
from wurk.contrib.asgi import WurkLifespan, mount_dashboard
from wurk.contrib.sqlalchemy import transactional_push

engine = create_engine(os.environ.get("DATABASE_URL", "sqlite:///orders.db"))
Session = sessionmaker(engine)


class Base(DeclarativeBase):
    pass


class Order(Base):
    __tablename__ = "orders"
    id: Mapped[int] = mapped_column(primary_key=True)
    item: Mapped[str] = mapped_column(String(100))


class Receipt(Base):
    """What the receipt job saw of its order, and which process ran it."""

    __tablename__ = "receipts"
    id: Mapped[int] = mapped_column(primary_key=True)
    order_id: Mapped[int] = mapped_column(ForeignKey("orders.id"))
    item: Mapped[str | None] = mapped_column(String(100))
    pid: Mapped[int]


def create_tables() -> None:
    """Made by whichever process gets there first: a preforking server's
    workers import this module at the same moment (real applications run
    migrations before they start the server)."""
    try:
        Base.metadata.create_all(engine)
    except OperationalError as exc:
        if "already exists" not in str(exc):
            raise


create_tables()


class SendReceipt(wurk.Job):
    def perform(self, order_id: int) -> None:
        with Session.begin() as session:
            order = session.get(Order, order_id)
            session.add(Receipt(order_id=order_id, item=order.item if order else None, pid=os.getpid()))


wurk_lifespan = WurkLifespan({"queues": ["default"], "timeout": 10}, embedded=True)
app = FastAPI(lifespan=wurk_lifespan)
# A push made while an order's session is open waits for its commit.
transactional_push(Session)


def is_admin(request: Request) -> bool:
    token = os.environ.get("ADMIN_TOKEN")
    return bool(token) and request.headers.get("x-admin-token") == token


mount_dashboard(app, wurk_web.create_app(wurk_lifespan.config), prefix="/wurk", protect=is_admin)


@app.post("/orders")
def place_order(item: str, fail: bool = False) -> dict[str, object]:
    """Store an order and push its receipt; ``fail=true`` fails after the
    push, so the order is rolled back and the receipt never pushed."""
    with Session.begin() as session:
        order = Order(item=item)
        session.add(order)
        session.flush()  # the order's id
        order_id = order.id
        jid = SendReceipt.perform_async(order_id)
        if fail:
            raise HTTPException(409, f"order {order_id} refused after pushing {jid}")
    return {"order": order_id, "jid": jid}


@app.get("/pid")
def pid() -> dict[str, int]:
    return {"pid": os.getpid()}

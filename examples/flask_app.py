"""A Flask application with Wurk: orders stored with SQLAlchemy, a receipt
job pushed after each order's commit, the dashboard at /wurk for admins, and
an embedded worker when ``WURK_EMBEDDED=1``.

Serve it, and run its jobs in a worker of their own (the production shape)::

    cd examples && gunicorn -w 2 flask_app:app
    cd examples && wurk -r flask_app.py

Or, for development, in one process: ``WURK_EMBEDDED=1 flask --app flask_app run``.
``DATABASE_URL`` (default ``sqlite:///orders.db``), ``REDIS_URL`` and
``ADMIN_TOKEN`` (the ``X-Admin-Token`` header that opens the dashboard) come
from the environment. See docs/flask.md.
"""

from __future__ import annotations

import os

from flask import Flask, abort, request
from sqlalchemy import ForeignKey, String, create_engine
from sqlalchemy.exc import OperationalError
from sqlalchemy.orm import DeclarativeBase, Mapped, mapped_column, sessionmaker

import wurk
import wurk_web
from wurk.contrib.flask import Wurk
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


app = Flask(__name__)
app.config["WURK"] = {"queues": ["default"], "timeout": 10}
app.config["WURK_EMBEDDED"] = os.environ.get("WURK_EMBEDDED") == "1"
wurk_ext = Wurk(app)
# A push made while an order's session is open waits for its commit.
transactional_push(Session)


def is_admin() -> bool:
    token = os.environ.get("ADMIN_TOKEN")
    return bool(token) and request.headers.get("X-Admin-Token") == token


wurk_ext.mount_dashboard(app, wurk_web.wsgi_app(config=wurk_ext.config), prefix="/wurk", protect=is_admin)


@app.post("/orders")
def place_order() -> dict[str, object]:
    """Store an order and push its receipt; ``?fail=1`` fails after the push,
    so the order is rolled back and the receipt never pushed."""
    item = request.form.get("item", "")
    with Session.begin() as session:
        order = Order(item=item)
        session.add(order)
        session.flush()  # the order's id
        order_id = order.id
        jid = SendReceipt.perform_async(order_id)
        if request.args.get("fail"):
            abort(409, description=f"order {order_id} refused after pushing {jid}")
    return {"order": order_id, "jid": jid}


@app.get("/pid")
def pid() -> dict[str, int]:
    return {"pid": os.getpid()}

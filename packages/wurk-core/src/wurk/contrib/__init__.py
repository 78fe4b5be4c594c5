"""Wurk inside the web frameworks Python applications already run: Flask
(:mod:`wurk.contrib.flask`), ASGI applications such as FastAPI and Starlette
(:mod:`wurk.contrib.asgi`), SQLAlchemy's sessions for pushes that wait for the
commit (:mod:`wurk.contrib.sqlalchemy`), and what they share
(:mod:`wurk.contrib.hosting`). Each module imports its framework only when it
is itself imported, and each framework is an extra of ``wurk-core``
(``wurk-core[flask]``), so ``import wurk`` never imports one."""

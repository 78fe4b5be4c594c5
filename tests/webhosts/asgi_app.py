"""An ASGI app whose lifespan runs an embedded worker, with a job that naps
past the shutdown timeout: a shutdown must hand it back to its queue."""

from __future__ import annotations

import os
import time

from fastapi import FastAPI

import wurk
from wurk.contrib.asgi import WurkLifespan


class Nap(wurk.Job):
    def perform(self, seconds: float) -> None:
        self.config.redis_pool.execute(lambda conn: conn.rpush("naps", os.getpid()))
        time.sleep(seconds)


app = FastAPI(lifespan=WurkLifespan({"timeout": 2}, embedded=True))


@app.post("/nap")
def nap(seconds: float) -> dict[str, str | None]:
    return {"jid": Nap.perform_async(seconds)}


@app.get("/pid")
def pid() -> dict[str, int]:
    return {"pid": os.getpid()}

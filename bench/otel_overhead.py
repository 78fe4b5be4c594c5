"""What OpenTelemetry tracing costs a job when no SDK is configured.

Run it from the repository root with the project's virtualenv (no Redis and
no worker: it times the middleware chains in this process)::

    .venv/bin/python bench/otel_overhead.py                # 200,000 jobs, 5 rounds
    .venv/bin/python bench/otel_overhead.py --jobs 50000 --rounds 3

For each round it runs a client chain (as a push does) and a server chain
(as a worker does) around a no-op, once without tracing and once with the
middleware :func:`wurk.contrib.opentelemetry.instrument` installs, and
reports the difference per job, push and run together, between the fastest
rounds. Beside it, the same for a middleware that only passes the job on:
what any middleware costs a job, the chain's building of one instance per
job and its call. The client chain of a process with no other client
middleware is empty, so both figures include running a client chain at all. With ``--sdk``
it also times the same chains with an SDK tracer provider whose spans go
nowhere, for comparison (that cost is the SDK's span making).

Times are the process's CPU time, not the wall clock: on a shared machine a
wall clock counts the time the process waited for a core, which says more
about the neighbours than about the job. The figures are printed and written
to bench/results/otel-overhead-<date>.json; nothing asserts on them.
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import platform
import sys
import time
from pathlib import Path
from typing import Any

import wurk
import wurk.contrib.opentelemetry as otel
from wurk.server.builtin_middleware import InterruptHandler

HERE = Path(__file__).resolve().parent
RESULTS = HERE / "results"


class PassClient(wurk.ClientMiddleware):
    """A client middleware that only passes the job on."""


class PassServer(wurk.ServerMiddleware):
    """A server middleware that only passes the job on."""


def chains(variant: str, provider: Any = None) -> tuple[wurk.Chain, wurk.Chain]:
    """A push's client chain (empty, as in a process with no client
    middleware) and a run's server chain (the outermost built-in alone: a
    layer's cost does not depend on the layers around it), and on them
    nothing (``plain``), a middleware that only passes the job on (``pass``)
    or the tracing (``traced``)."""
    config = wurk.Config()
    client, server = wurk.Chain(config), wurk.Chain(config)
    server.add(InterruptHandler)
    if variant == "pass":
        client.add(PassClient)
        server.add(PassServer)
    elif variant == "traced":
        holder = wurk.Config()
        otel.instrument(holder, tracer_provider=provider)
        client = holder.client_middleware
        server.add(next(entry.klass for entry in holder.server_middleware if entry.klass.__name__ == "TracingServer"))
    return client, server


def one_round(client: wurk.Chain, server: wurk.Chain, jobs: int) -> float:
    """Seconds per job for a push's client chain and a run's server chain."""
    job: dict[str, Any] = {"class": "app.jobs.Invoice", "args": [7], "queue": "default", "jid": "a" * 24}

    def done() -> bool:
        return True

    started = time.process_time()
    for _ in range(jobs):
        client.invoke("app.jobs.Invoice", job, "default", None, final=done)
        server.invoke(None, job, "default", final=done)
    return (time.process_time() - started) / jobs


def measure(jobs: int, rounds: int, provider: Any = None) -> dict[str, float]:
    """The variants alternate round by round, so that a neighbour's load
    falls on all alike; each keeps its fastest round (the least disturbed)."""
    variants = {name: chains(name, provider) for name in ("plain", "pass", "traced")}
    for pair in variants.values():
        one_round(*pair, 1000)  # warm each, and let the tracing look for its provider once
    fastest = dict.fromkeys(variants, float("inf"))
    for _ in range(rounds):
        for name, pair in variants.items():
            fastest[name] = min(fastest[name], one_round(*pair, jobs))
    return {
        "plain_us": fastest["plain"] * 1e6,
        "traced_us": (fastest["traced"] - fastest["plain"]) * 1e6,
        "pass_through_us": (fastest["pass"] - fastest["plain"]) * 1e6,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--jobs", type=int, default=200_000)
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--sdk", action="store_true", help="also time a recording SDK provider")
    options = parser.parse_args()

    results: dict[str, Any] = {
        "python": platform.python_version(),
        "machine": platform.machine(),
        "jobs": options.jobs,
        "rounds": options.rounds,
    }
    no_sdk = measure(options.jobs, options.rounds)
    results["no_sdk"] = no_sdk
    print(
        f"no SDK: +{no_sdk['traced_us']:.2f} us per job for the tracing, against +{no_sdk['pass_through_us']:.2f} us "
        f"for a middleware on each chain that only passes the job on ({no_sdk['plain_us']:.2f} us without either)"
    )
    if options.sdk:
        from opentelemetry.sdk.trace import TracerProvider

        with_sdk = measure(max(options.jobs // 20, 1000), options.rounds, TracerProvider())
        results["sdk_no_exporter"] = with_sdk
        print(f"SDK, no exporter: +{with_sdk['traced_us']:.2f} us per job")
    RESULTS.mkdir(exist_ok=True)
    out = RESULTS / f"otel-overhead-{dt.date.today().isoformat()}.json"
    out.write_text(json.dumps(results, indent=2) + "\n", encoding="utf-8")
    print(f"written to {out.relative_to(HERE.parent)}", file=sys.stderr)


if __name__ == "__main__":
    main()

"""A processor: one thread that fetches a job, runs it, and acknowledges it.

Each job goes through the dispatch onion, outermost first: the job logger,
the global retry guard, stats, the profiler (for a job pushed with
``profile``, see :mod:`wurk.server.profiler`), the reloader, instantiation, the local retry
guard, the server middleware chain, and ``perform``. The one acknowledgement
decision is made here: a job is acknowledged when it succeeded or when the
retry layer booked its failure (:class:`~wurk.server.retry.Handled`); on a shutdown
or an error the retry layer could not book, it stays in the private list.

A shutdown past its deadline interrupts the thread (``Shutdown``, raised
asynchronously: see :mod:`wurk.server.interrupts`), but never inside a critical
section. From the moment the retry layer, a middleware's
:class:`~wurk.server.retry.Retrier` or the ``Interrupted`` handler starts booking
the job's fate until the processor has acknowledged it, and around every
acknowledgement, the interrupt waits and is raised where the section ends. So
a job the shutdown finds mid-booking ends booked and acknowledged, and one it
finds anywhere else ends back in its queue: never both, never neither.

The processor also tells the plugins the outcomes nobody else tells (see
:mod:`wurk.plugins.outcomes`): ``succeeded``, and ``interrupted`` for a job given
back; the retry layer, the Expiry middleware and the :class:`~wurk.server.retry.Retrier`
tell their own, and then the processor stays quiet.
"""

from __future__ import annotations

import inspect
import logging
import threading
import time
from typing import TYPE_CHECKING, Any

from redis.exceptions import RedisError

from wurk import current
from wurk.client import fields
from wurk.current import current_job, current_jobstr, current_private, current_stopping
from wurk.errors import Interrupted, RedisConnectionError, Shutdown
from wurk.plugins import outcomes
from wurk.server.interrupts import Shield, current_shield
from wurk.server.logger import LogContext, fast_info, tid
from wurk.server.profiler import profile_job
from wurk.server.retry import Handled, Skip

if TYPE_CHECKING:
    from wurk.server.fetch import UnitOfWork
    from wurk.server.manager import Manager

FETCH_ERROR_PAUSE = 1.0

#: A job class name not looked up yet.
UNSEEN: Any = object()


class ProcessStats:
    """Counts since the last heartbeat; the heartbeat swaps them out.

    ``rescheduled`` counts the runs that ended by putting their job back to
    run later (a rate limiter's reschedule): not finished, so not
    ``processed``, which keeps Sidekiq's meaning of a run that ended."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self.processed = 0
        self.failed = 0
        self.expired = 0
        self.rescheduled = 0

    def count(self, *, failed: bool = False) -> None:
        with self._lock:
            self.processed += 1
            if failed:
                self.failed += 1

    def count_expired(self) -> None:
        with self._lock:
            self.expired += 1

    def count_rescheduled(self) -> None:
        with self._lock:
            self.rescheduled += 1

    def swap(self) -> tuple[int, int, int, int]:
        """``(processed, failed, expired, rescheduled)``, each set back to 0."""
        with self._lock:
            counts = (self.processed, self.failed, self.expired, self.rescheduled)
            self.processed = self.failed = self.expired = self.rescheduled = 0
        return counts

    def restore(self, processed: int, failed: int, expired: int, rescheduled: int = 0) -> None:
        with self._lock:
            self.processed += processed
            self.failed += failed
            self.expired += expired
            self.rescheduled += rescheduled


def parse_job(jobstr: str | bytes) -> dict[str, Any]:
    """The payload as a job, or a :class:`~wurk.client.fields.UnreadableJobError`
    (a ``ValueError``) naming what is wrong with it: a payload no worker can
    run goes to the dead set at once, rather than through the retry layer,
    which could not book it (see :func:`wurk.client.fields.read_job`)."""
    return fields.read_job(jobstr)


#: Errors that say Redis could not be reached or refused a write: a job whose
#: failure they kept from being booked is given back, to be booked later.
REDIS_TROUBLE = (RedisError, RedisConnectionError, OSError)


class Processor:
    def __init__(self, manager: Manager, index: int) -> None:
        self.manager = manager
        self.capsule = manager.capsule
        self.config = manager.capsule.config
        self.fetcher = manager.fetcher
        self.retrier = manager.retrier
        self.current: UnitOfWork | None = None
        self._done = False
        self._chain = self.capsule.server_middleware
        #: Each job class name seen, with its class when ``perform`` is
        #: ``async def`` (``None`` for a thread's job): one look-up a job.
        self._kinds = manager.async_classes
        self._skip_logging = bool(self.config.option("skip_default_job_logging"))
        self._logged = tuple(self.config.option("logged_job_attributes") or ())
        self._listening = self.retrier.listening
        self._given_back: UnitOfWork | None = None
        self.thread = threading.Thread(target=self.run, name=f"wurk-processor-{self.capsule.name}-{index}", daemon=True)
        self.shield = Shield(self.thread)

    def start(self) -> None:
        self.thread.start()

    def terminate(self) -> None:
        """Stop after the current job (quiet)."""
        self._done = True

    def stopping(self) -> bool:
        """Whether this thread has been told to stop (quiet or shutdown); the
        running job reads it through :func:`wurk.server.builtin_middleware.stopping`."""
        return self._done

    def interrupt(self) -> bool:
        """At shutdown, past the deadline: raise ``Shutdown`` in this thread,
        now or, inside a critical section, where it ends (then its job ends
        booked, and its booking told its outcome). Raised now, the job goes
        back to its queue: its outcome ``interrupted`` is told first, from the
        stopping thread, since the exception may land only after the process
        is gone (a job blocked in C). Whether it was raised now."""
        uow = self.current

        def tell() -> None:
            if uow is None or not self._listening:
                return
            self._given_back = uow
            try:
                job = parse_job(uow.job)
            except ValueError:
                return
            self.retrier.tell("interrupted", job, Shutdown(), queue=uow.queue)

        return self.shield.interrupt(before=tell)

    @property
    def alive(self) -> bool:
        return self.thread.is_alive()

    def run(self) -> None:
        # Once per thread, not per job: every job this thread runs sees the
        # same flag and configuration (an async perform's task runs in a copy
        # of this thread's context), so a job, its middleware and the hooks it fires
        # reach this worker's Redis, never the process default's.
        current_stopping.set(self.stopping)
        current.mark(self.config, self.capsule)
        current_shield.set(self.shield)
        try:
            while not self._done:
                self.process_one()
        except Shutdown:
            pass
        except BaseException as exc:
            self.config.handle_exception(exc, {"context": "processor"})
            self.manager.processor_died(self, exc)

    def process_one(self) -> None:
        try:
            uow = self.fetcher.retrieve_work()
        except (RedisError, RedisConnectionError) as exc:
            self.config.handle_exception(exc, {"context": "fetch"})
            time.sleep(FETCH_ERROR_PAUSE)
            return
        if uow is None:
            return
        if self._done:  # quieted while this fetch was blocked: give the job back
            with self.shield.critical():
                self.fetcher.requeue([uow])
            return
        self.current = uow
        try:
            self.process(uow)
        finally:
            self.current = None
            self.shield.release()  # a booking's section ends: a deferred interrupt lands here

    # -- one job --------------------------------------------------------------------

    def process(self, uow: UnitOfWork) -> None:
        jobstr = uow.job
        try:
            job = parse_job(jobstr)
        except fields.UnreadableJobError as exc:
            self._kill_unreadable(uow, exc)
            return
        # It parsed, so it was UTF-8 and came back from the fetch as text.
        jobstr = jobstr if isinstance(jobstr, str) else jobstr.decode()
        async_class = self._kinds.get(job["class"], UNSEEN)
        if async_class is UNSEEN:
            async_class = self.manager.async_class(job["class"])
        if async_class is not None:
            if not self.manager.asyncs.start(self, uow, job, jobstr, async_class):
                self.shield.guard(lambda: self.fetcher.requeue([uow]))  # quieted while waiting for room
            return
        context = self._begin(uow, job, jobstr)
        ack = False
        with LogContext(context):
            started = time.monotonic()
            if not self._skip_logging:
                self._log("start")
            try:
                try:
                    self.retrier.run_global(job, uow.queue, lambda: self._stats(job, jobstr, uow.queue))
                except BaseException as exc:
                    ack = self._ended(uow, job, jobstr, started, exc)
                else:
                    ack = True
                    self._succeeded(uow, job, started)
            finally:
                if ack:
                    self.shield.guard(uow.acknowledge)

    async def process_async(self, uow: UnitOfWork, job: dict[str, Any], jobstr: str, job_class: type, key: str) -> None:
        """:meth:`process` for a job whose ``perform`` is ``async def``, run as
        a task on the event loop (see :mod:`wurk.server.asyncjobs`). A shutdown
        arrives as the task's cancellation, and nothing from the booking to
        the acknowledgement awaits, so there is no shield to hold."""
        context = self._begin(uow, job, jobstr)
        current_shield.set(None)
        ack = False
        with LogContext(context):
            started = time.monotonic()
            if not self._skip_logging:
                self._log("start")
            try:
                try:
                    await self.retrier.run_global_async(
                        job, uow.queue, lambda: self._stats_async(job, jobstr, uow.queue, job_class, key)
                    )
                except BaseException as exc:
                    ack = self._ended(uow, job, jobstr, started, exc)
                else:
                    ack = True
                    self._succeeded(uow, job, started)
            finally:
                if ack:
                    uow.acknowledge()

    def _begin(self, uow: UnitOfWork, job: dict[str, Any], jobstr: str) -> dict[str, Any]:
        """The job's context variables set; its log context returned."""
        current_jobstr.set(jobstr)
        current_private.set(uow.private)
        current_job.set(job)
        context = {"jid": job.get("jid"), "class": job.get("class")}
        if self._logged:
            context.update({key: job.get(key) for key in self._logged})
        if self._listening:
            outcomes.begin(job.get("jid"))
        return context

    def _succeeded(self, uow: UnitOfWork, job: dict[str, Any], started: float) -> None:
        self._log_end("done", started)
        if self._listening and not outcomes.told() and self._given_back is not uow:
            self.retrier.tell("succeeded", job, queue=uow.queue)

    def _ended(self, uow: UnitOfWork, job: dict[str, Any], jobstr: str, started: float, exc: BaseException) -> bool:
        """The job left the retry layer with ``exc``: log and tell what that
        means, and whether the job is to be acknowledged."""
        if isinstance(exc, Skip):
            self._log_end(exc.log_as, started)
            # InterruptHandler gave the job back to its queue; its Skip
            # keeps the Interrupted as context (``from None`` only hides it).
            if self._listening and not outcomes.told() and isinstance(exc.__context__, Interrupted):
                self.retrier.tell("interrupted", job, exc.__context__, queue=uow.queue)
            return True
        if isinstance(exc, Handled):
            self._log_end("fail", started)
            self.config.handle_exception(exc.__cause__ or exc, {"context": "Job raised exception", "job": job})
            return True
        if isinstance(exc, Shutdown):
            self._log_end("interrupted", started)
            if self._listening and self._given_back is not uow:
                self.retrier.tell("interrupted", job, exc, queue=uow.queue)
            return False
        # Past the retry layer. Redis went away while booking the failure:
        # the job stays in the private list, and the next fetch gives it back
        # to its queue. Anything else, before the job finished, is a payload
        # the retry layer cannot book: given back, it would fail the same way
        # at once, forever, so it goes to the dead set.
        self.config.handle_exception(exc, {"context": "Internal exception!", "job": job, "jobstr": jobstr})
        if isinstance(exc, Exception) and not isinstance(exc, REDIS_TROUBLE):
            return self._kill_unbookable(uow, job, exc)
        self._abandon(uow)
        return False

    def _kill_unreadable(self, uow: UnitOfWork, exc: fields.UnreadableJobError) -> None:
        """A payload no worker can run goes to the dead set (see
        :meth:`~wurk.server.retry.JobRetry.kill_unreadable`) and is acknowledged."""
        self.config.handle_exception(exc, {"context": "Invalid JSON for job", "jobstr": uow.job})
        try:
            self.retrier.kill_unreadable(uow.job, exc)
        except Exception as kill_exc:
            self.config.handle_exception(kill_exc, {"context": "Invalid JSON for job", "jobstr": uow.job})
            self._abandon(uow)
            return
        with self.shield.critical():
            uow.acknowledge()

    def _kill_unbookable(self, uow: UnitOfWork, job: dict[str, Any], exc: Exception) -> bool:
        """The payload whose failure could not be booked, to the dead set as
        it was fetched; whether that worked (then it is acknowledged)."""
        try:
            self.retrier.kill_raw(uow.job)
        except Exception as kill_exc:
            self.config.handle_exception(kill_exc, {"context": "Internal exception!", "jobstr": uow.job})
            self._abandon(uow)
            return False
        self.config.logger.error(
            "%s jid=%s: its failure could not be booked (%r), so it was moved to the dead set as fetched",
            job.get("class"),
            job.get("jid"),
            exc,
        )
        return True

    def _abandon(self, uow: UnitOfWork) -> None:
        """A job neither finished nor booked stays in the private list; the
        fetcher gives it back to its queue on its next claim."""
        self.fetcher.abandon(uow)

    def _log_end(self, word: str, started: float) -> None:
        if not self._skip_logging:
            self._log("%s: %.3f sec", word, time.monotonic() - started)

    def _log(self, message: str, *args: Any) -> None:
        """The job logger's lines, the hottest logging in a worker: straight to
        Wurk's handler when nothing else would see them, else without the
        caller lookup ``Logger.info`` does."""
        logger = self.config.logger
        if fast_info(logger, message % args if args else message):
            return
        if logger.isEnabledFor(logging.INFO):
            logger.handle(logger.makeRecord(logger.name, logging.INFO, __file__, 0, message, args, None))

    def _stats(self, job: dict[str, Any], jobstr: str, queue: str) -> Any:
        work = self.manager.work_state
        me = tid()
        work[me] = {"queue": queue, "payload": jobstr, "run_at": int(time.time())}
        failed = rescheduled = False
        started = time.monotonic()
        try:
            if job.get("profile"):
                return profile_job(self.config, job, lambda: self._reload_and_run(job, queue))
            return self.config["reloader"](lambda: self._instantiate_and_run(job, queue))
        except Skip as skip:
            rescheduled = skip.rescheduled
            raise
        except Shutdown:
            raise
        except BaseException:
            failed = True
            raise
        finally:
            work.pop(me, None)
            if rescheduled:
                self.manager.stats.count_rescheduled()
            else:
                self.manager.stats.count(failed=failed)
            self.manager.job_finished(time.monotonic() - started)

    def _reload_and_run(self, job: dict[str, Any], queue: str) -> Any:
        return self.config["reloader"](lambda: self._instantiate_and_run(job, queue))

    def _instantiate_and_run(self, job: dict[str, Any], queue: str) -> Any:
        job_class = self.manager.resolve(job["class"])
        instance = job_class()
        instance.jid = job.get("jid")
        return self.retrier.run_local(
            job_class,
            job,
            queue,
            lambda: self._chain.invoke(instance, job, queue, final=lambda: self._execute(instance, job["args"])),
        )

    async def _stats_async(self, job: dict[str, Any], jobstr: str, queue: str, job_class: type, key: str) -> Any:
        work = self.manager.work_state
        work[key] = {"queue": queue, "payload": jobstr, "run_at": int(time.time())}
        failed = rescheduled = False
        try:
            instance = job_class()
            instance.jid = job.get("jid")
            return await self.retrier.run_local_async(
                job_class,
                job,
                queue,
                lambda: self._chain.invoke_async(instance, job, queue, final=lambda: instance.perform(*job["args"])),
            )
        except Skip as skip:
            rescheduled = skip.rescheduled
            raise
        except Shutdown:
            raise
        except BaseException:
            failed = True
            raise
        finally:
            work.pop(key, None)
            if rescheduled:
                self.manager.stats.count_rescheduled()
            else:
                self.manager.stats.count(failed=failed)

    def _execute(self, instance: Any, args: list[Any]) -> Any:
        result = instance.perform(*args)
        if result is not None and inspect.isawaitable(result):
            return self.manager.loop.run(result)
        return result

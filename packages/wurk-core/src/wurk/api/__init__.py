"""The Data API: read and change what Wurk keeps in Redis from your own code.

A shell, an admin view, a health check or a maintenance script uses these
classes to look at queues, scheduled jobs, retries, dead jobs, processes and
counters and stored job profiles, and to act on them (retry, kill, delete, pause). Workers never use
this API; it reads and writes the same keys they do, in Sidekiq's layout, so
it works on jobs written by Ruby Sidekiq as well.

Every class takes an optional ``config=`` (the process default otherwise)
and ``pool=`` (another Redis, say a second shard).
"""

from wurk.api.dead import DeadSet
from wurk.api.deploy import Deploy
from wurk.api.entry import SortedEntry
from wurk.api.iterable import IterableJobQuery
from wurk.api.paging import page_by_score
from wurk.api.processes import Process, ProcessSet, Work, WorkSet
from wurk.api.profiles import ProfileRecord, ProfileSet
from wurk.api.queue import Queue
from wurk.api.record import IterableState, JobRecord
from wurk.api.search import Search
from wurk.api.sorted import JobSet, RetrySet, ScheduledSet, SortedSet
from wurk.api.stats import History, QueueSummary, Stats

__all__ = [
    "DeadSet",
    "Deploy",
    "History",
    "IterableJobQuery",
    "IterableState",
    "JobRecord",
    "JobSet",
    "Process",
    "ProcessSet",
    "ProfileRecord",
    "ProfileSet",
    "Queue",
    "QueueSummary",
    "RetrySet",
    "ScheduledSet",
    "Search",
    "SortedEntry",
    "SortedSet",
    "Stats",
    "Work",
    "WorkSet",
    "page_by_score",
]

"""The server side: one worker process, from boot to its last acknowledgement.

The launcher starts a manager per capsule; each manager's processors take
claimed jobs from reliable fetch (:mod:`wurk.server.fetch`), run them through
the server middleware, and acknowledge, retry or bury them. Beside them run
the heartbeat, the scheduler, the reaper, leader election and the health
check. ``docs/architecture.md`` walks a job through these modules in order.
"""

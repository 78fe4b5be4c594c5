"""Redis: connections, Lua scripts, key names, write fences and private servers.

The bottom layer: modules here know Redis and the wire layout Sidekiq defined,
and nothing of jobs, workers or plugins beyond the configuration that names a
server.
"""

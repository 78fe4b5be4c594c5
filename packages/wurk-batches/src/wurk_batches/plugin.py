"""The wurk-batches plugin.

Batches attach to core through the client and server middleware chains and
Lua scripts of their own; those registrations are added here as the feature
is built. The plugin is already discovered, listed and can be switched off
(``WURK_DISABLE_PLUGINS=batches``).
"""

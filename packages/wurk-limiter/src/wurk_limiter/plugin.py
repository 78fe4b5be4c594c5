"""The wurk-limiter plugin.

Rate limiters attach to core through a server middleware (which turns an
over-limit error into a reschedule) and Lua scripts of their own; those
registrations are added here as the feature is built. The plugin is already
discovered, listed and can be switched off (``WURK_DISABLE_PLUGINS=limiter``).
"""

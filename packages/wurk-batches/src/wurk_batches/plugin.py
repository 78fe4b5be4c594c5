"""The wurk-batches plugin.

Batches attach to core through the client and server middleware chains and
Lua scripts of their own; those registrations are added here as the feature
is built. The plugin is already discovered, listed and can be switched off
(``WURK_DISABLE_PLUGINS=batches``).
"""

#: The plugin API this plugin was built for; core refuses to load it if it
#: provides another major, or an older minor (see ``wurk.PLUGIN_API``).
WURK_PLUGIN_API = (1, 0)

"""Configuration: what one Wurk process (or embedded instance) is set up to do.

The :class:`~wurk.config.configuration.Config` object, the settings and job
options each plugin owns, the capsules, the environment variables read, and the
process-wide default configuration behind ``wurk.configure_server``, and
what a forked child resets of each live configuration (:mod:`wurk.config.forking`).

Nothing here runs jobs or talks to the worker's runtime; Redis pools are built
from a configuration through :mod:`wurk.redis`.
"""

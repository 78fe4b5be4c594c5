"""Plugins: how features join the core, and what they are handed.

Discovery and switching off (:mod:`~wurk.plugins.manager`), the hooks a
plugin may implement (:mod:`~wurk.plugins.hookspecs`), the core's own plugin
(:mod:`~wurk.plugins.builtins`), and the objects plugins receive or publish:
lifecycle events, named services, background components, job outcomes and the
dashboard's registry.
"""

"""Plugins: how features join the core, and what they are handed.

Discovery and switching off (:mod:`~wurk.plugins.manager`), the hooks a
plugin may implement (:mod:`~wurk.plugins.hookspecs`), and the objects plugins
receive or publish: lifecycle events, named services, background components,
job outcomes and the dashboard's registry. Core's own plugin,
:mod:`wurk.builtins`, sits above the server and metrics it wires, and is
handed down to the manager rather than imported by it.
"""

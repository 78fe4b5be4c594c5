"""Optional integrations with the libraries and frameworks around Wurk.

Each module here imports its library lazily and needs an extra of
``wurk-core`` (``wurk-core[opentelemetry]``); importing :mod:`wurk` imports
none of them.
"""

"""wurk-audit: an example Wurk plugin (see docs/plugins.md)."""

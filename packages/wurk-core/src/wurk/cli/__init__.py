"""The ``wurk`` command line: starting a worker, the ops subcommands and the demo."""

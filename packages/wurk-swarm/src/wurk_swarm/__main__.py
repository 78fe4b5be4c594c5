"""``python -m wurk_swarm``: the ``wurkswarm`` command, for environments without its script."""

from wurk_swarm.cli import main

main()

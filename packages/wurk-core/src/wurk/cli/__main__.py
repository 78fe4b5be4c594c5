"""``python -m wurk.cli``: the ``wurk`` command."""

from wurk.cli.main import main

main()

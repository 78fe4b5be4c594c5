"""The wurk-swarm plugin: ``wurkswarm``, the forking supervisor for multi-core parallelism.

One parent loads the application and forks a worker per topology assignment
(:mod:`wurk_swarm.topology`), supervises them (:mod:`wurk_swarm.supervisor`),
replaces them one slot at a time on ``USR1`` or a memory breach
(:mod:`wurk_swarm.restart`, :mod:`wurk_swarm.memory`). The command line is
:mod:`wurk_swarm.cli`.
"""

from importlib import metadata

from wurk_swarm.topology import Topology

try:
    # This distribution's own version, not core's: they are released apart.
    __version__ = metadata.version("wurk-swarm")
except metadata.PackageNotFoundError:  # imported from a source tree, not installed
    __version__ = "0+unknown"

__all__ = ["Topology", "__version__"]

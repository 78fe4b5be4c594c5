"""The core's folders are layers, and imports run one way: down.

From the bottom: the top-level leaves (``errors``, ``types``, ``current``,
``_version``), then ``redis``, ``config``, ``plugins``, ``client``, ``server``
(with ``server.fetch`` inside it), then the data-side folders ``metrics``,
``iterable``, ``api`` and ``testing`` side by side, then ``cli``, and last
``wurk/__init__``, which names the public API. A module may import from its
own layer and the ones below it; an import from a lower folder into a higher
one fails unless :data:`KNOWN_UPWARD` lists it with its reason. That list may
only shrink. The graph is the one :mod:`tests.foundation.test_import_cycles`
builds: imports inside functions count, ``if TYPE_CHECKING:`` blocks do not.
"""

from __future__ import annotations

from tests.foundation.test_import_cycles import imported, modules

#: The layers, bottom first; a module belongs to the longest prefix it has.
LAYERS: list[tuple[str, ...]] = [
    ("wurk.errors", "wurk.types", "wurk.current", "wurk._version"),
    ("wurk.redis",),
    ("wurk.config",),
    ("wurk.plugins",),
    ("wurk.client",),
    ("wurk.server",),
    ("wurk.metrics", "wurk.iterable", "wurk.api", "wurk.testing"),
    ("wurk.builtins",),  # core's own plugin: registers the server's parts and the metrics
    ("wurk.cli",),
    ("wurk.contrib",),  # the framework integrations: built on all of the above
    ("wurk",),
]

#: Imports from a lower layer into a higher one that stay, each with why.
KNOWN_UPWARD: dict[tuple[str, str], str] = {
    # The configuration object owns the parts it is made of.
    ("wurk.config.configuration", "wurk.client.middleware"): "Config builds its client and server chains",
    ("wurk.config.capsule", "wurk.client.middleware"): "a capsule builds its own server chain",
    ("wurk.config.configuration", "wurk.client.registry"): "Config builds the registry of job names",
    ("wurk.config.configuration", "wurk.client.outage"): "Config builds the outage log every thread reports to",
    ("wurk.config.accessors", "wurk.client.outage"): "config.outage_buffer() builds the buffer it switches on",
    ("wurk.config.configuration", "wurk.plugins.manager"): "Config loads its plugins when first asked",
    ("wurk.config.configuration", "wurk.plugins.events"): "Config builds the lifecycle events config.on registers",
    ("wurk.config.configuration", "wurk.plugins.services"): "Config builds the services plugins share",
    ("wurk.config.configuration", "wurk.metrics.statsd_client"): "Config builds the statsd client config.statsd sets",
    ("wurk.config.configuration", "wurk.server.logger"): "config.logger defaults to the documented wurk.server.logger",
    # The client's one reach into a feature above it.
    ("wurk.client.push", "wurk.iterable.state"): "Client.cancel writes the iterable job's cancel mark, kept there",
}


def layer_of(name: str) -> int:
    """The index in :data:`LAYERS` of the longest prefix ``name`` has."""
    best: tuple[int, int] | None = None
    for index, prefixes in enumerate(LAYERS):
        for prefix in prefixes:
            if (name == prefix or name.startswith(prefix + ".")) and (best is None or len(prefix) > best[1]):
                best = (index, len(prefix))
    if best is None:
        raise LookupError(name)
    return best[0]


def upward_edges() -> set[tuple[str, str]]:
    known = modules()
    core = {name for name in known if name == "wurk" or name.startswith("wurk.")}
    found: set[tuple[str, str]] = set()
    for name in core:
        for target in imported(name, known[name], known):
            if target in core and layer_of(target) > layer_of(name):
                found.add((name, target))
    return found


def test_every_core_module_has_a_layer():
    # A new top-level module must say where it sits (a leaf, or a new layer):
    # without that, ``wurk.x`` would silently count as the public API's layer.
    top = {name for name in modules() if name.count(".") == 1 and name.startswith("wurk.")}
    placed = {prefix for prefixes in LAYERS for prefix in prefixes}
    assert top - placed == set(), "a top-level module of wurk that no layer names"


def test_imports_run_down_the_layers_and_the_known_exceptions_only_shrink():
    found = upward_edges()
    new = {f"{low} -> {high}" for low, high in found - set(KNOWN_UPWARD)}
    gone = {f"{low} -> {high}" for low, high in set(KNOWN_UPWARD) - found}
    assert new == set(), (
        "an import from a lower folder into a higher one: move the shared piece down, or register it from above"
    )
    assert gone == set(), "a listed upward import is gone: remove it from KNOWN_UPWARD"


def test_the_core_imports_no_feature_package():
    # Except an integration (wurk.contrib), which mounts wurk-web's dashboard
    # in its framework when that distribution is installed.
    known = modules()
    reached = {
        target
        for name, path in known.items()
        if name == "wurk" or (name.startswith("wurk.") and not name.startswith("wurk.contrib."))
        for target in imported(name, path, known)
        if target.split(".")[0] != "wurk"
    }
    assert reached == set()


def test_the_layer_of_a_module_is_its_longest_prefix():
    assert layer_of("wurk.errors") == 0
    assert layer_of("wurk.server.fetch.ledger") == layer_of("wurk.server")
    assert layer_of("wurk.testing.harness") == layer_of("wurk.metrics") > layer_of("wurk.client")
    assert layer_of("wurk") == len(LAYERS) - 1

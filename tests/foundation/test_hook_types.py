"""Core's own hook implementations carry the hookspecs' annotations, so a
type checker reads them as the hooks they implement."""

from __future__ import annotations

import inspect

from wurk import builtins
from wurk.plugins import hookspecs


def _implementations() -> list[str]:
    return [
        name
        for name, value in vars(builtins).items()
        if name.startswith("wurk_") and callable(value) and hasattr(value, "wurk_impl")
    ]


def test_core_implements_hooks():
    assert "wurk_register_middleware" in _implementations()


def test_each_core_implementation_is_annotated_like_its_hookspec():
    for name in _implementations():
        spec = inspect.signature(getattr(hookspecs, name))
        impl = inspect.signature(getattr(builtins, name))
        for param, given in impl.parameters.items():
            assert param in spec.parameters, f"{name}: {param} is not an argument of the hook"
            assert given.annotation == spec.parameters[param].annotation, (
                f"{name}({param}): {given.annotation!r}, the hookspec says {spec.parameters[param].annotation!r}"
            )
        assert impl.return_annotation == spec.return_annotation, name

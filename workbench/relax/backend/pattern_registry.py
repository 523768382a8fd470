"""The registry of named fusion patterns (TVM's ``relax.backend.pattern_registry``).

Backends register their patterns at import time; ``get_patterns_with_prefix("cublas")`` gives
a backend's patterns with the ones registered *last* first (later registrations have higher
priority, which is the order ``FuseOpsByPattern`` wants), and ``get_pattern(name)`` the last
one registered under ``name``.
"""
from __future__ import annotations

from typing import Any, Iterable, Optional

from workbench.relax.transform.fusion_pattern import FusionPattern, as_fusion_pattern

_TABLE: list[FusionPattern] = []


def register_patterns(patterns: Iterable[Any]) -> None:
    """Register FusionPatterns or ``(name, pattern[, annotation_patterns[, check]])`` tuples;
    patterns later in the list have higher priority."""
    if isinstance(patterns, (FusionPattern, tuple)):
        raise TypeError("register_patterns takes a list of patterns; wrap the one pattern in "
                        "a list")
    entries = []
    for item in patterns:
        if not isinstance(item, (FusionPattern, tuple)):
            raise TypeError(f"Cannot register type {type(item)} as pattern")
        entries.append(as_fusion_pattern(item))
    _TABLE.extend(entries)


def get_patterns_with_prefix(prefix: str) -> list[FusionPattern]:
    """The registered patterns whose names start with ``prefix``, highest priority first."""
    if not isinstance(prefix, str):
        raise TypeError(f"get_patterns_with_prefix: prefix must be a str, got {prefix!r}")
    return [p for p in reversed(_TABLE) if p.name.startswith(prefix)]


def get_pattern(name: str) -> Optional[FusionPattern]:
    """The pattern registered (last) under ``name``, or None."""
    if not isinstance(name, str):
        raise TypeError(f"get_pattern: name must be a str, got {name!r}")
    return next((p for p in reversed(_TABLE) if p.name == name), None)


def remove_patterns(names: Iterable[str]) -> None:
    """Unregister every pattern with one of ``names`` (tests clean up with this)."""
    drop = set(names)
    _TABLE[:] = [p for p in _TABLE if p.name not in drop]


__all__ = ["register_patterns", "get_patterns_with_prefix", "get_pattern", "remove_patterns"]

"""What ``FuseOpsByPattern`` is given and what its check functions see (TVM's
``relax.transform.FusionPattern`` and ``PatternCheckContext``)."""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Callable, Mapping, Optional

from workbench.relax.dpl.pattern import DFPattern


@dataclass(frozen=True, eq=False)
class PatternCheckContext:
    """The input of a :class:`FusionPattern`'s ``check`` function, for one match.

    - ``matched_expr``: the call the whole pattern matched (the root of the fused region);
    - ``annotated_expr``: ``{name: expression}`` for each annotation pattern that took part;
    - ``matched_bindings``: ``{Var: value}`` of the bindings the match would fuse;
    - ``var_usages``: ``{Var: [Vars of the bindings that use it]}`` over the dataflow block;
    - ``value_to_bound_var``: ``{value: Var}`` for the bindings up to the matched one.
    """

    matched_expr: Any
    annotated_expr: Mapping[str, Any]
    matched_bindings: Mapping[Any, Any]
    var_usages: Mapping[Any, list]
    value_to_bound_var: Mapping[Any, Any]


@dataclass(frozen=True, eq=False)
class FusionPattern:
    """A named pattern for ``FuseOpsByPattern``: ``name`` (``"<backend>.<what>"``: the prefix
    names the codegen), the :class:`~workbench.relax.dpl.DFPattern`, the sub-patterns a check
    or a codegen wants by name (``annotation_patterns``), ``check(PatternCheckContext) -> bool``
    deciding whether a match is taken, and ``attrs_getter(annotated_expr) -> dict`` giving
    extra attributes for the fused function."""

    name: str
    pattern: DFPattern
    annotation_patterns: Mapping[str, DFPattern] = field(default_factory=dict)
    check: Optional[Callable[[PatternCheckContext], bool]] = None
    attrs_getter: Optional[Callable[[Mapping[str, Any]], Mapping[str, Any]]] = None

    def __post_init__(self) -> None:
        if not isinstance(self.name, str) or not self.name:
            raise TypeError(f"FusionPattern: name must be a non-empty str such as "
                            f"'cublas.matmul', got {self.name!r}")
        if not isinstance(self.pattern, DFPattern):
            raise TypeError(f"FusionPattern {self.name!r}: pattern must be a DFPattern, got "
                            f"{type(self.pattern).__name__}")
        annotations = {} if self.annotation_patterns is None else self.annotation_patterns
        if not isinstance(annotations, Mapping) or not all(
                isinstance(k, str) and isinstance(v, DFPattern) for k, v in annotations.items()):
            raise TypeError(f"FusionPattern {self.name!r}: annotation_patterns must map names "
                            f"to DFPatterns, got {annotations!r}")
        object.__setattr__(self, "annotation_patterns", dict(annotations))
        for what in ("check", "attrs_getter"):
            fn = getattr(self, what)
            if fn is not None and not callable(fn):
                raise TypeError(f"FusionPattern {self.name!r}: {what} must be callable or "
                                f"None, got {fn!r}")

    def __repr__(self) -> str:
        return f"FusionPattern({self.name!r})"


def as_fusion_pattern(item: Any) -> FusionPattern:
    """A FusionPattern as given, or built from a ``(name, pattern[, annotations[, check]])``
    tuple, as TVM's passes accept."""
    if isinstance(item, FusionPattern):
        return item
    if isinstance(item, tuple):
        return FusionPattern(*item)
    raise ValueError(f"Invalid pattern: {item!r} (expected a FusionPattern or a tuple "
                     f"(name, pattern[, annotation_patterns[, check]]))")


__all__ = ["FusionPattern", "PatternCheckContext", "as_fusion_pattern"]

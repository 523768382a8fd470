"""PrimFunc: a TIR function with buffer parameters."""
from __future__ import annotations

from typing import Any, Mapping, Sequence

from workbench.ir.node import (
    NO_VALUE, FrozenDict, Node, attrs_with, frozen, merge_attrs, node,
)
from workbench.tir.buffer import Buffer
from workbench.tir.expr import Var
from workbench.tir.stmt import Stmt, freeze_field


@node
class PrimFunc(Node):
    """``params`` are Vars; a handle param mapped in ``buffer_map`` is a buffer argument."""

    params: tuple[Var, ...]
    body: Stmt
    buffer_map: FrozenDict = FrozenDict()
    attrs: FrozenDict = FrozenDict()
    ret_type: str = "void"

    __hash__ = object.__hash__

    def __post_init__(self) -> None:
        freeze_field(self, "buffer_map")
        freeze_field(self, "attrs")

    def with_attr(self, key_or_dict: Any, value: Any = NO_VALUE) -> "PrimFunc":
        """A copy with attribute ``key`` set to ``value``, or with every entry of a dict set
        (TVM's ``with_attr(key, value)`` and ``with_attr({key: value, ...})``)."""
        return self.replace(attrs=attrs_with(self.attrs, key_or_dict, value,
                                             "PrimFunc.with_attr"))

    def with_attrs(self, attrs: Mapping[str, Any]) -> "PrimFunc":
        """A copy with every ``key: value`` of ``attrs`` set."""
        return self.replace(attrs=merge_attrs(self.attrs, attrs, "PrimFunc.with_attrs"))

    def without_attr(self, key: str) -> "PrimFunc":
        """A copy without attribute ``key`` (unchanged if it has none)."""
        return self.replace(attrs=self.attrs.without(key))

    def with_body(self, body: Stmt) -> "PrimFunc":
        return self.replace(body=body)

    @property
    def buffers(self) -> list[Buffer]:
        """The buffer parameters, in parameter order."""
        return [self.buffer_map[p] for p in self.params if p in self.buffer_map]

    def script(self, name: str | None = None) -> str:
        from workbench.tir.printer import script_func
        return script_func(self, name or self.attrs.get("global_symbol", "main"))

    def show(self, style: str | None = None, black_format: bool = False,
             name: str | None = None) -> None:
        """Print the function's script, highlighted when Pygments is installed."""
        from workbench.ir.highlight import cprint
        cprint(self.script(name), style=style, black_format=black_format)

    def __str__(self) -> str:
        # print(func) shows the script, as in TVM; repr stays the one-line summary.
        return self.script()

    def _repr_html_(self) -> str:
        from workbench.tir.printer import html_highlight
        return html_highlight(self.script())


def prim_func(params: Sequence[Var | Buffer], body: Stmt,
              attrs: Mapping[str, Any] | None = None, name: str = "main") -> PrimFunc:
    """Build a PrimFunc from Buffers (buffer params) and Vars (scalar params)."""
    vars_: list[Var] = []
    bmap: dict[Var, Buffer] = {}
    for p in params:
        if isinstance(p, Buffer):
            v = Var(p.name + "_handle", "handle")
            vars_.append(v)
            bmap[v] = p
        elif isinstance(p, Var):
            vars_.append(p)
        else:
            raise TypeError(f"PrimFunc parameters must be Buffers or Vars, got {p!r}")
    a = dict(attrs or {})
    a.setdefault("global_symbol", name)
    a.setdefault("tir.noalias", True)
    return PrimFunc(tuple(vars_), body, FrozenDict(bmap), frozen(a))

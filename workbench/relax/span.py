"""Source locations: where a Relax call came from in an imported model.

The importers (``relax.frontend.torch`` / ``relax.frontend.onnx``) tag every call they emit
with a :class:`Span`: the model operation(s) it implements, each a :class:`Source` (PyTorch:
the fx node, its ATen op and the ``nn.Module`` path it sits in, e.g. ``layer1.0.conv1``; ONNX:
the node name and ``op_type``, plus the PyTorch module path when the exporter recorded one).

The span lives on the :class:`~workbench.relax.expr.Call` node (field ``span``), takes no part
in structural equality or hashing, and the compilation passes carry it (see
docs/internals.md, "Source locations"):

- ``BlockBuilder.span_scope(span)`` tags every call normalised inside the scope that has no
  span yet (the importers convert each model node inside one; ``LegalizeOps`` legalizes each
  call inside the scope of its span, so the ``call_tir`` s it makes inherit it);
- ``ExprMutator`` keeps the span of a call it rebuilds; ``FuseOps`` gives the call of a fused
  function the merge of its members' spans (in binding order); ``FuseTIR`` and
  ``CallTIRRewrite`` hand the span on to the fused ``call_tir`` and then to the kernel call;
- ``relax.build`` records, per VM call instruction that calls a kernel, its span:
  ``exe.call_sources[(function, instruction index)]`` (the index is the one in
  ``VirtualMachine.instrument_position``'s ``CallSite``).

So a fused kernel ``fused_conv2d_add_relu`` called for ResNet's first block is named by
``span.label()`` == ``"layer1.0.conv1 + layer1.0.bn1 + layer1.0.relu"``.
"""
from __future__ import annotations

from typing import Any, Iterable

from workbench.ir.node import Node, node


@node
class Source(Node):
    """One operation of the imported model.

    ``frontend``: ``"torch"`` or ``"onnx"``; ``name``: the fx node name or ONNX node name;
    ``op_type``: the ATen op (``aten.convolution.default``) or ONNX op type (``Conv``);
    ``module_path``: the ``nn.Module`` path (``layer1.0.conv1``; ``""`` at the top level or
    when unknown); ``module_type``: that module's class name (``Conv2d``) or ``""``.
    """

    frontend: str
    name: str
    op_type: str
    module_path: str = ""
    module_type: str = ""

    @property
    def layer(self) -> str:
        """How a user names this operation: the module path, else the node name."""
        return self.module_path or self.name


@node
class Span(Node):
    """The model operations a call implements (one for an imported op; several after
    fusion), in program order without repeats."""

    sources: tuple[Source, ...]

    def __post_init__(self) -> None:
        object.__setattr__(self, "sources", tuple(self.sources))

    @staticmethod
    def merge(spans: Iterable["Span | None"]) -> "Span | None":
        """One span with the sources of all ``spans`` (None ones skipped), first occurrence
        order; None when there is no source at all."""
        out: list[Source] = []
        keys: set[tuple] = set()
        for s in spans:
            if s is None:
                continue
            for src in s.sources:
                key = (src.frontend, src.name, src.op_type, src.module_path, src.module_type)
                if key not in keys:
                    keys.add(key)
                    out.append(src)
        return Span(tuple(out)) if out else None

    @property
    def layers(self) -> list[str]:
        """The distinct layers (module paths, else node names), in order."""
        return list(dict.fromkeys(s.layer for s in self.sources))

    @property
    def op_types(self) -> list[str]:
        """The distinct op types, in order."""
        return list(dict.fromkeys(s.op_type for s in self.sources))

    def label(self) -> str:
        """``"layer1.0.conv1 + layer1.0.bn1 + layer1.0.relu"``."""
        return " + ".join(self.layers)

    def __str__(self) -> str:
        return self.label()


def call_spans(func: Any) -> list[tuple[str, "Span | None"]]:
    """``(callee name, span)`` of every call of a GlobalVar / ExternFunc / ``call_tir`` in
    a Relax function's bindings (If branches included), in program order: after FuseTIR the
    callee names are the kernel names."""
    from workbench.ir.module import GlobalVar
    from workbench.relax.expr import Call, ExternFunc, If, SeqExpr
    out: list[tuple[str, Span | None]] = []

    def walk(e: Any) -> None:
        if isinstance(e, SeqExpr):
            for blk in e.blocks:
                for b in blk.bindings:
                    walk(b.value)
        elif isinstance(e, If):
            walk(e.true_branch)
            walk(e.false_branch)
        elif isinstance(e, Call):
            op = e.op
            if getattr(op, "name", None) == "relax.call_tir":
                out.append((e.args[0].name_hint, e.span))
            elif getattr(op, "name", None) == "relax.call_dps_packed":
                out.append((e.args[0].global_symbol, e.span))
            elif isinstance(op, GlobalVar):
                out.append((op.name_hint, e.span))
            elif isinstance(op, ExternFunc):
                callee = e.args[0] if e.args and isinstance(e.args[0], GlobalVar) else None
                out.append((callee.name_hint if callee is not None else op.global_symbol,
                            e.span))
    walk(func.body)
    return out


__all__ = ["Source", "Span", "call_spans"]

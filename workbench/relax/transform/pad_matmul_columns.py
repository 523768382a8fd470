"""``PadMatmulColumns``: a product with a constant weight whose output columns are not a whole
number of vector registers computes a zero-padded number of them, and the padding is cut off
after (MLAS's zero-padded weight panels in effect).

Contract: ``PadMatmulColumns(target)(mod)`` returns a module computing the same values, where in
every Relax function each float32 ``y = R.matmul(x, W)`` such that ``W`` is a 2-d constant
(a ``Constant``, or ``permute_dims`` of one: a linear layer's transposed weight) of ``K x N``
columns, ``N`` at least four vectors of the target's float32 lanes ``L`` and not a multiple
of ``L`` (padded to the next multiple), becomes::

    y = R.strided_slice(R.matmul(x, W_padded), axes=[-1], begin=[0], end=[N])

with ``W_padded`` the weight (transposed here, at compile time) and the zero columns. Why: the
default schedule vectorizes the product along ``N`` with a tile that divides it; for a
classifier's 1,000 outputs that is 10 or 8 lanes of a 16-lane register (1,280 x 1,000: 189 us
against 103 us for 1,008 columns on one Zen 4 core), and a predicated tail is slower still. The slice reads the product's first ``N`` columns, an injective stage
that fusion keeps with the product. After a call, ``padded`` counts the rewritten products.

(A product of few rows whose weight rows are a multiple of 4 KiB apart used to get one more
vector of columns too: walking the weight unpacked, every row's tile mapped to the same cache
sets. The default schedule now packs every constant weight into contiguous panels
(``AnnotateConstantParams``), so there is no such walk: 1 x 1,280 x 1,024 ran in 0.25-0.36 ms
packed against 0.40-0.52 ms padded, on one loaded Zen 4 core.)
"""
from __future__ import annotations

from typing import Any

import numpy as np

from workbench.ir.module import IRModule
from workbench.ir.transform import Pass, PassContext
from workbench.relax.expr import Call, Constant, Expr, Var, VarBinding
from workbench.relax.expr_functor import ExprMutator
from workbench.relax.op.index import strided_slice
from workbench.relax.transform._util import is_primitive, relax_functions

__all__ = ["PadMatmulColumns"]

#: Pad only products at least this many vectors wide (narrow ones gain nothing).
MIN_VECTORS = 4


def _op(e: Any) -> str:
    return getattr(getattr(e, "op", None), "name", "") if isinstance(e, Call) else ""




def _rows(si: Any) -> int | None:
    """The product of the static leading dimensions of a tensor's struct info."""
    from workbench.relax.op._infer import const_int
    dims = [const_int(d) for d in si.values[:-1]] if si.shape is not None else None
    if dims is None or any(d is None for d in dims):
        return None
    return int(np.prod(dims, dtype=np.int64))


class _Padder(ExprMutator):
    def __init__(self, mod: IRModule, lanes: int) -> None:
        super().__init__(mod)
        self.lanes = lanes
        self.values: dict[int, Expr] = {}
        self.padded = 0

    def weight(self, e: Expr) -> np.ndarray | None:
        """The value of a 2-d constant weight operand, transposed if it is ``permute_dims``
        of a constant."""
        if isinstance(e, Var):
            e = self.values.get(id(e), e)
        if isinstance(e, Constant):
            return e.data.numpy()
        if _op(e) == "relax.permute_dims":
            inner = self.weight(e.args[0])
            axes = e.attrs.get("axes")
            if inner is not None and inner.ndim == 2 and axes in (None, (1, 0), [1, 0]):
                return inner.T
        return None

    def visit_var_binding(self, b: VarBinding) -> None:
        self.values[id(b.var)] = b.value
        new = self.rewrite(b.value) if _op(b.value) == "relax.matmul" else None
        if new is None:
            super().visit_var_binding(b)
        else:
            self.reemit_binding(b, new)

    def rewrite(self, call: Call) -> Expr | None:
        x, w_expr = call.args
        w = self.weight(w_expr)
        si = x.struct_info
        if w is None or w.ndim != 2 or w.dtype != np.float32 or \
                getattr(si, "dtype", None) != "float32" or getattr(si, "ndim", -1) < 1 or \
                call.attrs.get("out_dtype") not in (None, "void", "float32"):
            return None
        n = w.shape[1]
        lanes = self.lanes
        if n < MIN_VECTORS * lanes:
            return None
        if not n % lanes:
            return None
        padded = -(-n // lanes) * lanes
        wp = np.zeros((w.shape[0], padded), np.float32)
        wp[:, :n] = w
        self.padded += 1
        product = self.builder_.emit(
            Call(call.op, (self.visit_expr(x), Constant(wp)), dict(call.attrs), (),
                 span=call.span), name_hint="padded")
        axis = si.ndim - 1
        return strided_slice(product, [axis], [0], [n], assume_inbound=True).replace(
            span=call.span)


class PadMatmulColumns(Pass):
    """The pass object: ``mod = PadMatmulColumns(target)(mod)`` (see the module docstring);
    ``lanes`` overrides the target's float32 lanes."""

    name = "PadMatmulColumns"

    def __init__(self, target: Any = None, lanes: int | None = None) -> None:
        if lanes is not None and (not isinstance(lanes, int) or lanes < 1):
            raise ValueError(f"{self.name}: lanes must be a positive int, got {lanes!r}")
        self.target = target
        self.lanes = lanes
        self.padded = 0

    def transform_module(self, mod: IRModule, ctx: PassContext | None = None) -> IRModule:
        if not isinstance(mod, IRModule):
            raise TypeError(f"{self.name} expects an IRModule, got {type(mod).__name__}")
        from workbench.relax.transform.convert_layout_nchwc import block_for_target
        lanes = self.lanes or block_for_target(self.target)
        self.padded = 0
        out = mod.copy()
        for name, func in relax_functions(mod):
            if is_primitive(func):
                continue
            padder = _Padder(out, lanes)
            new = padder.visit_expr(func)
            if padder.padded:
                out[name] = new
                self.padded += padder.padded
        return out

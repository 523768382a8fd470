"""``SinkReshapes``: the reshapes around a linear layer cancel, so its product, bias,
activation and residual add are one chain of ops that fusion makes one kernel.

PyTorch's decomposition of ``nn.Linear`` on a ``(B, S, K)`` input flattens it to ``(B*S, K)``,
multiplies, adds the bias and views the result back as ``(B, S, N)``. The view between the
product and the activation (or the residual add) is an injective op that ``FuseOps`` does not
put into a product's epilogue (only elementwise and broadcast ops go there), so the bias add,
the GELU and the residual add each became a kernel of their own that rereads the product.

Contract: ``SinkReshapes()(mod)`` returns a module computing the same values, where in every
non-primitive Relax function, for tensors of known shapes (static, or symbolic with dims
that are products of variables, such as a dynamic sequence length):

- ``matmul(reshape(y, [..., K]), W)`` with a 2-d ``W`` and ``y``'s last dimension ``K``
  becomes ``reshape(matmul(y, W), [..., N])`` (the product is computed on the unflattened
  rows: the same numbers in the same order);
- an elementwise op whose tensor operand is ``reshape(y, S)`` -- a unary one (GELU exact and
  tanh, ReLU, SiLU, tanh, sigmoid, exp, erf, ...), or a binary one (add, subtract, multiply,
  divide, maximum, minimum, power) whose other operand is a scalar, a tensor that only
  broadcasts along trailing dimensions that ``S`` and ``y``'s shape share (a bias), or a
  reshape to ``S`` of a tensor of ``y``'s shape -- is computed on ``y`` and reshaped after;
- ``reshape(reshape(y, S1), S2)`` becomes ``reshape(y, S2)``, and a reshape of ``y`` to its own
  shape is ``y``; a ``permute_dims`` that only moves dimensions of extent 1 is a reshape
  (``nn.MultiheadAttention``'s batch-first transposes at batch 1);
- a binary elementwise op of ``reshape(p, S)`` and a tensor of shape ``S`` (a residual add
  after a linear layer whose input could not be unflattened: attention's output projection),
  where ``p`` is a 2-d product with a 2-d weight, possibly followed by elementwise ops as
  above, each used only there, computes that chain on rows of shape ``S`` instead: the reshape
  moves up to the product's input (``matmul(reshape(x, S[:-1] + [K]), W)``), so the op joins
  the product's epilogue.  The original chain is left unused (DeadCodeElimination).

So ``view(add(matmul(view(x), W), b))`` is ``add(matmul(x, W), b)`` and the next linear layer's
flattening cancels against the last one's unflattening. Reshapes that do not cancel end up
after the ops they were moved past; their original bindings stay for other users (left to
DeadCodeElimination). After a call, ``sunk`` counts the rewritten bindings.
"""
from __future__ import annotations

from typing import Any

from workbench.ir.module import IRModule
from workbench.ir.transform import Pass, PassContext
from workbench.relax.expr import (
    Call, DataflowVar, Expr, Function, SeqExpr, ShapeExpr, Var, VarBinding,
)
from workbench.relax.expr_functor import ExprMutator
from workbench.relax.op.registry import make_call
from workbench.relax.transform._dims import Dim, exprs, shape_of
from workbench.relax.transform._util import is_primitive, relax_functions, used_vars

__all__ = ["SinkReshapes"]

RESHAPE = "relax.reshape"
PERMUTE = "relax.permute_dims"
MATMUL = "relax.matmul"
#: Ops applied to each element on its own (their attrs, if any, do not involve the shape).
UNARY = frozenset(f"relax.{n}" for n in (
    "nn.gelu", "nn.gelu_tanh", "nn.relu", "nn.silu", "nn.leakyrelu", "tanh", "sigmoid", "exp",
    "erf", "negative", "abs", "sqrt", "rsqrt", "square", "clip", "astype"))
#: Elementwise ops of two operands with numpy broadcasting.
BINARY = frozenset(f"relax.{n}" for n in (
    "add", "subtract", "multiply", "divide", "maximum", "minimum", "power"))


def _op(e: Any) -> str:
    return getattr(getattr(e, "op", None), "name", "") if isinstance(e, Call) else ""


def _shape(e: Expr) -> tuple[Dim, ...] | None:
    # Dims compare like ints, and a symbolic sequence length like itself.
    return shape_of(e)


def _trailing_broadcast_ok(c: tuple[Dim, ...], s: tuple[Dim, ...], y: tuple[Dim, ...]) -> bool:
    """Broadcasting a tensor of shape ``c`` against ``s`` then reshaping to ``y`` equals
    broadcasting it against ``y``: ``c`` fits into ``s`` and only spans trailing dimensions
    that the reshape keeps (row-major reshapes then only remap the leading ones)."""
    k = len(c)
    if k > len(s) or k > len(y) or any(d not in (1, e) for d, e in zip(c, s[len(s) - k:])):
        return False
    return k == 0 or s[len(s) - k:] == y[len(y) - k:]


def _moves_only_unit_dims(shape: tuple[Dim, ...], axes: Any) -> bool:
    axes = tuple(reversed(range(len(shape)))) if axes is None else tuple(int(a) for a in axes)
    kept = [a for a in axes if shape[a] != 1]
    return kept == sorted(kept)


def _use_counts(func: Function) -> dict[int, int]:
    """id(Var) -> how many bindings (and the body) of ``func`` read it."""
    counts: dict[int, int] = {}
    if not isinstance(func.body, SeqExpr):
        return counts               # nothing is then known to be used once: nothing hoists
    values = [b.value for blk in func.body.blocks for b in blk.bindings] + [func.body.body]
    for value in values:
        for v in used_vars(value):
            counts[id(v)] = counts.get(id(v), 0) + 1
    return counts


class _Sinker(ExprMutator):
    def __init__(self, mod: IRModule, uses: dict[int, int]) -> None:
        super().__init__(mod)
        self.values: dict[int, Expr] = {}   # id(Var) -> the value bound to it (new IR)
        self.uses = uses                    # of the original function's vars
        self.single: set[int] = set()       # ids of new-IR vars whose original is used once
        self.sunk = 0

    def visit_var_binding(self, b: VarBinding) -> None:
        value = self.visit_expr(b.value)
        new = self.rewrite(value)
        if new is not None:
            self.sunk += 1
            value = new
        self.reemit_binding(b, value)
        var = self.var_remap_.get(id(b.var), b.var)
        self.values[id(var)] = value
        if isinstance(b.var, DataflowVar) and self.uses.get(id(b.var)) == 1:
            self.single.add(id(var))

    # ---- helpers -------------------------------------------------------------------------------

    def source(self, e: Expr) -> tuple[Expr, tuple[Dim, ...]] | None:
        """``(y, shape of y)`` when ``e`` is (a Var bound to) ``reshape(y, ...)`` of a
        statically shaped ``y``."""
        while isinstance(e, Var) and id(e) in self.values:   # through aliases ``v = w``
            e = self.values[id(e)]
        if _op(e) != RESHAPE:
            return None
        y = e.args[0]
        ys = _shape(y)
        return (y, ys) if ys is not None else None

    def emit(self, e: Call, hint: str) -> Var:
        var = self.builder_.emit(e, name_hint=hint)
        self.values[id(var)] = e
        return var

    @staticmethod
    def reshape(y: Expr, shape: tuple[Dim, ...]) -> Expr:
        if _shape(y) == tuple(shape):
            return y
        return _Sinker.reshape_call(y, shape)

    @staticmethod
    def reshape_call(y: Expr, shape: tuple[Dim, ...]) -> Call:
        return make_call(RESHAPE, (y, ShapeExpr(tuple(exprs(shape)))))

    def normalize(self, e: Expr) -> Expr:
        return self.builder_.normalize(e)

    def collapsed(self, x: Expr, shape: tuple[Dim, ...]) -> Expr:
        """``x`` reshaped to ``shape``, through a reshape that produced ``x``."""
        src = self.source(x)
        return self.reshape(src[0] if src is not None else x, shape)

    # ---- the rules -----------------------------------------------------------------------------

    def rewrite(self, value: Expr) -> Expr | None:
        op = _op(value)
        out = _shape(value) if op else None
        if out is None:
            return None
        if op == PERMUTE and _shape(value.args[0]) is not None and \
                _moves_only_unit_dims(_shape(value.args[0]), value.attrs.get("axes")):
            src = self.source(value.args[0])
            return self.reshape(src[0] if src is not None else value.args[0], out)
        if op == RESHAPE:
            src = self.source(value.args[0])
            if src is not None:
                return self.reshape(src[0], out)
            return value.args[0] if _shape(value.args[0]) == out else None
        if op == MATMUL:
            return self.matmul(value, out)
        if op in UNARY:
            src = self.source(value.args[0])
            if src is None:
                return None
            inner = self.emit(Call(value.op, (src[0], *value.args[1:]), value.attrs,
                                   value.sinfo_args, span=value.span), "sunk")
            return self.reshape(inner, out)
        if op in BINARY:
            return self.binary(value, out)
        return None

    def matmul(self, value: Call, out: tuple[Dim, ...]) -> Expr | None:
        x, w = value.args
        src, xs, ws = self.source(x), _shape(x), _shape(w)
        if src is None or xs is None or ws is None or len(ws) != 2 or len(xs) < 2:
            return None
        y, ys = src
        if ys[-1] != xs[-1] or len(ys) < 2:
            return None
        inner = self.emit(Call(value.op, (y, w), value.attrs, value.sinfo_args,
                               span=value.span), "rows")
        return self.reshape(inner, out)

    def binary(self, value: Call, out: tuple[Dim, ...]) -> Expr | None:
        a, b = value.args
        sa, sb = self.source(a), self.source(b)
        if sa is not None and sb is not None:
            if sa[1] != sb[1] or _shape(a) != out or _shape(b) != out:
                return self.hoisted_binary(value, out)
            args = (sa[0], sb[0])
        elif sa is not None or sb is not None:
            (y, ys), other = (sa, b) if sa is not None else (sb, a)
            cs = _shape(other)
            if cs is None or _shape(a if sa is not None else b) != out or \
                    not _trailing_broadcast_ok(cs, out, ys):
                return self.hoisted_binary(value, out)
            args = (y, other) if sa is not None else (other, y)
        else:
            return None
        inner = self.emit(Call(value.op, args, value.attrs, value.sinfo_args,
                               span=value.span), "sunk")
        return self.reshape(inner, out)

    # ---- moving a reshape up a product's chain ------------------------------------------------

    def hoisted_binary(self, value: Call, out: tuple[Dim, ...]) -> Expr | None:
        """``value`` (a binary op of full-shape operands) with an operand ``reshape(p, out)``
        replaced by ``p``'s product chain computed at shape ``out`` (see the module docstring)."""
        args = list(value.args)
        for i, arg in enumerate(args):
            src = self.source(arg)
            # the view and the chain both used only here: nothing is computed twice
            if src is None or _shape(arg) != out or id(arg) not in self.single:
                continue
            chain = self.hoist(src[0], out)
            if chain is not None:
                args[i] = chain
                return Call(value.op, tuple(args), value.attrs, value.sinfo_args,
                            span=value.span)
        return None

    def hoist(self, var: Expr, shape: tuple[Dim, ...]) -> Expr | None:
        """A Var holding ``var``'s value reshaped to ``shape``, computed by re-emitting the
        single-use product chain that ends in ``var`` at that shape; None when ``var`` is not
        such a chain."""
        if not isinstance(var, Var) or id(var) not in self.single:
            return None
        value = self.values.get(id(var))
        op, vs = _op(value), _shape(var)
        if vs is None or not op:
            return None
        if op == MATMUL:
            x, w = value.args
            xs, ws = _shape(x), _shape(w)
            if xs is None or ws is None or len(ws) != 2 or len(xs) != 2 or \
                    shape[-1] != ws[1]:
                return None
            rows = self.collapsed(x, shape[:-1] + xs[-1:])
            if not isinstance(rows, Var):
                rows = self.emit(self.normalize(rows), "rows")
            return self.emit(Call(value.op, (rows, w), value.attrs, value.sinfo_args,
                                  span=value.span), "rows")
        if op in UNARY:
            inner = self.hoist(value.args[0], shape)
            return None if inner is None else self.emit(
                Call(value.op, (inner, *value.args[1:]), value.attrs, value.sinfo_args,
                     span=value.span), "rows")
        if op in BINARY:
            for i, other in enumerate(value.args):
                cs = _shape(other)
                chain = value.args[1 - i]
                if cs is None or _shape(chain) != vs or \
                        not _trailing_broadcast_ok(cs, vs, shape):
                    continue
                inner = self.hoist(chain, shape)
                if inner is not None:
                    args = (inner, other) if i == 1 else (other, inner)
                    return self.emit(Call(value.op, args, value.attrs, value.sinfo_args,
                                          span=value.span), "rows")
        return None


class SinkReshapes(Pass):
    """The pass object: ``mod = SinkReshapes()(mod)`` (see the module docstring)."""

    name = "SinkReshapes"

    def __init__(self) -> None:
        self.sunk = 0

    def transform_module(self, mod: IRModule, ctx: PassContext | None = None) -> IRModule:
        if not isinstance(mod, IRModule):
            raise TypeError(f"{self.name} expects an IRModule, got {type(mod).__name__}")
        self.sunk = 0
        out = mod.copy()
        for name, func in relax_functions(mod):
            if is_primitive(func):
                continue
            sinker = _Sinker(out, _use_counts(func))
            new = sinker.visit_expr(func)
            if sinker.sunk:
                out[name] = new
                self.sunk += sinker.sunk
        return out

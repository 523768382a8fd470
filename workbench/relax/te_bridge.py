"""``call_te``: from a te function over Relax values to a PrimFunc plus its ``call_tir``.

Each Relax tensor argument becomes a ``te.placeholder`` with the argument's shape (symbolic dims
are the Relax function's own tir Vars) and dtype, named after the Relax Var. A tuple argument
becomes a list of placeholders, a ShapeExpr its list of dims, a PrimValue its value; anything
else (ints, floats, strings, te-level callables) is passed through unchanged.

The PrimFunc's parameters are the input placeholders in argument order, then the outputs, then
any symbolic dims that no buffer dimension names by itself (those are also passed to
``call_tir`` as ``tir_vars``, so the kernel can compute with ``n`` when its buffers only say
``n * 2``). The PrimFunc gets its own copies of the symbolic dims, so it is self-contained and
two calls that differ only in which ``n`` they use make structurally equal PrimFuncs
(deduplicated by ``add_func``).

Parameter buffers whose dims are compound expressions (``n * 2``) get a fresh variable for that
dim instead (``dim0``): the kernel ABI binds shape variables from plain buffer dimensions (see
docs/internals.md), and the runtime value is the same. The loops keep the expressions.
"""
from __future__ import annotations

import re
from typing import Any, Callable

from workbench.relax.expr import Expr, PrimValue, ShapeExpr, Tuple, Var
from workbench.relax.struct_info import TensorStructInfo, TupleStructInfo
from workbench.tir.expr import PrimExpr
from workbench.tir.expr import SizeVar
from workbench.tir.expr import Var as TirVar


class _Converter:
    def __init__(self, bb: Any):
        self.bb = bb
        self.inputs: list[Expr] = []
        self.placeholders: list[Any] = []
        self._names: set[str] = set()

    def name_for(self, arg: Expr) -> str:
        base = arg.name_hint if isinstance(arg, Var) else "A"
        base = re.sub(r"[^0-9A-Za-z_]", "_", base) or "A"
        name, k = base, 1
        while name in self._names:
            name, k = f"{base}_{k}", k + 1
        self._names.add(name)
        return name

    def __call__(self, a: Any) -> Any:
        from workbench import te
        if isinstance(a, Expr):
            a = self.bb.normalize(a)
            if isinstance(a, Tuple):
                return [self(f) for f in a.fields]
            if isinstance(a, ShapeExpr):
                return list(a.values)
            if isinstance(a, PrimValue):
                return a.value
            si = a.struct_info
            if isinstance(si, TupleStructInfo):
                raise TypeError("call_te: a tuple-valued variable cannot be an argument; pass "
                                "its items (t[0], t[1], ...) or a relax.Tuple of them")
            if not isinstance(si, TensorStructInfo) or si.values is None or not si.dtype:
                raise TypeError(f"call_te: tensor arguments need a known shape and dtype, "
                                f"got {si}")
            ph = te.placeholder(si.values, si.dtype, name=self.name_for(a))
            self.inputs.append(a)
            self.placeholders.append(ph)
            return ph
        if isinstance(a, list):
            return [self(x) for x in a]
        if isinstance(a, tuple):
            return tuple(self(x) for x in a)
        if isinstance(a, dict):
            return {k: self(v) for k, v in a.items()}
        return a


def _bare_and_all_vars(shapes: list[tuple[PrimExpr, ...]]) -> tuple[list[TirVar], list[TirVar]]:
    from workbench.tir.functor import post_order_visit
    bare: list[TirVar] = []
    every: list[TirVar] = []

    def visit(n: Any) -> None:
        if isinstance(n, TirVar) and n not in every:
            every.append(n)

    for shape in shapes:
        for d in shape:
            if isinstance(d, TirVar) and d not in bare:
                bare.append(d)
            post_order_visit(d, visit)
    return bare, every


def call_te(bb: Any, func: Callable, args: tuple, kwargs: dict) -> Expr:
    """See the module docstring; returns the (not yet emitted) ``call_tir``."""
    from workbench import te
    from workbench.relax.op.base import call_tir
    from workbench.tir.functor import substitute
    name_hint = kwargs.pop("primfunc_name_hint", None)
    attrs = kwargs.pop("primfunc_attrs", None)
    conv = _Converter(bb)
    te_args = [conv(a) for a in args]
    te_kwargs = {k: conv(v) for k, v in kwargs.items()}
    outs = func(*te_args, **te_kwargs)
    out_list = [outs] if isinstance(outs, te.Tensor) else list(outs)
    if not out_list or not all(isinstance(t, te.Tensor) for t in out_list):
        raise TypeError(f"call_te: {getattr(func, '__name__', func)!r} must return a te Tensor "
                        f"or a list of them, got {outs!r}")
    shapes = [tuple(t.shape) for t in conv.placeholders + out_list]
    _, every = _bare_and_all_vars(shapes)
    prim = te.create_prim_func([*conv.placeholders, *out_list])
    # The kernel gets its own symbolic dims (a PrimFunc must not share Vars with its caller).
    fresh = {v: type(v)(v.name, v.dtype) for v in every}
    prim = substitute(prim, fresh) if fresh else prim
    prim = _plain_param_dims(prim)
    bare, _ = _bare_and_all_vars([tuple(b.shape) for b in prim.buffer_map.values()])
    extra = [v for v in every if fresh[v] not in bare]
    if extra:
        prim = prim.replace(params=prim.params + tuple(fresh[v] for v in extra))
    if attrs:
        prim = prim.with_attr(dict(attrs))
    name = name_hint or _default_name(func, out_list)
    gvar = bb.add_func(prim, name)
    out_sinfo = [TensorStructInfo(tuple(t.shape), t.dtype) for t in out_list]
    tir_vars = ShapeExpr(tuple(extra)) if extra else None
    return call_tir(gvar, Tuple(tuple(conv.inputs)), out_sinfo if len(out_sinfo) > 1
                    else out_sinfo[0], tir_vars)


class _PlainDims:
    """Rewrites parameter buffers so every dim is a constant or a variable."""

    def __init__(self) -> None:
        self.dims: list[tuple[PrimExpr, TirVar]] = []

    def var_for(self, e: PrimExpr) -> TirVar:
        from workbench.ir.structural import structural_equal
        for known, v in self.dims:
            if structural_equal(known, e):
                return v
        v = SizeVar(f"dim{len(self.dims)}", e.dtype)
        self.dims.append((e, v))
        return v


def _plain_param_dims(prim: Any) -> Any:
    from workbench.tir.expr import IntImm
    from workbench.tir.functor import IRMutator
    params = {id(b) for b in prim.buffer_map.values()}
    plain = _PlainDims()

    class _Rewrite(IRMutator):
        def rewrite_buffer(self, buf: Any) -> Any:
            if id(buf) not in params:
                return self.generic_visit(buf)
            shape = tuple(d if isinstance(d, (IntImm, TirVar)) else plain.var_for(d)
                          for d in buf.shape)
            if all(a is b for a, b in zip(shape, buf.shape)):
                return buf
            return buf.replace(shape=shape)
    if all(isinstance(d, (IntImm, TirVar)) for b in prim.buffer_map.values() for d in b.shape):
        return prim
    return _Rewrite().visit(prim)


def _default_name(func: Callable, outs: list) -> str:
    name = getattr(func, "__name__", "")
    if name and name.isidentifier() and name != "<lambda>":
        return name
    base = outs[0].op.name
    return base[2:] if base.startswith("T_") else base


__all__ = ["call_te"]

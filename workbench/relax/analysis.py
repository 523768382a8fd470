"""Struct-info analysis: symbolic-dimension matching and substitution, and concrete shape binding.

- :func:`bind_symbolic` matches a parameter's struct info against an argument's and returns what
  each symbolic dim of the parameter stands for (used to infer the result of calling a function).
- :func:`substitute_sinfo` replaces symbolic dims in struct info.
- :func:`match_value` binds symbolic dims to the ints of concrete run-time values (numpy arrays,
  NDArrays, tuples) and checks the rest: what the reference evaluators use at function entry,
  and what ``MatchCast`` does at run time.
- :func:`eval_dims` evaluates dims under such bindings.
- :func:`get_var2val` maps each bound variable of a function to its value (what the dataflow
  pattern matcher follows, ``workbench.relax.dpl``).
- :func:`estimate_memory_usage` is TVM's ``relax.analysis.estimate_memory_usage`` (implemented
  with memory planning, in :mod:`workbench.relax.transform.static_plan_block_memory`).
"""
from __future__ import annotations

from typing import Any, Mapping, MutableMapping

from workbench.relax.struct_info import (
    FuncStructInfo, ObjectStructInfo, PrimStructInfo, ShapeStructInfo, StructInfo,
    TensorStructInfo, TupleStructInfo,
)
from workbench.tir.expr import IntImm, PrimExpr, Var


def bind_symbolic(param: StructInfo, arg: StructInfo,
                  out: MutableMapping[Var, PrimExpr] | None = None) -> dict[Var, PrimExpr]:
    """``{var: expr}`` for every bare symbolic dim of ``param`` matched by ``arg``."""
    out = {} if out is None else out
    if isinstance(param, TensorStructInfo) and isinstance(arg, TensorStructInfo):
        _bind_dims(param.values, arg.values, out)
    elif isinstance(param, ShapeStructInfo) and isinstance(arg, ShapeStructInfo):
        _bind_dims(param.values, arg.values, out)
    elif isinstance(param, TupleStructInfo) and isinstance(arg, TupleStructInfo):
        for p, a in zip(param.fields, arg.fields):
            bind_symbolic(p, a, out)
    return out  # type: ignore[return-value]


def _bind_dims(pvals: Any, avals: Any, out: MutableMapping[Var, PrimExpr]) -> None:
    if pvals is None or avals is None or len(pvals) != len(avals):
        return
    for p, a in zip(pvals, avals):
        if isinstance(p, Var) and p not in out:
            out[p] = a


def substitute_sinfo(si: StructInfo, vmap: Mapping[Var, PrimExpr]) -> StructInfo:
    """``si`` with symbolic dims replaced (simplified, so ``n * 2`` with n=4 gives 8)."""
    if not vmap:
        return si
    rule = _SUBST.get(type(si))
    return rule(si, vmap) if rule else si


def _subst_expr(e: PrimExpr, vmap: Mapping[Var, PrimExpr]) -> PrimExpr:
    from workbench.tir.arith.analyzer import Analyzer
    from workbench.tir.functor import substitute
    new = substitute(e, dict(vmap))
    return new if new is e else Analyzer().simplify(new)


def _subst_tensor(si: TensorStructInfo, vmap: Mapping[Var, PrimExpr]) -> StructInfo:
    if si.values is None:
        return si
    return TensorStructInfo(tuple(_subst_expr(v, vmap) for v in si.values), si.dtype)


def _subst_shape(si: ShapeStructInfo, vmap: Mapping[Var, PrimExpr]) -> StructInfo:
    if si.values is None:
        return si
    return ShapeStructInfo(tuple(_subst_expr(v, vmap) for v in si.values))


def _subst_tuple(si: TupleStructInfo, vmap: Mapping[Var, PrimExpr]) -> StructInfo:
    return TupleStructInfo(tuple(substitute_sinfo(f, vmap) for f in si.fields))


def _subst_prim(si: PrimStructInfo, vmap: Mapping[Var, PrimExpr]) -> StructInfo:
    return si if si.value is None else PrimStructInfo(si.dtype, _subst_expr(si.value, vmap))


def _subst_func(si: FuncStructInfo, vmap: Mapping[Var, PrimExpr]) -> StructInfo:
    params = None if si.params is None else tuple(substitute_sinfo(p, vmap) for p in si.params)
    return FuncStructInfo(params, substitute_sinfo(si.ret, vmap), si.purity)


_SUBST = {TensorStructInfo: _subst_tensor, ShapeStructInfo: _subst_shape,
          TupleStructInfo: _subst_tuple, PrimStructInfo: _subst_prim,
          FuncStructInfo: _subst_func, ObjectStructInfo: lambda si, vmap: si}


# ---- run-time values --------------------------------------------------------------------------

class ShapeMismatch(ValueError):
    """A run-time value does not match its struct info."""


def eval_dims(dims: Any, env: Mapping[Var, int]) -> tuple[int, ...]:
    """The int value of each dim under ``env`` (symbolic dim -> int)."""
    from workbench.tir.arith.evaluate import evaluate
    return tuple(d.value if isinstance(d, IntImm) else int(evaluate(d, env)) for d in dims)


def match_value(si: StructInfo, value: Any, env: MutableMapping[Var, int], what: str) -> None:
    """Check ``value`` against ``si``, binding symbolic dims met bare for the first time.

    Tensors are anything with ``.shape`` and ``.dtype`` (numpy arrays, NDArrays); tuples are
    Python tuples; shapes are tuples of ints. Raises :class:`ShapeMismatch` naming ``what``.
    """
    if isinstance(si, TensorStructInfo):
        if not hasattr(value, "shape"):
            raise ShapeMismatch(f"{what}: expected a tensor, got {type(value).__name__}")
        if si.dtype and str(value.dtype) != si.dtype:
            raise ShapeMismatch(f"{what}: expected dtype {si.dtype}, got {value.dtype}")
        if si.ndim >= 0 and len(value.shape) != si.ndim:
            raise ShapeMismatch(f"{what}: expected rank {si.ndim}, got shape "
                                f"{tuple(value.shape)}")
        if si.values is not None:
            _match_dims(si.values, tuple(value.shape), env, what)
    elif isinstance(si, ShapeStructInfo):
        if si.values is not None:
            _match_dims(si.values, tuple(value), env, what)
    elif isinstance(si, TupleStructInfo):
        if not isinstance(value, (tuple, list)) or len(value) != len(si.fields):
            raise ShapeMismatch(f"{what}: expected a tuple of {len(si.fields)} values")
        for i, (f, v) in enumerate(zip(si.fields, value)):
            match_value(f, v, env, f"{what}[{i}]")


def _match_dims(dims: Any, shape: tuple, env: MutableMapping[Var, int], what: str) -> None:
    if len(dims) != len(shape):
        raise ShapeMismatch(f"{what}: expected rank {len(dims)}, got shape {shape}")
    # Bare vars bind first, so (n, n * 2) checks the second dim against the bound n.
    for d, s in zip(dims, shape):
        if isinstance(d, Var) and d not in env:
            env[d] = int(s)
    for i, (d, s) in enumerate(zip(dims, shape)):
        try:
            expected = eval_dims((d,), env)[0]
        except Exception:  # noqa: BLE001 - a dim using a var nothing binds
            continue
        if expected != int(s):
            from workbench.relax.dim_text import dim_text
            raise ShapeMismatch(f"{what}: dimension {i} should be {dim_text(d)} = "
                                f"{expected}, got {s} (shape {shape})")


def estimate_memory_usage(mod: Any, shape_vars: Mapping[str, int] | None = None) -> str:
    """TVM's text report of the bytes each Relax function of ``mod`` allocates per call, with
    and without memory planning (``mod`` at any stage; ``shape_vars`` values symbolic dims by
    name). Same as :func:`workbench.relax.transform.estimate_memory_usage`."""
    # Imported here: the transforms import this module.
    from workbench.relax.transform.static_plan_block_memory import (
        estimate_memory_usage as _estimate,
    )
    return _estimate(mod, dict(shape_vars) if shape_vars is not None else None)


def get_var2val(func: Any) -> dict:
    """``{Var: bound value}`` for every variable binding of the Relax function ``func`` (TVM's
    ``relax.analysis.get_var2val``), nested functions and If branches included."""
    from workbench.relax.expr import Function, If, SeqExpr, VarBinding

    if not isinstance(func, Function):
        raise TypeError(f"get_var2val expects a relax.Function, got {type(func).__name__}")
    out: dict = {}

    def walk(e: Any) -> None:
        if isinstance(e, Function):
            walk(e.body)
        elif isinstance(e, SeqExpr):
            for block in e.blocks:
                for b in block.bindings:
                    if isinstance(b, VarBinding):
                        out[b.var] = b.value
                    walk(b.value)
            walk(e.body)
        elif isinstance(e, If):
            walk(e.true_branch)
            walk(e.false_branch)
    walk(func)
    return out


__all__ = ["bind_symbolic", "substitute_sinfo", "match_value", "eval_dims", "ShapeMismatch",
           "estimate_memory_usage", "get_var2val"]

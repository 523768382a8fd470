"""The numpy reference evaluator for Relax: an independent oracle for the graph stack.

``evaluate_numpy(mod, "main", *np_args)`` runs a Relax function binding by binding in a short
environment-passing loop (JAX's ``eval_jaxpr`` style): each op call is computed by the op's numpy
rule (``registry.NUMPY_RULES``, written with numpy alone, not with te/topi); ``call_tir`` runs
the PrimFunc with the pure-Python TIR interpreter; calls of other Relax functions recurse.

Values: tensors are numpy arrays, tuples are Python tuples, shapes are tuples of ints. Symbolic
dims are bound from the arguments (and by MatchCast) and every result is checked against its
binding's struct info, so a wrong shape inference shows up here too.
"""
from __future__ import annotations

from typing import Any, Callable

import numpy as np

from workbench.ir.dispatch import TypeTable
from workbench.ir.module import GlobalVar, IRModule
from workbench.relax import analysis
from workbench.relax.expr import (
    Call, Constant, Function, If, MatchCast, Op, PrimValue, SeqExpr, ShapeExpr, StringImm, Tuple,
    TupleGetItem, Var,
)
from workbench.relax.op.registry import NUMPY_RULES
from workbench.relax.struct_info import TensorStructInfo


class _Env:
    def __init__(self, mod: IRModule, record: dict | None = None):
        self.mod = mod
        self.values: dict[int, Any] = {}
        self.dims: dict[Any, int] = {}  # symbolic dim -> int
        self.record = record


def evaluate_numpy(mod: IRModule, func_name: str, *args: Any,
                   record: dict | None = None) -> Any:
    """Run Relax function ``func_name`` of ``mod`` on numpy arrays (or NDArrays); returns numpy
    arrays (tuples for tuple results). ``record``, when given, receives ``{Var: value}`` for
    every variable the function binds (to compare other executors binding by binding)."""
    import workbench.relax.op  # noqa: F401  (every family registers its numpy rule)
    func = mod[func_name]
    if not isinstance(func, Function):
        raise TypeError(f"evaluate_numpy: {func_name!r} is a {type(func).__name__}, not a "
                        "Relax function")
    return _call_function(mod, func, func_name, [_as_numpy(a) for a in args], record)


def _as_numpy(v: Any) -> Any:
    if isinstance(v, (tuple, list)):
        return tuple(_as_numpy(x) for x in v)
    if hasattr(v, "numpy") and not isinstance(v, np.ndarray):
        return v.numpy()
    return np.asarray(v) if not isinstance(v, np.ndarray) else v


def _call_function(mod: IRModule, func: Function, name: str, args: list[Any],
                   record: dict | None = None) -> Any:
    if len(args) != len(func.params):
        raise TypeError(f"{name}: expects {len(func.params)} arguments "
                        f"({', '.join(p.name_hint for p in func.params)}), got {len(args)}")
    env = _Env(mod, record)
    for p, a in zip(func.params, args):
        analysis.match_value(p.struct_info, a, env.dims, f"{name}: argument {p.name_hint!r}")
        env.values[id(p)] = a
    out = _eval(env, func.body)
    if func.ret_struct_info is not None:
        analysis.match_value(func.ret_struct_info, out, env.dims, f"{name}: the return value")
    return out


def _eval(env: _Env, e: Any) -> Any:
    rule = _EVAL.lookup(type(e))
    if rule is None:
        raise NotImplementedError(f"evaluate_numpy: cannot evaluate {type(e).__name__}")
    return rule(env, e)


def _seq(env: _Env, s: SeqExpr) -> Any:
    for block in s.blocks:
        for b in block.bindings:
            value = _eval(env, b.value)
            si = b.struct_info if isinstance(b, MatchCast) else b.var.struct_info
            what = f"binding {b.var.name_hint!r} = {_describe(b.value)}"
            if si is not None:
                analysis.match_value(si, value, env.dims, what)
            env.values[id(b.var)] = value
            if env.record is not None:
                env.record[b.var] = value
    return _eval(env, s.body)


def _describe(e: Any) -> str:
    if isinstance(e, Call) and isinstance(e.op, Op):
        return e.op.name
    return type(e).__name__


def _var(env: _Env, v: Var) -> Any:
    try:
        return env.values[id(v)]
    except KeyError:
        raise NameError(f"evaluate_numpy: variable {v.name_hint!r} is used before it is "
                        "bound") from None


def _call(env: _Env, c: Call) -> Any:
    op = c.op
    if isinstance(op, Op):
        if op.name in ("relax.call_tir", "relax.call_tir_inplace"):
            return _call_tir(env, c)
        if op.name == "relax.call_dps_packed":
            return _call_dps_packed(env, c)
        if op.name == "relax.call_pure_packed":
            return _call_pure_packed(env, c)
        impl = NUMPY_RULES.get(op.name)
        if impl is None:
            raise NotImplementedError(f"evaluate_numpy: op {op.name} has no numpy rule")
        return impl(*[_eval(env, a) for a in c.args], **dict(c.attrs))
    if isinstance(op, GlobalVar):
        callee = env.mod[op]
        args = [_eval(env, a) for a in c.args]
        if isinstance(callee, Function):
            return _call_function(env.mod, callee, op.name_hint, args)
        raise NotImplementedError(f"evaluate_numpy: cannot call {type(callee).__name__} "
                                  f"{op.name_hint!r} directly (use call_tir)")
    if isinstance(op, Var):
        callee = _var(env, op)
        if isinstance(callee, _Closure):
            return _call_function(env.mod, callee.func, op.name_hint,
                                  [_eval(env, a) for a in c.args])
    raise NotImplementedError(f"evaluate_numpy: cannot call {type(op).__name__}")


class _Closure:
    """The value of a local function binding (``FuseOpsByPattern(annotate_codegen=True)``'s
    outer functions bind their composite function locally, then call it)."""

    def __init__(self, func: Function):
        self.func = func


def _call_tir(env: _Env, c: Call) -> Any:
    from workbench.relax.op.base import call_tir_parts
    from workbench.tir.interpreter import run
    gvar, inputs, tir_vars, outs = call_tir_parts(c)
    prim = env.mod[gvar]
    ins = [np.ascontiguousarray(v).reshape(np.shape(v)) for v in (_eval(env, a) for a in inputs)]
    inplace = c.attrs.get("inplace_indices", (-1,) * len(outs))
    for i in inplace:
        if i >= 0:  # values are immutable here: the kernel writes a copy
            ins[i] = ins[i].copy()
    fresh = [np.zeros(analysis.eval_dims(o.values, env.dims), dtype=o.dtype)
             for o, i in zip(outs, inplace) if i < 0]
    scalars = [int(v) for v in analysis.eval_dims(tir_vars, env.dims)]
    run(prim, *ins, *fresh, *scalars)
    it = iter(fresh)
    results = [ins[i] if i >= 0 else next(it) for i in inplace]
    return results[0] if len(results) == 1 else tuple(results)


def _call_dps_packed(env: _Env, c: Call) -> Any:
    # The packed function is the user's own code: it runs on NDArrays, as in the VM.
    from workbench.relax.op.base import dps_parts
    from workbench.runtime import empty, get_global_func, tensor
    func, inputs, _, outs = dps_parts(c)
    packed = get_global_func(func.global_symbol)
    ins = [tensor(np.ascontiguousarray(_eval(env, a))) for a in inputs]
    results = [empty(analysis.eval_dims(o.values, env.dims), o.dtype) for o in outs]
    packed(*ins, *results)
    arrays = [r.numpy() for r in results]
    return arrays[0] if len(arrays) == 1 else tuple(arrays)


def _call_pure_packed(env: _Env, c: Call) -> Any:
    from workbench.runtime import get_global_func, tensor
    packed = get_global_func(c.args[0].global_symbol)
    args = [_eval(env, a) for a in c.args[1:]]
    out = packed(*[tensor(np.ascontiguousarray(a)) if isinstance(a, np.ndarray) else a
                   for a in args])
    return _as_numpy(out)


def _if(env: _Env, e: If) -> Any:
    cond = _eval(env, e.cond)
    return _eval(env, e.true_branch if bool(np.asarray(cond)) else e.false_branch)


_EVAL: TypeTable[Callable[[_Env, Any], Any]] = TypeTable({
    SeqExpr: _seq,
    Var: _var,
    Constant: lambda env, c: c.data.numpy(),
    ShapeExpr: lambda env, s: analysis.eval_dims(s.values, env.dims),
    PrimValue: lambda env, p: _prim(env, p),
    StringImm: lambda env, s: s.value,
    Tuple: lambda env, t: tuple(_eval(env, f) for f in t.fields),
    TupleGetItem: lambda env, g: _eval(env, g.tuple_value)[g.index],
    Call: _call,
    If: _if,
    Function: lambda env, f: _Closure(f),
})


def _prim(env: _Env, p: PrimValue) -> Any:
    from workbench.tir.arith.evaluate import evaluate
    return evaluate(p.value, env.dims)


def random_inputs(func: Function, dims: dict[str, int] | None = None, seed: int = 0
                  ) -> list[np.ndarray]:
    """Random float inputs (normal) matching ``func``'s parameters; symbolic dims by name from
    ``dims``. Integer parameters get small non-negative ints."""
    rng = np.random.default_rng(seed)
    env: dict[Any, int] = {}
    out = []
    for p in func.params:
        si = p.struct_info
        if not isinstance(si, TensorStructInfo) or si.values is None:
            raise ValueError(f"random_inputs: parameter {p.name_hint!r} needs a known shape")
        from workbench.relax.struct_info import symbolic_vars
        for v in symbolic_vars(si):
            if v not in env:
                if not dims or v.name not in dims:
                    raise ValueError(f"random_inputs: give a value for symbolic dim {v.name!r}")
                env[v] = dims[v.name]
        shape = analysis.eval_dims(si.values, env)
        if si.dtype.startswith(("int", "uint")):
            out.append(rng.integers(0, 4, size=shape).astype(si.dtype))
        elif si.dtype == "bool":
            out.append(rng.random(shape) < 0.5)
        else:
            out.append(rng.standard_normal(shape).astype(si.dtype))
    return out


__all__ = ["evaluate_numpy", "random_inputs"]

"""PyTorch converters: tuple items, symbolic shape arithmetic, tensor creation, identities
and the assertion / constraint nodes of dynamic programs (no-ops)."""
from __future__ import annotations

import operator
from typing import Any, Sequence

import numpy as np

from workbench.relax import op as R
from workbench.relax.expr import Expr, TupleGetItem
from workbench.relax.frontend.torch._registry import Unavailable, converter
from workbench.relax.frontend.torch._util import const, norm_dim, shape_of, sinfo
from workbench.relax.struct_info import TupleStructInfo
from workbench.tir import op as tir_op
from workbench.tir.expr import IntImm, PrimExpr


@converter("getitem")
def _getitem(imp: Any, node: Any, seq: Any, index: int) -> Any:
    if isinstance(seq, Expr) and isinstance(seq.struct_info, TupleStructInfo):
        return TupleGetItem(seq, index)
    item = seq[index]
    if isinstance(item, Unavailable):
        raise NotImplementedError(f"the model uses {item.what}, which the importer does not "
                                  "compute (inference only)")
    return item


# ---- identities and no-ops --------------------------------------------------------------------

@converter("clone.default", "contiguous.default", "alias.default", "detach.default",
           "detach_.default", "lift_fresh_copy.default", "alias_copy.default",
           "detach_copy.default", "lift_fresh.default")
def _identity(imp: Any, node: Any, x: Any, *args: Any, **kwargs: Any) -> Any:
    return x


@converter("_assert_tensor_metadata.default", "_assert_scalar.default",
           "sym_constrain_range_for_size.default", "sym_constrain_range.default",
           "_assert_async.msg", "_assert_async.default")
def _no_op(imp: Any, node: Any, *args: Any, **kwargs: Any) -> None:
    return None


# ---- symbolic ints --------------------------------------------------------------------------------

def _as_python(e: PrimExpr) -> Any:
    return int(e.value) if isinstance(e, IntImm) else e


@converter("sym_size.int")
def _sym_size(imp: Any, node: Any, x: Expr, dim: int) -> Any:
    shape = shape_of(x)
    return _as_python(shape[norm_dim(dim, len(shape))])


_SYM_BINARY = {
    "add": tir_op.add, "sub": tir_op.sub, "mul": tir_op.mul, "floordiv": tir_op.floordiv,
    "mod": tir_op.floormod,
}
_PY_BINARY = {"add": operator.add, "sub": operator.sub, "mul": operator.mul,
              "floordiv": operator.floordiv, "mod": operator.mod}


def _sym_binary(name: str):
    def convert(imp: Any, node: Any, a: Any, b: Any) -> Any:
        if isinstance(a, int) and isinstance(b, int):
            return _PY_BINARY[name](a, b)
        from workbench.tir.arith.analyzer import Analyzer
        return _as_python(Analyzer().simplify(_SYM_BINARY[name](imp.prim(a), imp.prim(b))))
    return convert


for _name in _SYM_BINARY:
    converter(_name)(_sym_binary(_name))


@converter("eq", "ne", "ge", "gt", "le", "lt")
def _sym_compare(imp: Any, node: Any, a: Any, b: Any) -> Any:
    if isinstance(a, int) and isinstance(b, int):
        return getattr(operator, node.target.__name__)(a, b)
    # Guards torch.export already proved for every allowed size (TVM folds them to True).
    return True


# ---- creation -------------------------------------------------------------------------------------

def _filled(imp: Any, node: Any, shape: Sequence[Any], value: Any) -> Expr:
    dtype = imp.out_dtype(node)
    dims = [imp.prim(d) for d in shape]
    if not dims:
        return const(value, dtype)
    return R.broadcast_to(const(value, dtype), dims)


@converter("full.default")
def _full(imp: Any, node: Any, size: Sequence[Any], fill_value: Any, **kwargs: Any) -> Expr:
    return _filled(imp, node, size, fill_value)


@converter("zeros.default", "empty.memory_format", "new_zeros.default", "new_empty.default")
def _zeros(imp: Any, node: Any, *args: Any, **kwargs: Any) -> Expr:
    size = args[1] if node.target.__name__.startswith("new_") else args[0]
    return _filled(imp, node, size, 0)


@converter("ones.default", "new_ones.default")
def _ones(imp: Any, node: Any, *args: Any, **kwargs: Any) -> Expr:
    size = args[1] if node.target.__name__.startswith("new_") else args[0]
    return _filled(imp, node, size, 1)


@converter("new_full.default")
def _new_full(imp: Any, node: Any, x: Expr, size: Sequence[Any], fill_value: Any,
              **kwargs: Any) -> Expr:
    return _filled(imp, node, size, fill_value)


@converter("empty_strided.default")
def _empty_strided(imp: Any, node: Any, size: Sequence[Any], stride: Sequence[Any],
                   **kwargs: Any) -> Expr:
    """Uninitialised memory in PyTorch; zeros here (the values are never read before a
    write)."""
    return _filled(imp, node, size, 0)


@converter("fill.Scalar", "fill_.Scalar")
def _fill(imp: Any, node: Any, x: Expr, value: Any) -> Expr:
    return _filled(imp, node, shape_of(x), value)


@converter("full_like.default")
def _full_like(imp: Any, node: Any, x: Expr, fill_value: Any, **kwargs: Any) -> Expr:
    return _filled(imp, node, shape_of(x), fill_value)


@converter("zeros_like.default", "empty_like.default")
def _zeros_like(imp: Any, node: Any, x: Expr, **kwargs: Any) -> Expr:
    return _filled(imp, node, shape_of(x), 0)


@converter("ones_like.default")
def _ones_like(imp: Any, node: Any, x: Expr, **kwargs: Any) -> Expr:
    return _filled(imp, node, shape_of(x), 1)


def _arange_check(imp: Any, node: Any) -> str | None:
    if any(hasattr(a, "meta") for a in node.args):
        return "arange with a dynamic length"
    return None


@converter("arange.default", "arange.start", "arange.start_step", check=_arange_check)
def _arange(imp: Any, node: Any, *args: Any, **kwargs: Any) -> Expr:
    bounds = [a for a in args if isinstance(a, (int, float))]
    return const(np.arange(*bounds), imp.out_dtype(node))


@converter("copy.default")
def _copy(imp: Any, node: Any, dst: Expr, src: Expr, non_blocking: bool = False) -> Expr:
    out = R.astype(src, sinfo(dst).dtype) if sinfo(src).dtype != sinfo(dst).dtype else src
    # (dims are PrimExprs: compare their text, `==` on them builds an expression)
    if [str(d) for d in shape_of(dst)] != [str(d) for d in shape_of(src)]:
        out = R.broadcast_to(out, list(shape_of(dst)))
    return out


__all__: list[str] = []

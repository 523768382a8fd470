"""``matmul`` (numpy semantics: batch dims broadcast, 1-d operands promoted) and ``linear``."""
from __future__ import annotations

from typing import Any

import numpy as np

from workbench.relax.expr import Call, Expr
from workbench.relax.op import _infer as I
from workbench.relax.op.registry import def_infer, def_legalize, def_numpy, make_call
from workbench.relax.struct_info import StructInfo, TensorStructInfo


def matmul(x1: Expr, x2: Expr, out_dtype: str | None = None) -> Call:
    """``x1 @ x2`` with numpy's rules (batch dims broadcast; a 1-d operand is a vector)."""
    return make_call("relax.matmul", (x1, x2), {"out_dtype": out_dtype or "void"})


def linear(data: Expr, weight: Expr, bias: Expr | None = None,
           out_dtype: str | None = None) -> Expr:
    """``data @ weight.T + bias`` (PyTorch's ``linear``; ``weight`` is (out, in)).

    Composite, as in TVM: ``matmul(data, permute_dims(weight))`` then ``add``.
    """
    from workbench.relax.op.binary import add
    from workbench.relax.op.manipulate import permute_dims
    out = matmul(data, permute_dims(weight), out_dtype)
    return add(out, bias) if bias is not None else out


def _out_dtype(call: Call, a: TensorStructInfo, b: TensorStructInfo) -> str:
    want = call.attrs.get("out_dtype", "void")
    if want and want != "void":
        return want
    return I.same_dtype(call, [("x1", a), ("x2", b)])


@def_infer("relax.matmul")
def _infer_matmul(call: Call, ctx: Any) -> StructInfo:
    a, b = I.tensor_arg(call, 0, "x1"), I.tensor_arg(call, 1, "x2")
    dtype = _out_dtype(call, a, b)
    if a.ndim == 0 or b.ndim == 0:
        raise I.error(call, f"operands must have rank >= 1, got x1 {I.dims_text(a.values)} and "
                            f"x2 {I.dims_text(b.values)}")
    if a.shape is None or b.shape is None:
        if a.ndim < 0 or b.ndim < 0:
            return TensorStructInfo(None, dtype)
        ndim = max(a.ndim, b.ndim) - (a.ndim == 1) - (b.ndim == 1)
        return TensorStructInfo(None, dtype, max(ndim, 0))
    av, bv = a.values, b.values
    k1 = av[-1]
    k2 = bv[0] if len(bv) == 1 else bv[-2]
    if I.prove_equal(k1, k2) is False:
        raise I.error(call, f"reduction dimensions differ: x1 {I.dims_text(av)} has "
                            f"{I.dim(k1)} columns but x2 {I.dims_text(bv)} has "
                            f"{I.dim(k2)} rows")
    batch_a = TensorStructInfo(av[:-2], a.dtype) if len(av) > 2 else TensorStructInfo((), a.dtype)
    batch_b = TensorStructInfo(bv[:-2], b.dtype) if len(bv) > 2 else TensorStructInfo((), b.dtype)
    try:
        batch = I.broadcast_shapes(call, [("x1's batch dims", batch_a),
                                          ("x2's batch dims", batch_b)])
    except I.OpError:
        raise I.error(call, f"batch dimensions of x1 {I.dims_text(av)} and x2 "
                            f"{I.dims_text(bv)} do not broadcast") from None
    if batch is None:
        ndim = max(len(av), len(bv)) - (len(av) == 1) - (len(bv) == 1)
        return TensorStructInfo(None, dtype, ndim)
    out = list(batch)
    if len(av) > 1:
        out.append(av[-2])
    if len(bv) > 1:
        out.append(bv[-1])
    return I.tensor(out, dtype)


# Operand dtypes whose matmul marks a 2-d right operand layout-free (TVM's
# ``layout_free_placeholders``): the tuner may then pack it into the [.., 16, k] layout the
# int8 / bf16 dot-product intrinsics need (RewriteLayout; a constant is packed once at build).
_PACKED_WEIGHT_DTYPES = ("int8", "uint8", "bfloat16")


def te_matmul(a: Any, b: Any, out_dtype: str) -> Any:
    """The te compute of numpy ``matmul`` (named ``T_matmul``); batch dims broadcast. A 2-d
    int8/uint8/bfloat16 right operand is marked layout-free (a weight the tuner may pack)."""
    from workbench import te
    from workbench.tir import op as tir_op
    from workbench.topi.broadcast import broadcast_shape
    a_nd, b_nd = len(a.shape), len(b.shape)
    a_batch = tuple(a.shape[:-2]) if a_nd > 2 else ()
    b_batch = tuple(b.shape[:-2]) if b_nd > 2 else ()
    batch = tuple(broadcast_shape(a_batch, b_batch, what="matmul")) if (a_batch or b_batch) \
        else ()
    out_shape = list(batch) + ([a.shape[-2]] if a_nd > 1 else []) + \
        ([b.shape[-1]] if b_nd > 1 else [])
    k = te.reduce_axis((0, a.shape[-1]), name="k")

    def batch_index(own: tuple, idx: tuple) -> list:
        off = len(batch) - len(own)
        # A unit batch dim stretched by the other operand reads its only element.
        return [tir_op.const(0, idx[off + d].dtype)
                if _is_one(own[d]) and not _is_one(batch[off + d]) else idx[off + d]
                for d in range(len(own))]

    def f(*idx: Any) -> Any:
        bidx, rest = idx[:len(batch)], list(idx[len(batch):])
        ai = batch_index(a_batch, bidx) + ([rest.pop(0)] if a_nd > 1 else []) + [k]
        bi = batch_index(b_batch, bidx) + [k] + ([rest.pop(0)] if b_nd > 1 else [])
        return te.sum(tir_op.cast(out_dtype, a[tuple(ai)]) * tir_op.cast(out_dtype, b[tuple(bi)]),
                      axis=k)
    attrs = {"layout_free_placeholders": [b]} \
        if b_nd == 2 and b.dtype in _PACKED_WEIGHT_DTYPES else None
    return te.compute(tuple(out_shape), f, name="T_matmul", attrs=attrs)


def _is_one(d: Any) -> bool:
    return getattr(d, "value", None) == 1


@def_legalize("relax.matmul")
def _legalize_matmul(bb: Any, call: Call) -> Expr:
    dtype = call.struct_info.dtype
    return bb.call_te(te_matmul, call.args[0], call.args[1], dtype, primfunc_name_hint="matmul")


@def_numpy("relax.matmul")
def _numpy_matmul(a: np.ndarray, b: np.ndarray, out_dtype: str = "void") -> np.ndarray:
    dtype = a.dtype if out_dtype in ("", "void") else out_dtype
    return np.matmul(a.astype(dtype), b.astype(dtype)).astype(dtype)


__all__ = ["matmul", "linear", "te_matmul"]

"""Matrix products: ``matmul`` (with transpose flags), ``dense`` and ``batch_matmul`` (TVM's
``topi.nn`` signatures).

Operands are cast to ``out_dtype`` (default: the input dtype) before multiplying, so int8
inputs can accumulate in int32. Weights are marked ``layout_free_placeholders`` as in TVM, so
a tuner may change their layout ahead of time.
"""
from __future__ import annotations

from workbench import te
from workbench.te.tensor import Tensor
from workbench.tir import op
from workbench.tir.expr import IntImm, PrimExpr
from workbench.topi.broadcast import add
from workbench.topi.utils import shape_str


def _check_extent(a: PrimExpr, b: PrimExpr, what: str) -> None:
    if isinstance(a, IntImm) and isinstance(b, IntImm) and a.value != b.value:
        raise ValueError(f"{what}: reduction extents differ ({a.value} vs {b.value})")


def matmul(tensor_a: Tensor, tensor_b: Tensor, bias: Tensor | None = None,
           out_dtype: str | None = None, transpose_a: bool = False,
           transpose_b: bool = False) -> Tensor:
    """``op(A) @ op(B) (+ bias)`` for 2-d ``A``, ``B``; ``op`` transposes when its flag is set.

    Named ``T_matmul_NN`` / ``_NT`` / ``_TN`` / ``_TT`` after the flags, as in TVM.
    """
    if tensor_a.ndim != 2 or tensor_b.ndim != 2:
        raise ValueError(f"matmul: expects 2-d tensors, got {shape_str(tensor_a.shape)} and "
                         f"{shape_str(tensor_b.shape)}")
    out_dtype = out_dtype or tensor_a.dtype
    m, ka = (tensor_a.shape[1], tensor_a.shape[0]) if transpose_a else tensor_a.shape
    kb, n = (tensor_b.shape[1], tensor_b.shape[0]) if transpose_b else tensor_b.shape
    _check_extent(ka, kb, "matmul")
    k = te.reduce_axis((0, ka), name="k")

    def f(i: PrimExpr, j: PrimExpr) -> PrimExpr:
        a = tensor_a[k, i] if transpose_a else tensor_a[i, k]
        b = tensor_b[j, k] if transpose_b else tensor_b[k, j]
        return te.sum(op.cast(out_dtype, a) * op.cast(out_dtype, b), axis=k)
    flags = ("T" if transpose_a else "N") + ("T" if transpose_b else "N")
    out = te.compute((m, n), f, name=f"T_matmul_{flags}", tag="matmul",
                     attrs={"layout_free_placeholders": [tensor_b]})
    return add(out, bias) if bias is not None else out


def dense(data: Tensor, weight: Tensor, bias: Tensor | None = None,
          out_dtype: str | None = None) -> Tensor:
    """``data @ weight.T (+ bias)``: ``data`` is (batch, in), ``weight`` is (out, in)."""
    return matmul(data, weight, bias, out_dtype, transpose_a=False, transpose_b=True)


def batch_matmul(tensor_a: Tensor, tensor_b: Tensor, oshape=None, out_dtype: str | None = None,
                 transpose_a: bool = False, transpose_b: bool = True) -> Tensor:
    """Batched ``op(A[b]) @ op(B[b])`` for 3-d tensors; a batch of 1 broadcasts.

    TVM's defaults: ``transpose_b=True`` (B is (batch, N, K)). Named ``T_batch_matmul_<flags>``.
    """
    if tensor_a.ndim != 3 or tensor_b.ndim != 3:
        raise ValueError(f"batch_matmul: expects 3-d tensors, got {shape_str(tensor_a.shape)} "
                         f"and {shape_str(tensor_b.shape)}")
    if oshape is not None:
        raise NotImplementedError("batch_matmul: oshape is not supported")
    out_dtype = out_dtype or tensor_a.dtype
    ba, bb = tensor_a.shape[0], tensor_b.shape[0]
    m, ka = (tensor_a.shape[2], tensor_a.shape[1]) if transpose_a else tensor_a.shape[1:]
    kb, n = (tensor_b.shape[2], tensor_b.shape[1]) if transpose_b else tensor_b.shape[1:]
    _check_extent(ka, kb, "batch_matmul")
    if isinstance(ba, IntImm) and isinstance(bb, IntImm):
        if ba.value != bb.value and 1 not in (ba.value, bb.value):
            raise ValueError(f"batch_matmul: batch sizes {ba.value} and {bb.value} differ")
        batch = ba if ba.value != 1 else bb
    else:
        batch = ba
    a_one = isinstance(ba, IntImm) and ba.value == 1
    b_one = isinstance(bb, IntImm) and bb.value == 1
    k = te.reduce_axis((0, ka), name="k")

    def f(b: PrimExpr, i: PrimExpr, j: PrimExpr) -> PrimExpr:
        x = 0 if a_one else b
        y = 0 if b_one else b
        av = tensor_a[x, k, i] if transpose_a else tensor_a[x, i, k]
        bv = tensor_b[y, j, k] if transpose_b else tensor_b[y, k, j]
        return te.sum(op.cast(out_dtype, av) * op.cast(out_dtype, bv), axis=k)
    flags = ("T" if transpose_a else "N") + ("T" if transpose_b else "N")
    return te.compute((batch, m, n), f, name=f"T_batch_matmul_{flags}", tag="batch_matmul")

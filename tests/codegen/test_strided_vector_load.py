"""Vector loads with a small constant stride (pooling, strided convolution) are one
contiguous load of the spanned elements and a shuffle; larger strides stay a gather."""
import numpy as np
import pytest

import workbench as wb
from workbench import tir
from workbench.tir import stmt as S


def _strided(rows: int, lanes: int, stride: int, dtype: str = "float32") -> tir.PrimFunc:
    """``B[r, j] = A[r * row + j * stride] + 1`` with ``j`` vectorized; ``A`` holds exactly the
    elements read (the last lane of the last row is its last element)."""
    row = (lanes - 1) * stride + 1
    A = tir.decl_buffer((rows * row,), dtype, "A")
    B = tir.decl_buffer((rows * lanes,), dtype, "B")
    r, j = tir.Var("r"), tir.Var("j")
    body = S.BufferStore(B, A[r * row + j * stride] + tir.const(1, dtype), (r * lanes + j,))
    loop = S.For(r, tir.const(0), tir.const(rows), "serial",
                 S.For(j, tir.const(0), tir.const(lanes), "vectorized", body))
    return tir.prim_func([A, B], loop)


@pytest.mark.parametrize("stride", [2, 3, 4, 7])
@pytest.mark.parametrize("lanes", [4, 16, 28])
@pytest.mark.parametrize("dtype", ["float32", "int32", "float64"])
def test_strided_vector_load_matches_numpy(stride, lanes, dtype):
    rows = 5
    rt = wb.build(_strided(rows, lanes, stride, dtype))
    row = (lanes - 1) * stride + 1
    a = (np.arange(rows * row) * 3 - 7).astype(dtype)
    b = wb.nd.empty((rows * lanes,), dtype)
    rt["main"](wb.nd.array(a), b)
    want = a.reshape(rows, row)[:, ::stride] + 1
    np.testing.assert_array_equal(b.numpy().reshape(rows, lanes), want)
    ll = rt.get_source("ll")
    one_wide_load = f"load <{row} x " in ll
    assert one_wide_load == (stride <= 4)

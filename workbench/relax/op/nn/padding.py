"""``relax.nn.pad``: pad every dimension of a tensor with a constant or with its own border
elements (TVM's ``relax.op.nn.pad``; modes "constant", "edge", "reflect", "wrap")."""
from __future__ import annotations

from typing import Any, Sequence

import numpy as np

from workbench.relax.expr import Call, Expr
from workbench.relax.op import _infer as I
from workbench.relax.op.registry import def_infer, def_legalize, def_numpy, make_call
from workbench.relax.struct_info import StructInfo, TensorStructInfo
from workbench.tir import op as tir_op
from workbench.tir.expr import IntImm

_MODES = ("constant", "edge", "reflect", "wrap")


def pad(data: Expr, pad_width: Sequence[Sequence[int]], pad_mode: str = "constant",
        pad_value: float = 0.0) -> Call:
    """``data`` with ``pad_width[d] = (before, after)`` (>= 0) elements added around dimension
    ``d``: ``pad_value`` in "constant" mode, else the data's border repeated ("edge"), mirrored
    without repeating the border ("reflect", pads smaller than the dimension) or the data
    repeated cyclically ("wrap") -- numpy's ``np.pad`` modes of those names."""
    if pad_mode not in _MODES:
        raise ValueError(f"pad: pad_mode must be one of {_MODES}, got {pad_mode!r}")
    width = tuple((int(b), int(a)) for b, a in pad_width)
    if any(b < 0 or a < 0 for b, a in width):
        raise ValueError(f"pad: pad_width entries must be >= 0, got {width}")
    return make_call("relax.nn.pad", (data,), {"pad_width": width, "pad_mode": pad_mode,
                                               "pad_value": float(pad_value)})


@def_infer("relax.nn.pad")
def _infer_pad(call: Call, ctx: Any) -> StructInfo:
    x = I.tensor_arg(call, 0, "data")
    width = call.attrs["pad_width"]
    if x.ndim not in (-1, len(width)):
        raise I.error(call, f"pad_width has {len(width)} (before, after) pairs for data "
                            f"{I.dims_text(x.values)}")
    if x.shape is None:
        return TensorStructInfo(None, x.dtype, len(width))
    mode = call.attrs["pad_mode"]
    out = []
    for d, (size, (b, a)) in enumerate(zip(x.values, width)):
        n = I.const_int(size)
        if mode == "reflect" and n is not None and max(b, a) >= n and (b or a):
            raise I.error(call, f"reflect padding ({b}, {a}) of dimension {d} needs pads "
                                f"smaller than its size {n}")
        if mode in ("edge", "wrap") and n == 0 and (b or a):
            raise I.error(call, f"{mode} padding of the empty dimension {d}")
        out.append(tir_op.add(size, IntImm("int64", b + a)) if b or a else size)
    return TensorStructInfo(tuple(out), x.dtype)


@def_legalize("relax.nn.pad")
def _legalize_pad(bb: Any, call: Call) -> Expr:
    from workbench.topi.nn import pad_mode
    a = call.attrs
    before = [b for b, _ in a["pad_width"]]
    after = [e for _, e in a["pad_width"]]
    return bb.call_te(pad_mode, call.args[0], before, after, a["pad_mode"], a["pad_value"],
                      primfunc_name_hint="pad")


@def_numpy("relax.nn.pad")
def _numpy_pad(x: np.ndarray, pad_width: tuple, pad_mode: str, pad_value: float,
               **_: Any) -> np.ndarray:
    if pad_mode == "constant":
        return np.pad(x, pad_width, mode="constant",
                      constant_values=np.asarray(pad_value).astype(x.dtype))
    return np.pad(x, pad_width, mode=pad_mode)


__all__ = ["pad"]

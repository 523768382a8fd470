"""Gathers and scatters by index tensors: ``gather_elements``, ``gather_nd``,
``scatter_elements``, ``scatter_nd`` (TVM's ``relax.op`` names and attributes; indices may be
negative, counting from the end; a scatter's ``reduction`` is "update" -- the last update
landing on an element wins -- or "add", "mul", "max", "min")."""
from __future__ import annotations

from typing import Any

import numpy as np

from workbench.relax.expr import Call, Expr
from workbench.relax.op import _infer as I
from workbench.relax.op.registry import def_infer, def_legalize, def_numpy, make_call
from workbench.relax.struct_info import StructInfo, TensorStructInfo

_REDUCTIONS = ("update", "add", "mul", "max", "min")


def gather_elements(data: Expr, indices: Expr, axis: int = 0) -> Call:
    """``out[i] = data[i with i[axis] = indices[i]]``: the indices' shape, ``data``'s dtype."""
    return make_call("relax.gather_elements", (data, indices), {"axis": int(axis)})


def gather_nd(data: Expr, indices: Expr, batch_dims: int = 0) -> Call:
    """Slices of ``data`` addressed by the last dimension of ``indices`` (ONNX GatherND)."""
    return make_call("relax.gather_nd", (data, indices), {"batch_dims": int(batch_dims)})


def _reduction(name: str, reduction: str) -> str:
    if reduction not in _REDUCTIONS:
        raise ValueError(f"{name}: reduction must be one of {_REDUCTIONS}, got {reduction!r}")
    return reduction


def scatter_elements(data: Expr, indices: Expr, updates: Expr, axis: int = 0,
                     reduction: str = "update") -> Call:
    """``data`` with ``updates[j]`` written at ``j with j[axis] = indices[j]``."""
    return make_call("relax.scatter_elements", (data, indices, updates),
                     {"axis": int(axis), "reduction": _reduction("scatter_elements",
                                                                 reduction)})


def scatter_nd(data: Expr, indices: Expr, updates: Expr, reduction: str = "update") -> Call:
    """``data`` with the slices ``indices[m, :]`` written from ``updates[m, ...]``."""
    return make_call("relax.scatter_nd", (data, indices, updates),
                     {"reduction": _reduction("scatter_nd", reduction)})


def _int_indices(call: Call, idx: TensorStructInfo) -> None:
    if idx.dtype and not idx.dtype.startswith(("int", "uint")):
        raise I.error(call, f"indices must be an integer tensor, got dtype {idx.dtype}")


@def_infer("relax.gather_elements")
def _infer_gather_elements(call: Call, ctx: Any) -> StructInfo:
    x, idx = I.tensor_arg(call, 0, "data"), I.tensor_arg(call, 1, "indices")
    _int_indices(call, idx)
    if x.ndim != -1 and idx.ndim != -1 and x.ndim != idx.ndim:
        raise I.error(call, f"data {I.dims_text(x.values)} and indices "
                            f"{I.dims_text(idx.values)} must have the same rank")
    I.norm_axis(call, call.attrs["axis"], max(x.ndim, 1))
    return TensorStructInfo(idx.shape, x.dtype, idx.ndim)


@def_infer("relax.gather_nd")
def _infer_gather_nd(call: Call, ctx: Any) -> StructInfo:
    x, idx = I.tensor_arg(call, 0, "data"), I.tensor_arg(call, 1, "indices")
    _int_indices(call, idx)
    if x.shape is None or idx.shape is None:
        return TensorStructInfo(None, x.dtype)
    k = I.const_int(idx.values[-1])
    b = call.attrs["batch_dims"]
    if k is None:
        raise I.error(call, "the last dimension of indices must be static")
    if b + k > x.ndim:
        raise I.error(call, f"indices {I.dims_text(idx.values)} address {k} dims after "
                            f"{b} batch dims of data {I.dims_text(x.values)}")
    return TensorStructInfo(tuple(idx.values[:-1]) + tuple(x.values[b + k:]), x.dtype)


def _infer_scatter(call: Call, ctx: Any) -> StructInfo:
    x, idx = I.tensor_arg(call, 0, "data"), I.tensor_arg(call, 1, "indices")
    upd = I.tensor_arg(call, 2, "updates")
    _int_indices(call, idx)
    if x.dtype and upd.dtype and x.dtype != upd.dtype:
        raise I.error(call, f"updates ({upd.dtype}) must have data's dtype ({x.dtype})")
    return x


def_infer("relax.scatter_elements")(_infer_scatter)
def_infer("relax.scatter_nd")(_infer_scatter)


def _topi_reduction(r: str) -> str:
    return "none" if r == "update" else r


@def_legalize("relax.gather_elements")
def _legalize_gather_elements(bb: Any, call: Call) -> Expr:
    from workbench.topi.scatter import gather
    return bb.call_te(gather, call.args[0], call.attrs["axis"], call.args[1],
                      primfunc_name_hint="gather_elements")


@def_legalize("relax.gather_nd")
def _legalize_gather_nd(bb: Any, call: Call) -> Expr:
    from workbench.topi.scatter import gather_nd as te_gather_nd
    return bb.call_te(te_gather_nd, call.args[0], call.args[1], call.attrs["batch_dims"],
                      primfunc_name_hint="gather_nd")


@def_legalize("relax.scatter_elements")
def _legalize_scatter_elements(bb: Any, call: Call) -> Expr:
    from workbench.topi.scatter import scatter_elements as te_scatter
    return bb.call_te(te_scatter, *call.args, call.attrs["axis"],
                      _topi_reduction(call.attrs["reduction"]),
                      primfunc_name_hint="scatter_elements")


@def_legalize("relax.scatter_nd")
def _legalize_scatter_nd(bb: Any, call: Call) -> Expr:
    from workbench.topi.scatter import scatter_nd as te_scatter_nd
    return bb.call_te(te_scatter_nd, *call.args, _topi_reduction(call.attrs["reduction"]),
                      primfunc_name_hint="scatter_nd")


# ---- numpy ------------------------------------------------------------------------------------

def _wrapped(idx: np.ndarray, n: Any) -> np.ndarray:
    idx = idx.astype(np.int64)
    return np.where(idx < 0, idx + n, idx)


@def_numpy("relax.gather_elements")
def _numpy_gather_elements(x: np.ndarray, idx: np.ndarray, axis: int) -> np.ndarray:
    return np.take_along_axis(x, _wrapped(idx, x.shape[axis]), axis=axis)


@def_numpy("relax.gather_nd")
def _numpy_gather_nd(x: np.ndarray, idx: np.ndarray, batch_dims: int) -> np.ndarray:
    b, k = batch_dims, idx.shape[-1]
    out = np.empty(idx.shape[:-1] + x.shape[b + k:], x.dtype)
    for pos in np.ndindex(*idx.shape[:-1]):
        where = tuple(int(v) % x.shape[b + c] for c, v in enumerate(idx[pos]))
        out[pos] = x[pos[:b] + where]
    return out


_NP_COMBINE = {"update": lambda a, b: b, "add": np.add, "mul": np.multiply,
               "max": np.maximum, "min": np.minimum}


@def_numpy("relax.scatter_elements")
def _numpy_scatter_elements(x: np.ndarray, idx: np.ndarray, upd: np.ndarray, axis: int,
                            reduction: str) -> np.ndarray:
    out = x.copy()
    for pos in np.ndindex(*idx.shape):
        target = list(pos)
        target[axis] = int(idx[pos]) % x.shape[axis]
        t = tuple(target)
        out[t] = _NP_COMBINE[reduction](out[t], upd[pos])
    return out


@def_numpy("relax.scatter_nd")
def _numpy_scatter_nd(x: np.ndarray, idx: np.ndarray, upd: np.ndarray,
                      reduction: str) -> np.ndarray:
    out = x.copy()
    for pos in np.ndindex(*idx.shape[:-1]):
        t = tuple(int(v) % x.shape[c] for c, v in enumerate(idx[pos]))
        out[t] = _NP_COMBINE[reduction](out[t], upd[pos])
    return out


__all__ = ["gather_elements", "gather_nd", "scatter_elements", "scatter_nd"]

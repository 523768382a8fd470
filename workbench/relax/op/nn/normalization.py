"""Normalisation: layer_norm, batch_norm (inference), rms_norm."""
from __future__ import annotations

from typing import Any, Sequence

import numpy as np

from workbench.relax.expr import Call, Expr, Tuple
from workbench.relax.op import _infer as I
from workbench.relax.op.registry import def_infer, def_legalize, def_numpy, make_call
from workbench.relax.struct_info import StructInfo, TensorStructInfo, TupleStructInfo


def _axes(axes: int | Sequence[int]) -> tuple[int, ...]:
    return (int(axes),) if isinstance(axes, int) else tuple(int(a) for a in axes)


def layer_norm(data: Expr, gamma: Expr, beta: Expr, axes: int | Sequence[int],
               epsilon: float = 1e-5, center: bool = True, scale: bool = True) -> Call:
    """``(x - mean) / sqrt(var + epsilon) * gamma + beta`` over ``axes``; ``gamma`` and
    ``beta`` have the shape of those axes (``center``/``scale`` False skip beta/gamma)."""
    return make_call("relax.nn.layer_norm", (data, gamma, beta),
                     {"axes": _axes(axes), "epsilon": float(epsilon), "center": bool(center),
                      "scale": bool(scale)})


def rms_norm(data: Expr, weight: Expr, axes: int | Sequence[int] = -1,
             epsilon: float = 1e-5) -> Call:
    """``x / sqrt(mean(x^2) + epsilon) * weight`` over ``axes``."""
    return make_call("relax.nn.rms_norm", (data, weight),
                     {"axes": _axes(axes), "epsilon": float(epsilon)})


def batch_norm(data: Expr, gamma: Expr, beta: Expr, moving_mean: Expr, moving_var: Expr,
               axis: int, epsilon: float = 1e-5, center: bool = True, scale: bool = True,
               momentum: float = 0.1, training: bool = False) -> Call:
    """Batch normalisation along channel ``axis`` with the moving statistics (inference).

    Returns a tuple ``(output, moving_mean, moving_var)`` as TVM does; take ``[0]``.
    """
    if training:
        raise NotImplementedError("batch_norm: training=True is not supported (inference only)")
    return make_call("relax.nn.batch_norm", (data, gamma, beta, moving_mean, moving_var),
                     {"axis": int(axis), "epsilon": float(epsilon), "center": bool(center),
                      "scale": bool(scale), "momentum": float(momentum), "training": False})


def _check_param(call: Call, i: int, name: str, data: TensorStructInfo,
                 expected: Sequence[Any]) -> TensorStructInfo:
    p = I.tensor_arg(call, i, name)
    if data.dtype and p.dtype and p.dtype != data.dtype:
        raise I.error(call, f"{name} has dtype {p.dtype} but data has {data.dtype}")
    if p.shape is None or expected is None:
        return p
    ok = len(p.values) == len(expected) and all(
        I.prove_equal(a, b) is not False for a, b in zip(p.values, expected))
    if not ok:
        raise I.error(call, f"{name} {I.dims_text(p.values)} must have shape "
                            f"{I.dims_text(tuple(expected))} (data {I.dims_text(data.values)})")
    return p


def _norm_infer(names: Sequence[str]):
    def infer(call: Call, ctx: Any) -> StructInfo:
        x = I.tensor_arg(call, 0, "data")
        if x.dtype and not x.dtype.startswith(("float", "bfloat")):
            raise I.error(call, f"requires a float tensor, got data of dtype {x.dtype}")
        if x.ndim < 0:
            return x
        axes = I.norm_axes(call, call.attrs["axes"], x.ndim, "axes")
        expected = None if x.shape is None else [x.values[d] for d in axes]
        for i, name in enumerate(names, 1):
            _check_param(call, i, name, x, expected)
        return x
    return infer


def_infer("relax.nn.layer_norm")(_norm_infer(["gamma", "beta"]))
def_infer("relax.nn.rms_norm")(_norm_infer(["weight"]))


@def_infer("relax.nn.batch_norm")
def _infer_batch_norm(call: Call, ctx: Any) -> StructInfo:
    x = I.tensor_arg(call, 0, "data")
    if x.ndim < 0:
        raise I.error(call, "the rank of data must be known")
    axis = I.norm_axis(call, call.attrs["axis"], x.ndim)
    expected = None if x.shape is None else [x.values[axis]]
    params = [_check_param(call, i, name, x, expected) for i, name in
              enumerate(["gamma", "beta", "moving_mean", "moving_var"], 1)]
    return TupleStructInfo((x, params[2], params[3]))


@def_legalize("relax.nn.layer_norm")
def _legalize_layer_norm(bb: Any, call: Call) -> Expr:
    from workbench.topi.nn import layer_norm as te_layer_norm
    a = call.attrs

    def kernel(x: Any, gamma: Any, beta: Any) -> Any:
        return te_layer_norm(x, gamma if a["scale"] else None, beta if a["center"] else None,
                             list(a["axes"]), a["epsilon"])
    return bb.call_te(kernel, *call.args, primfunc_name_hint="layer_norm")


@def_legalize("relax.nn.rms_norm")
def _legalize_rms_norm(bb: Any, call: Call) -> Expr:
    from workbench.topi.nn.relax_extras import rms_norm as te_rms_norm
    return bb.call_te(te_rms_norm, call.args[0], call.args[1], list(call.attrs["axes"]),
                      call.attrs["epsilon"], primfunc_name_hint="rms_norm")


@def_legalize("relax.nn.batch_norm")
def _legalize_batch_norm(bb: Any, call: Call) -> Expr:
    from workbench.topi.nn.relax_extras import batch_norm_inference
    a = call.attrs
    data, gamma, beta, mean, var = call.args

    def kernel(x: Any, g: Any, b: Any, m: Any, v: Any) -> Any:
        return batch_norm_inference(x, g if a["scale"] else None, b if a["center"] else None,
                                    m, v, a["axis"], a["epsilon"])
    out = bb.call_te(kernel, data, gamma, beta, mean, var, primfunc_name_hint="batch_norm")
    # Inference mode: the statistics pass through unchanged, as TVM's legalization does.
    return Tuple((out, mean, var))


def _stats_shape(x: np.ndarray, axes: tuple) -> tuple:
    return tuple(x.shape[d] if d % x.ndim in {a % x.ndim for a in axes} else 1
                 for d in range(x.ndim))


@def_numpy("relax.nn.layer_norm")
def _numpy_layer_norm(x: np.ndarray, gamma: np.ndarray, beta: np.ndarray, axes: tuple,
                      epsilon: float, center: bool = True, scale: bool = True) -> np.ndarray:
    axes_n = tuple(a % x.ndim for a in axes)
    x64 = x.astype("float64")
    mean = x64.mean(axis=axes_n, keepdims=True)
    var = x64.var(axis=axes_n, keepdims=True)
    y = (x64 - mean) / np.sqrt(var + epsilon)
    shape = _stats_shape(x, axes_n)
    if scale:
        y = y * gamma.reshape(shape)
    if center:
        y = y + beta.reshape(shape)
    return y.astype(x.dtype)


@def_numpy("relax.nn.rms_norm")
def _numpy_rms_norm(x: np.ndarray, weight: np.ndarray, axes: tuple,
                    epsilon: float) -> np.ndarray:
    axes_n = tuple(a % x.ndim for a in axes)
    x64 = x.astype("float64")
    ms = (x64 * x64).mean(axis=axes_n, keepdims=True)
    return (x64 / np.sqrt(ms + epsilon) * weight.reshape(_stats_shape(x, axes_n))).astype(x.dtype)


@def_numpy("relax.nn.batch_norm")
def _numpy_batch_norm(x: np.ndarray, gamma: np.ndarray, beta: np.ndarray, mean: np.ndarray,
                      var: np.ndarray, axis: int, epsilon: float, center: bool = True,
                      scale: bool = True, **_: Any) -> tuple:
    shape = [1] * x.ndim
    shape[axis % x.ndim] = -1
    y = (x.astype("float64") - mean.reshape(shape)) / np.sqrt(var.reshape(shape) + epsilon)
    if scale:
        y = y * gamma.reshape(shape)
    if center:
        y = y + beta.reshape(shape)
    return (y.astype(x.dtype), mean, var)


__all__ = ["layer_norm", "rms_norm", "batch_norm"]

"""Activations: relu, gelu (erf and tanh forms), silu, leaky_relu, softmax, log_softmax."""
from __future__ import annotations

import math
from typing import Any, Callable

import numpy as np

from workbench.relax.expr import Call, Expr
from workbench.relax.op import _infer as I
from workbench.relax.op.registry import def_infer, def_legalize, def_numpy, make_call
from workbench.relax.struct_info import StructInfo

_erf = np.vectorize(math.erf, otypes=[np.float64])


def _float_same(call: Call, ctx: Any) -> StructInfo:
    x = I.tensor_arg(call, 0, "data")
    if x.dtype and not x.dtype.startswith(("float", "bfloat")):
        raise I.error(call, f"requires a float tensor, got data of dtype {x.dtype}")
    return x


def _softmax_infer(call: Call, ctx: Any) -> StructInfo:
    x = _float_same(call, ctx)
    if x.ndim >= 0:
        I.norm_axis(call, call.attrs["axis"], x.ndim)
    return x


def relu(data: Expr) -> Call:
    """``max(data, 0)``."""
    return make_call("relax.nn.relu", (data,))


def gelu(data: Expr) -> Call:
    """GELU with erf: ``0.5 x (1 + erf(x / sqrt 2))``."""
    return make_call("relax.nn.gelu", (data,))


def gelu_tanh(data: Expr) -> Call:
    """GELU, tanh approximation."""
    return make_call("relax.nn.gelu_tanh", (data,))


def silu(data: Expr) -> Call:
    """``x * sigmoid(x)``."""
    return make_call("relax.nn.silu", (data,))


def leaky_relu(data: Expr, alpha: float = 0.01) -> Call:
    """``x`` where positive, else ``alpha * x``."""
    return make_call("relax.nn.leaky_relu", (data,), {"alpha": float(alpha)})


def softmax(data: Expr, axis: int = -1) -> Call:
    """``exp(x) / sum(exp(x))`` along ``axis``."""
    return make_call("relax.nn.softmax", (data,), {"axis": int(axis)})


def log_softmax(data: Expr, axis: int = -1) -> Call:
    """``log(softmax(x))`` along ``axis``, computed stably."""
    return make_call("relax.nn.log_softmax", (data,), {"axis": int(axis)})


def _np_gelu(x: np.ndarray) -> np.ndarray:
    return (0.5 * x * (1.0 + _erf(x / math.sqrt(2.0)))).astype(x.dtype)


def _np_gelu_tanh(x: np.ndarray) -> np.ndarray:
    inner = math.sqrt(2.0 / math.pi) * (x + 0.044715 * x ** 3)
    return (0.5 * x * (1.0 + np.tanh(inner))).astype(x.dtype)


def _np_softmax(x: np.ndarray, axis: int = -1) -> np.ndarray:
    e = np.exp(x - x.max(axis=axis, keepdims=True))
    return (e / e.sum(axis=axis, keepdims=True)).astype(x.dtype)


def _np_log_softmax(x: np.ndarray, axis: int = -1) -> np.ndarray:
    s = x - x.max(axis=axis, keepdims=True)
    return (s - np.log(np.exp(s).sum(axis=axis, keepdims=True))).astype(x.dtype)


def _te(name: str) -> Callable:
    def get(*args: Any, **kwargs: Any) -> Any:
        from workbench.topi import nn as topi_nn
        return getattr(topi_nn, name)(*args, **kwargs)
    get.__name__ = name
    return get


# op -> (infer rule, legalize(bb, call), numpy implementation)
_RULES: dict[str, tuple[Callable, Callable, Callable]] = {
    "relu": (lambda c, ctx: I.tensor_arg(c, 0, "data"),
             lambda bb, c: bb.call_te(_te("relu"), c.args[0], primfunc_name_hint="relu"),
             lambda x: np.maximum(x, 0).astype(x.dtype)),
    "gelu": (_float_same,
             lambda bb, c: bb.call_te(_te("gelu"), c.args[0], primfunc_name_hint="gelu"),
             _np_gelu),
    "gelu_tanh": (_float_same,
                  lambda bb, c: bb.call_te(_te("gelu"), c.args[0], approximate="tanh",
                                           primfunc_name_hint="gelu_tanh"),
                  _np_gelu_tanh),
    "silu": (_float_same,
             lambda bb, c: bb.call_te(_te("silu"), c.args[0], primfunc_name_hint="silu"),
             lambda x: (x / (1.0 + np.exp(-x))).astype(x.dtype)),
    "leaky_relu": (_float_same,
                   lambda bb, c: bb.call_te(_te("leaky_relu"), c.args[0], c.attrs["alpha"],
                                            primfunc_name_hint="leaky_relu"),
                   lambda x, alpha: np.where(x > 0, x, x * alpha).astype(x.dtype)),
    "softmax": (_softmax_infer,
                lambda bb, c: bb.call_te(_te("softmax"), c.args[0], c.attrs["axis"],
                                         primfunc_name_hint="softmax"),
                _np_softmax),
    "log_softmax": (_softmax_infer,
                    lambda bb, c: bb.call_te(_te("log_softmax"), c.args[0], c.attrs["axis"],
                                             primfunc_name_hint="log_softmax"),
                    _np_log_softmax),
}

for _name, (_infer_fn, _legalize_fn, _numpy_fn) in _RULES.items():
    def_infer(f"relax.nn.{_name}")(_infer_fn)
    def_legalize(f"relax.nn.{_name}")(_legalize_fn)
    def_numpy(f"relax.nn.{_name}")(_numpy_fn)

__all__ = ["relu", "gelu", "gelu_tanh", "silu", "leaky_relu", "softmax", "log_softmax"]

"""ONNX converters: control flow (If, Loop), resolved when the model is imported.

- ``If`` with a condition known at import time converts only the branch taken. With a
  condition computed at run time both branches are converted (ONNX ops have no side
  effects) and each output is selected with ``where``; the branches' outputs must then have
  one shape and dtype.
- ``Loop`` is unrolled: its trip count must be known, and its condition known after every
  iteration (at most :data:`MAX_UNROLL` iterations). Scan outputs are stacked.
"""
from __future__ import annotations

from typing import Any

import numpy as np

from workbench.relax import op as R
from workbench.relax.expr import Expr
from workbench.relax.frontend.onnx._registry import converter

#: The most iterations a Loop is unrolled to.
MAX_UNROLL = 1024


def _same_type(a: Expr, b: Expr) -> bool:
    sa, sb = a.struct_info, b.struct_info
    return sa.dtype == sb.dtype and sa.shape is not None and sb.shape is not None and \
        [str(d) for d in sa.values] == [str(d) for d in sb.values]


@converter("If")
def _if(imp: Any, node: Any, inputs: list, attrs: dict) -> list:
    cond = imp.known(inputs[0])
    if cond is not None:
        branch = attrs["then_branch"] if bool(cond.reshape(-1)[0]) else attrs["else_branch"]
        return imp.convert_subgraph(branch, {})
    then = [imp.expr(v) for v in imp.convert_subgraph(attrs["then_branch"], {})]
    other = [imp.expr(v) for v in imp.convert_subgraph(attrs["else_branch"], {})]
    c = imp.emit(R.reshape(imp.expr(inputs[0]), []))
    out = []
    for k, (a, b) in enumerate(zip(then, other)):
        if not _same_type(a, b):
            raise NotImplementedError(
                f"If on a condition computed at run time whose branches give output {k} "
                f"different types ({a.struct_info} vs {b.struct_info})")
        out.append(imp.emit(R.where(c, a, b)))
    return out


@converter("Loop")
def _loop(imp: Any, node: Any, inputs: list, attrs: dict) -> list:
    body = attrs["body"]
    trips = imp.known(inputs[0]) if inputs and inputs[0] is not None else None
    if trips is None:
        raise NotImplementedError("Loop without a trip count known at import time")
    trips = int(trips.reshape(-1)[0])
    if trips > MAX_UNROLL:
        raise NotImplementedError(f"Loop of {trips} iterations (unrolled up to {MAX_UNROLL})")
    cond = inputs[1] if len(inputs) > 1 else None
    carried = list(inputs[2:])
    n_carried = len(carried)
    names = [i.name for i in body.input]
    scans: list[list[Any]] = []
    for it in range(trips):
        if cond is not None:
            known = imp.known(cond)
            if known is None:
                raise NotImplementedError("Loop whose condition is computed at run time")
            if not bool(known.reshape(-1)[0]):
                break
        bound = {names[0]: np.asarray(it, dtype="int64"),
                 names[1]: np.asarray(True) if cond is None else cond}
        bound.update(zip(names[2:], carried))
        outs = imp.convert_subgraph(body, bound)
        if cond is not None:  # without a condition input the body's is ignored (a for loop)
            cond = outs[0]
        carried = outs[1:1 + n_carried]
        scans.append(outs[1 + n_carried:])
    n_scan = len(body.output) - 1 - n_carried
    stacked = []
    for k in range(n_scan):
        if not scans:
            raise NotImplementedError("Loop with scan outputs and no iterations")
        parts = [imp.emit(R.expand_dims(imp.expr(s[k]), 0)) for s in scans]
        stacked.append(imp.emit(R.concat(parts, 0)) if len(parts) > 1 else parts[0])
    return carried + stacked


__all__ = ["MAX_UNROLL"]

"""``einsum(operands, subscripts)`` (TVM's ``relax.op.einsum``): numpy's Einstein summation
over a tuple of tensors of one dtype (see :mod:`workbench.topi.einsum`)."""
from __future__ import annotations

from typing import Any, Sequence

import numpy as np

from workbench.relax.expr import Call, Expr, Tuple
from workbench.relax.op import _infer as I
from workbench.relax.op.registry import def_infer, def_legalize, def_numpy, make_call
from workbench.relax.struct_info import StructInfo, TensorStructInfo


def einsum(operands: Expr | Sequence[Expr], subscripts: str) -> Call:
    """``np.einsum(subscripts, *operands)``."""
    if not isinstance(operands, Expr):
        operands = Tuple(tuple(operands))
    return make_call("relax.einsum", (operands,), {"subscripts": str(subscripts)})


@def_infer("relax.einsum")
def _infer_einsum(call: Call, ctx: Any) -> StructInfo:
    from workbench.topi.einsum import parse_einsum
    xs = I.tuple_of_tensors(call, 0, "operands")
    if not xs:
        raise I.error(call, "needs at least one operand")
    dtype = I.same_dtype(call, [(f"operands[{k}]", x) for k, x in enumerate(xs)])
    if any(x.shape is None for x in xs):
        return TensorStructInfo(None, dtype)
    try:
        terms, out = parse_einsum(call.attrs["subscripts"], [x.ndim for x in xs])
    except ValueError as err:
        raise I.error(call, str(err)) from None
    sizes: dict[str, Any] = {}
    for t, x in zip(terms, xs):
        for ch, d in zip(t, x.values):
            known = sizes.get(ch)
            if known is None or I.const_int(known) == 1:
                sizes[ch] = d
            elif I.const_int(d) not in (1, None) and I.const_int(known) is not None and \
                    I.const_int(d) != I.const_int(known):
                raise I.error(call, f"dimension {ch!r} is {I.const_int(known)} and "
                                    f"{I.const_int(d)} in {call.attrs['subscripts']!r}")
    missing = [ch for ch in out if ch not in sizes]
    if missing:
        raise I.error(call, f"output letters {missing} of {call.attrs['subscripts']!r} are in "
                            "no operand")
    return TensorStructInfo(tuple(sizes[ch] for ch in out), dtype)


@def_legalize("relax.einsum")
def _legalize_einsum(bb: Any, call: Call) -> Expr:
    from workbench.topi.einsum import einsum as te_einsum
    operands = call.args[0]
    items = list(operands.fields) if isinstance(operands, Tuple) else None
    if items is None:
        return call
    return bb.call_te(te_einsum, call.attrs["subscripts"], *items, primfunc_name_hint="einsum")


@def_numpy("relax.einsum")
def _numpy_einsum(operands: tuple, subscripts: str) -> np.ndarray:
    out = np.einsum(subscripts, *[o.astype("float64") if o.dtype.kind == "f" else o
                                  for o in operands])
    return np.asarray(out).astype(operands[0].dtype)


__all__ = ["einsum"]

"""``layout_transform``: a tensor reordered between two layouts of the same axes, such as NCHW
and the channel-blocked NCHW16c (Relay's ``layout_transform(data, src_layout, dst_layout)``).

A blocked destination axis is padded with zeros up to a whole number of blocks; going back,
``channels`` (the logical channel count) crops the padding off. The kernel it legalizes to is
named ``layout_transform`` and is never fused with its neighbours, so profiles show what the
layout changes of a model cost, one row per reorder.
"""
from __future__ import annotations

from typing import Any

import numpy as np

from workbench.relax.expr import Call, Expr
from workbench.relax.op import _infer as I
from workbench.relax.op.registry import def_infer, def_legalize, def_numpy, make_call
from workbench.relax.struct_info import StructInfo, TensorStructInfo
from workbench.tir.expr import IntImm

__all__ = ["layout_transform", "logical_dims", "blocked_shape", "to_layout_numpy"]


def layout_transform(data: Expr, src_layout: str, dst_layout: str,
                     channels: int | None = None) -> Call:
    """``data`` in ``src_layout`` reordered into ``dst_layout`` (see the module docstring)."""
    from workbench.topi.nn.layout import parse_layout
    src, dst = parse_layout(src_layout), parse_layout(dst_layout)
    if sorted(a for a, f in src if f is None) != sorted(a for a, f in dst if f is None):
        raise ValueError(f"layout_transform: {src_layout!r} and {dst_layout!r} do not name the "
                         "same axes")
    if channels is not None and (int(channels) < 1 or "C" not in src_layout.upper()):
        raise ValueError(f"layout_transform: channels={channels} needs a C axis and >= 1")
    return make_call("relax.layout_transform", (data,),
                     {"src_layout": src_layout, "dst_layout": dst_layout,
                      "channels": None if channels is None else int(channels)})


def logical_dims(values: tuple, layout: str) -> dict[str, Any]:
    """The extent of each primal axis of struct-info dims ``values`` in ``layout`` (an int
    when constant)."""
    from workbench.topi.nn.layout import logical_extents
    consts = [I.const_int(d) for d in values]
    return logical_extents(tuple(d if c is None else c for d, c in zip(values, consts)), layout)


def blocked_shape(logical: dict[str, Any], layout: str) -> tuple:
    """The shape of a tensor of primal extents ``logical`` in ``layout`` (blocked axes rounded
    up to whole blocks)."""
    from workbench.topi.nn.layout import parse_layout
    lay = parse_layout(layout)
    out = []
    for a, f in lay:
        inner = next((g for b, g in lay if b == a and g is not None), None)
        if f is not None:
            out.append(f)
        elif inner is not None:
            out.append(-(-int(logical[a]) // inner))
        else:
            out.append(logical[a])
    return tuple(out)


@def_infer("relax.layout_transform")
def _infer_layout_transform(call: Call, ctx: Any) -> StructInfo:
    from workbench.topi.nn.layout import parse_layout
    a = call.attrs
    x = I.tensor_arg(call, 0, "data")
    src = parse_layout(a["src_layout"])
    if x.ndim not in (-1, len(src)):
        raise I.error(call, f"data {I.dims_text(x.values)} is not {len(src)}-d "
                            f"({a['src_layout']})")
    if x.shape is None:
        return TensorStructInfo(None, x.dtype, len(parse_layout(a["dst_layout"])))
    logical = logical_dims(x.values, a["src_layout"])
    if a["channels"] is not None:
        c = logical.get("C")
        if isinstance(c, int) and a["channels"] > c:
            raise I.error(call, f"channels={a['channels']} is more than the "
                                f"{c} channels of data {I.dims_text(x.values)}")
        logical["C"] = a["channels"]
    for ax, f in parse_layout(a["dst_layout"]):
        if f is not None and not isinstance(logical.get(ax), int):
            raise I.error(call, f"the blocked axis {ax} of data {I.dims_text(x.values)} must "
                                "be constant")
    shape = blocked_shape(logical, a["dst_layout"])
    return TensorStructInfo(tuple(IntImm("int64", d) if isinstance(d, int) else d
                                  for d in shape), x.dtype)


@def_legalize("relax.layout_transform")
def _legalize_layout_transform(bb: Any, call: Call) -> Expr:
    from workbench.relax.transform.annotate_tir_op_pattern import OpPatternKind
    from workbench.topi.nn.layout import layout_transform as te_layout_transform
    a = call.attrs
    out = bb.call_te(te_layout_transform, call.args[0], a["src_layout"], a["dst_layout"],
                     a["channels"], primfunc_name_hint="layout_transform")
    # Opaque to fusion: a reorder stays a kernel of its own, which profiles show.
    gvar = out.args[0]
    func = bb.get()[gvar]
    bb.update_func(gvar, func.with_attr("op_pattern", int(OpPatternKind.kOpaque)))
    return out


def to_layout_numpy(x: np.ndarray, src_layout: str, dst_layout: str,
                    channels: int | None = None) -> np.ndarray:
    """The numpy reference of :func:`layout_transform`."""
    from workbench.topi.nn.layout import parse_layout
    src, dst = parse_layout(src_layout), parse_layout(dst_layout)
    # To the primal axes, in the source's primal order.
    primal = [a for a, f in src if f is None]
    order, shape = [], []
    for a in primal:
        order.append(next(k for k, (b, f) in enumerate(src) if b == a and f is None))
        shape.append(x.shape[order[-1]])
        inner = next((k for k, (b, f) in enumerate(src) if b == a and f is not None), None)
        if inner is not None:
            order.append(inner)
            shape[-1] *= x.shape[inner]
    plain = x.transpose(order).reshape(shape)
    if channels is not None:
        plain = plain.take(range(channels), axis=primal.index("C"))
    # Pad blocked axes of the destination, then split and reorder them.
    dst_primal = [a for a, f in dst if f is None]
    plain = plain.transpose([primal.index(a) for a in dst_primal])
    pads, split = [], []
    for k, a in enumerate(dst_primal):
        blk = next((f for b, f in dst if b == a and f is not None), None)
        n = plain.shape[k]
        pads.append((0, (-n) % blk if blk else 0))
        split += [-(-n // blk), blk] if blk else [n]
    plain = np.pad(plain, pads)
    names = []
    for a in dst_primal:
        names.append((a, None))
        if any(b == a and f is not None for b, f in dst):
            names.append((a, "block"))
    blocked = plain.reshape(split)
    perm = [names.index((a, None if f is None else "block")) for a, f in dst]
    return np.ascontiguousarray(blocked.transpose(perm))


@def_numpy("relax.layout_transform")
def _numpy_layout_transform(x: np.ndarray, src_layout: str, dst_layout: str,
                            channels: int | None = None, **_: Any) -> np.ndarray:
    return to_layout_numpy(x, src_layout, dst_layout, channels)

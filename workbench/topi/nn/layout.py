"""Layouts with channel blocks (TVM's ``Layout`` strings) and the reorder between two of them.

A layout string names the dimensions of a tensor in order: an upper-case letter is a whole
("primal") axis, a number followed by a lower-case letter is a block of that axis, innermost.
``NCHW16c`` is ``[N][C / 16][H][W][16]``: element ``(n, c, h, w)`` of the NCHW tensor is at
``(n, c // 16, h, w, c % 16)``. Weights of blocked convolutions use ``OIHW16i16o``
(``[O/16][I/16][KH][KW][16 i][16 o]``) or ``OIHW16o`` (``[O/16][I][KH][KW][16 o]``).

:func:`layout_transform` reorders a tensor between two layouts of the same primal axes. A
blocked axis whose extent is not a multiple of the block is padded with zeros; going back,
``channels`` (the logical extent) crops the padding off.
"""
from __future__ import annotations

import re
from typing import Any

from workbench.te import compute
from workbench.te.tensor import Tensor
from workbench.tir import op
from workbench.tir.expr import PrimExpr
from workbench.topi.utils import get_const_int, index_const, index_dtype, is_const_int, shape_str

__all__ = ["parse_layout", "primal_layout", "layout_block", "is_blocked", "logical_extents",
           "layout_transform"]

_TOKEN = re.compile(r"(\d*)([A-Za-z])")


def parse_layout(layout: str) -> list[tuple[str, int | None]]:
    """``"NCHW16c"`` -> ``[("N", None), ("C", None), ("H", None), ("W", None), ("C", 16)]``:
    one entry per dimension, the primal axis it belongs to and its block factor (None for a
    primal dimension). Raises ``ValueError`` for a malformed string."""
    out: list[tuple[str, int | None]] = []
    pos = 0
    for m in _TOKEN.finditer(layout):
        if m.start() != pos:
            break
        pos = m.end()
        digits, letter = m.groups()
        if letter.isupper():
            if digits:
                raise ValueError(f"layout {layout!r}: a primal axis ({letter}) takes no factor")
            out.append((letter, None))
        else:
            if not digits or int(digits) < 1:
                raise ValueError(f"layout {layout!r}: the block axis {letter!r} needs a factor")
            out.append((letter.upper(), int(digits)))
    primal = [a for a, f in out if f is None]
    blocks = [a for a, f in out if f is not None]
    if pos != len(layout) or not out or len(set(primal)) != len(primal) or \
            len(set(blocks)) != len(blocks) or any(b not in primal for b in blocks):
        raise ValueError(f"malformed layout {layout!r}: expected primal axes in upper case, "
                         f"each at most once, and blocks such as '16c' of axes present")
    return out


def primal_layout(layout: str) -> str:
    """The primal axes in order: ``"NCHW16c"`` -> ``"NCHW"``."""
    return "".join(a for a, f in parse_layout(layout) if f is None)


def layout_block(layout: str, axis: str) -> int | None:
    """The block factor of primal ``axis`` in ``layout`` (None when it is not blocked)."""
    return next((f for a, f in parse_layout(layout) if a == axis and f is not None), None)


def is_blocked(layout: str) -> bool:
    return any(f is not None for _, f in parse_layout(layout))


def logical_extents(shape: tuple, layout: str) -> dict[str, Any]:
    """The extent of each primal axis of a tensor of ``shape`` in ``layout``: the primal
    dimension times its block (ints stay ints, expressions stay expressions)."""
    ext: dict[str, Any] = {}
    for (a, f), d in zip(parse_layout(layout), shape):
        e = d if f is None else f
        ext[a] = e if a not in ext else ext[a] * e
    return ext


def _const(x: Any) -> int | None:
    return get_const_int(x) if is_const_int(x) else None


def layout_transform(data: Tensor, src_layout: str, dst_layout: str,
                     channels: int | None = None) -> Tensor:
    """``data`` (in ``src_layout``) in ``dst_layout``. Both name the same primal axes. A blocked
    destination axis is padded with zeros up to a whole number of blocks; ``channels`` gives the
    logical extent of the blocked source axis ``C`` when it carries such padding (the
    destination then keeps ``channels`` of it)."""
    what = f"layout_transform({src_layout} -> {dst_layout})"
    src, dst = parse_layout(src_layout), parse_layout(dst_layout)
    if len(src) != data.ndim:
        raise ValueError(f"{what}: data {shape_str(data.shape)} is not {len(src)}-d")
    if sorted(a for a, f in src if f is None) != sorted(a for a, f in dst if f is None):
        raise ValueError(f"{what}: the layouts do not name the same axes")
    logical = logical_extents(tuple(data.shape), src_layout)
    if channels is not None:
        c = _const(logical.get("C"))
        if c is None or channels > c:
            raise ValueError(f"{what}: channels={channels} does not fit data "
                             f"{shape_str(data.shape)}")
        logical["C"] = channels
    it = index_dtype(data)
    shape = []
    for a, f in dst:
        inner = next((g for b, g in dst if b == a and g is not None), None)
        if f is not None:
            shape.append(index_const(f, it))
        elif inner is not None:
            e = _const(logical[a])
            if e is None:
                raise ValueError(f"{what}: the blocked axis {a} must have a constant extent")
            shape.append(index_const(-(-e // inner), it))
        else:
            shape.append(logical[a])

    def f(*i: PrimExpr) -> PrimExpr:
        value: dict[str, PrimExpr] = {}
        for (a, g), k in zip(dst, i):
            if g is None:
                value[a] = k
        for (a, g), k in zip(dst, i):
            if g is not None:
                value[a] = value[a] * index_const(g, it) + k
        idx = []
        for a, g in src:
            inner = next((h for b, h in src if b == a and h is not None), None)
            v = value[a]
            if g is not None:
                idx.append(v % index_const(g, it))
            elif inner is not None:
                idx.append(v // index_const(inner, it))
            else:
                idx.append(v)
        load = data[tuple(idx)]
        padded = [a for a, g in dst if g is not None and _const(logical[a]) % g]
        if not padded:
            return load
        inside = op.all(*(value[a] < index_const(_const(logical[a]), it)
                          for a in padded))
        return op.if_then_else(inside, load, op.const(0, data.dtype))
    return compute(tuple(shape), f, name="T_layout_trans", tag="injective,layout")

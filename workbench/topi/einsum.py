"""``einsum`` (TVM's ``topi.einsum``): one ``te.compute`` over the output's letters that sums
the product of the operands over the letters that are not in the output.

Equations follow numpy: letters name dimensions, a letter repeated within an operand takes
its diagonal, ``...`` stands for broadcast dimensions (aligned from the right, size 1
broadcasting), and without ``->`` the output is the broadcast dimensions followed by the
letters used exactly once, in alphabetical order.
"""
from __future__ import annotations

from typing import Any, Sequence

from workbench import te
from workbench.te.tensor import Tensor
from workbench.tir import op
from workbench.tir.expr import IntImm, PrimExpr


def parse_einsum(equation: str, ranks: Sequence[int]) -> tuple[list[str], str]:
    """``(each operand's letters, the output's letters)`` with ``...`` spelled out as
    letters of their own (``chr(0x100 + k)``)."""
    eq = equation.replace(" ", "")
    lhs, arrow, rhs = eq.partition("->")
    terms = lhs.split(",")
    if len(terms) != len(ranks):
        raise ValueError(f"einsum: {equation!r} has {len(terms)} operands, got {len(ranks)}")
    n_ell = max((r - len(t.replace("...", "")) for t, r in zip(terms, ranks) if "..." in t),
                default=0)
    ell = "".join(chr(0x100 + k) for k in range(n_ell))
    out_terms = []
    for t, r in zip(terms, ranks):
        if "..." in t:
            own = r - len(t.replace("...", ""))
            t = t.replace("...", ell[n_ell - own:])
        if len(t) != r:
            raise ValueError(f"einsum: operand {t!r} of {equation!r} names {len(t)} dims, "
                             f"the tensor has {r}")
        out_terms.append(t)
    if arrow:
        out = rhs.replace("...", ell)
    else:
        counts: dict[str, int] = {}
        for t in out_terms:
            for ch in t:
                counts[ch] = counts.get(ch, 0) + 1
        out = ell + "".join(sorted(ch for ch, c in counts.items() if c == 1 and ch not in ell))
    return out_terms, out


def einsum(equation: str, *operands: Tensor) -> Tensor:
    """numpy's ``einsum`` of ``operands`` (see the module docstring)."""
    terms, out = parse_einsum(equation, [t.ndim for t in operands])
    sizes: dict[str, PrimExpr] = {}
    for t, x in zip(terms, operands):
        for ch, d in zip(t, x.shape):
            known = sizes.get(ch)
            if known is None or (isinstance(known, IntImm) and known.value == 1):
                sizes[ch] = d
    for ch in out:
        if ch not in sizes:
            raise ValueError(f"einsum: output letter {ch!r} of {equation!r} is in no operand")
    summed = [ch for ch in dict.fromkeys("".join(terms)) if ch not in out]
    axes = {ch: te.reduce_axis((0, sizes[ch]), name=f"k_{ch}") for ch in summed}
    dtype = operands[0].dtype

    def index(t: str, x: Tensor, where: dict[str, Any]) -> tuple:
        idx = []
        for ch, d in zip(t, x.shape):
            unit = isinstance(d, IntImm) and d.value == 1 and not (
                isinstance(sizes[ch], IntImm) and sizes[ch].value == 1)
            idx.append(op.const(0, d.dtype) if unit else where[ch])
        return tuple(idx)

    def f(*i: PrimExpr) -> PrimExpr:
        where: dict[str, Any] = dict(zip(out, i))
        where.update(axes)
        prod: PrimExpr | None = None
        for t, x in zip(terms, operands):
            v = op.cast(dtype, x[index(t, x, where)])
            prod = v if prod is None else prod * v
        return te.sum(prod, axis=list(axes.values())) if axes else prod
    return te.compute(tuple(sizes[ch] for ch in out), f, name="T_einsum",
                      tag="einsum" if axes else "injective")


__all__ = ["einsum", "parse_einsum"]

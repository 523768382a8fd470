"""Binary elementwise operators with numpy broadcasting (TVM's ``topi.add`` etc.).

Each operand is a te Tensor or a scalar (Python number or PrimExpr). Shapes are aligned from
the right; a dimension of extent 1 stretches to the other operand's. With two scalars the
result is a scalar expression, as in TVM. Outputs are named ``T_<op>`` with tag ``broadcast``
(the fuser and the tuner's workload features read these names).
"""
from __future__ import annotations

from typing import Any, Callable, Sequence

from workbench.ir import dtype as dt
from workbench.te import compute
from workbench.te.tensor import Tensor
from workbench.tir import op
from workbench.tir.expr import IntImm, PrimExpr
from workbench.topi.utils import Shape, is_const_int, shape_str

Operand = Tensor | PrimExpr | int | float


def broadcast_shape(*shapes: Sequence[PrimExpr], what: str = "broadcast") -> Shape:
    """The numpy broadcast of ``shapes``; ``ValueError`` for incompatible constant extents.

    Two symbolic extents must be the same variable; a symbolic extent against a constant other
    than 1 takes the constant (checked at run time by the caller's buffer shapes).
    """
    ndim = max((len(s) for s in shapes), default=0)
    out: list[PrimExpr] = []
    for k in range(ndim):
        dim: PrimExpr | None = None
        for s in shapes:
            j = len(s) - ndim + k
            if j < 0:
                continue
            e = op.const(s[j]) if not isinstance(s[j], PrimExpr) else s[j]
            if dim is None or is_const_int(dim, 1):
                dim = e
            elif is_const_int(e, 1) or e is dim:
                continue
            elif isinstance(dim, IntImm) and isinstance(e, IntImm):
                if dim.value != e.value:
                    raise ValueError(f"{what}: shapes {', '.join(shape_str(x) for x in shapes)} "
                                     f"cannot be broadcast (dimension {k}: {dim.value} vs "
                                     f"{e.value})")
            elif isinstance(dim, IntImm):
                continue
            elif isinstance(e, IntImm):
                dim = e
            else:
                raise ValueError(f"{what}: cannot broadcast the symbolic extents {dim!r} and "
                                 f"{e!r}; give them the same variable")
        out.append(dim)
    return tuple(out)


def broadcast_index(t: Tensor, out_shape: Shape, indices: Sequence[PrimExpr]) -> tuple:
    """The indices of ``t`` that feed output element ``indices`` (stretched dims read 0)."""
    offset = len(out_shape) - t.ndim
    idx = []
    for d, s in enumerate(t.shape):
        stretched = is_const_int(s, 1) and not is_const_int(out_shape[offset + d], 1)
        idx.append(op.const(0, indices[offset + d].dtype) if stretched else indices[offset + d])
    return tuple(idx)


def _element(x: Operand, out_shape: Shape, indices: Sequence[PrimExpr]) -> PrimExpr:
    if isinstance(x, Tensor):
        return x[broadcast_index(x, out_shape, indices)]
    return op.convert(x)


def _scalar_like(x: Operand, other: Operand) -> PrimExpr:
    """A Python scalar takes the tensor operand's dtype (``x + 1`` keeps float32, as in TVM)."""
    if isinstance(x, (Tensor, PrimExpr)):
        return x
    if isinstance(other, Tensor):
        t = dt.parse(other.dtype)
        if isinstance(x, float) and not t.is_float:
            return op.const(x)
        return op.const(x, other.dtype)
    return op.convert(x)


def broadcast_op(fbinary: Callable[[PrimExpr, PrimExpr], PrimExpr], a: Operand, b: Operand,
                 name: str) -> Tensor | PrimExpr:
    """Apply ``fbinary`` elementwise over the broadcast of ``a`` and ``b``."""
    a, b = _scalar_like(a, b), _scalar_like(b, a)
    if not isinstance(a, Tensor) and not isinstance(b, Tensor):
        return fbinary(a, b)
    shapes = [x.shape for x in (a, b) if isinstance(x, Tensor)]
    out_shape = broadcast_shape(*shapes, what=name)
    return compute(out_shape,
                   lambda *i: fbinary(_element(a, out_shape, i), _element(b, out_shape, i)),
                   name=f"T_{name}", tag="broadcast")


def _is_int(e: PrimExpr) -> bool:
    return dt.parse(e.dtype).is_integer


def _divide(x: PrimExpr, y: PrimExpr) -> PrimExpr:
    # TVM's divide truncates for integers (C semantics); true division for floats.
    x, y = op.match_types(x, y)
    return op.truncdiv(x, y) if _is_int(x) else op.div(x, y)


def add(lhs: Operand, rhs: Operand) -> Tensor | PrimExpr:
    """``lhs + rhs`` with broadcasting."""
    return broadcast_op(op.add, lhs, rhs, "add")


def subtract(lhs: Operand, rhs: Operand) -> Tensor | PrimExpr:
    """``lhs - rhs`` with broadcasting."""
    return broadcast_op(op.sub, lhs, rhs, "subtract")


def multiply(lhs: Operand, rhs: Operand) -> Tensor | PrimExpr:
    """``lhs * rhs`` with broadcasting."""
    return broadcast_op(op.mul, lhs, rhs, "multiply")


def divide(lhs: Operand, rhs: Operand) -> Tensor | PrimExpr:
    """``lhs / rhs``: true division for floats, truncating division for integers (TVM)."""
    return broadcast_op(_divide, lhs, rhs, "divide")


def floor_divide(lhs: Operand, rhs: Operand) -> Tensor | PrimExpr:
    """``lhs // rhs`` rounding toward minus infinity (``floor(a / b)`` for floats)."""
    return broadcast_op(op.floordiv, lhs, rhs, "floor_divide")


def mod(lhs: Operand, rhs: Operand) -> Tensor | PrimExpr:
    """Truncated remainder (sign of the dividend) for integers, ``fmod`` for floats."""
    def f(x: PrimExpr, y: PrimExpr) -> PrimExpr:
        x, y = op.match_types(x, y)
        return op.truncmod(x, y) if _is_int(x) else op.fmod(x, y)
    return broadcast_op(f, lhs, rhs, "mod")


def floor_mod(lhs: Operand, rhs: Operand) -> Tensor | PrimExpr:
    """Remainder with the sign of the divisor (numpy's ``%``)."""
    return broadcast_op(op.floormod, lhs, rhs, "floor_mod")


def maximum(lhs: Operand, rhs: Operand) -> Tensor | PrimExpr:
    """Elementwise maximum with broadcasting."""
    return broadcast_op(op.max, lhs, rhs, "maximum")


def minimum(lhs: Operand, rhs: Operand) -> Tensor | PrimExpr:
    """Elementwise minimum with broadcasting."""
    return broadcast_op(op.min, lhs, rhs, "minimum")


def power(lhs: Operand, rhs: Operand) -> Tensor | PrimExpr:
    """``lhs ** rhs`` with broadcasting (float result, as the ``pow`` intrinsic)."""
    return broadcast_op(op.pow, lhs, rhs, "power")


def _cmp(fn: Callable, name: str) -> Callable[[Operand, Operand], Tensor | PrimExpr]:
    def f(lhs: Operand, rhs: Operand) -> Tensor | PrimExpr:
        return broadcast_op(fn, lhs, rhs, name)
    f.__name__ = name
    f.__doc__ = f"Elementwise ``{name}`` comparison with broadcasting; a bool tensor."
    return f


equal = _cmp(op.eq, "equal")
not_equal = _cmp(op.ne, "not_equal")
less = _cmp(op.lt, "less")
less_equal = _cmp(op.le, "less_equal")
greater = _cmp(op.gt, "greater")
greater_equal = _cmp(op.ge, "greater_equal")
logical_and = _cmp(op.logical_and, "logical_and")
logical_or = _cmp(op.logical_or, "logical_or")
bitwise_and = _cmp(op.bitwise_and, "bitwise_and")
bitwise_or = _cmp(op.bitwise_or, "bitwise_or")
bitwise_xor = _cmp(op.bitwise_xor, "bitwise_xor")
left_shift = _cmp(op.shift_left, "left_shift")
right_shift = _cmp(op.shift_right, "right_shift")


def where(condition: Operand, x: Operand, y: Operand) -> Tensor:
    """``x`` where ``condition`` is true, else ``y``; all three broadcast together."""
    x, y = _scalar_like(x, y), _scalar_like(y, x)
    tensors = [t for t in (condition, x, y) if isinstance(t, Tensor)]
    if not tensors:
        raise TypeError("where: give at least one tensor operand")
    out_shape = broadcast_shape(*(t.shape for t in tensors), what="where")

    def f(*i: PrimExpr) -> PrimExpr:
        return op.select(_element(condition, out_shape, i), _element(x, out_shape, i),
                         _element(y, out_shape, i))
    return compute(out_shape, f, name="T_where", tag="broadcast")


def broadcast_to(data: Tensor, shape: Sequence[Any]) -> Tensor:
    """``data`` stretched to ``shape`` (numpy's ``broadcast_to``)."""
    target = tuple(op.const(s) if not isinstance(s, PrimExpr) else s for s in shape)
    out_shape = broadcast_shape(data.shape, target, what="broadcast_to")
    return compute(out_shape, lambda *i: data[broadcast_index(data, out_shape, i)],
                   name="T_broadcast_to", tag="broadcast")

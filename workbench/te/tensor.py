"""te tensors and the operations that produce them: ``placeholder`` and ``compute``.

Each :class:`Tensor` owns a :class:`workbench.tir.Buffer` from the start, and ``T[i, j]`` is a
plain ``BufferLoad`` of it, so compute bodies are ordinary TIR expressions. The operation that
reads a buffer finds its tensor again through a weak registry (alive as long as the tensor is).
Tensors are not expressions themselves: index them to compute with them, as in TVM.
"""
from __future__ import annotations

import inspect
import weakref
from typing import Any, Callable, Mapping, Sequence

import numpy as np

from workbench.ir import dtype as dt
from workbench.ir.node import FrozenDict, frozen
from workbench.tir import op
from workbench.tir.buffer import Buffer, Range, decl_buffer
from workbench.tir.expr import BufferLoad, IntImm, PrimExpr, Reduce, Var
from workbench.tir.functor import IRVisitor
from workbench.tir.stmt import IterType, IterVar
from workbench.te.reduction import AxisIterVar

# Buffer -> the Tensor that owns it; entries vanish with their tensor.
_TENSOR_OF_BUFFER: "weakref.WeakValueDictionary[Buffer, Tensor]" = weakref.WeakValueDictionary()


class Tensor:
    """The ``value_index``-th output of ``op``; index it (``T[i, j]``) to read an element."""

    __slots__ = ("op", "value_index", "buffer", "__weakref__")

    def __init__(self, op_: "Operation", value_index: int, buffer: Buffer):
        self.op = op_
        self.value_index = value_index
        self.buffer = buffer
        _TENSOR_OF_BUFFER[buffer] = self

    @property
    def shape(self) -> tuple[PrimExpr, ...]:
        return self.buffer.shape

    @property
    def dtype(self) -> str:
        return self.buffer.dtype

    @property
    def name(self) -> str:
        return self.buffer.name

    @property
    def ndim(self) -> int:
        return len(self.buffer.shape)

    def __getitem__(self, indices: Any) -> PrimExpr:
        if not isinstance(indices, tuple):
            indices = (indices,)
        if len(indices) != self.ndim:
            raise IndexError(f"tensor {self.name!r} has {self.ndim} dimension(s) "
                             f"(shape {_shape_str(self.shape)}) but was indexed with "
                             f"{len(indices)} index(es)")
        idx = tuple(_index(i, self.name, d) for d, i in enumerate(indices))
        return BufferLoad(self.buffer, idx, self.dtype)

    def __call__(self, *indices: Any) -> PrimExpr:
        """``T(i, j)`` is ``T[i, j]`` (TVM accepts both)."""
        return self[indices]

    def __len__(self) -> int:
        if self.ndim == 0:
            raise TypeError(f"tensor {self.name!r} is a scalar (0-d)")
        return _static_dim(self.shape[0], self.name)

    def __iter__(self):
        raise TypeError(f"tensor {self.name!r} is not iterable; index it with T[i, ...]")

    def _no_arith(self, *args: Any) -> Any:
        raise TypeError(
            f"tensor {self.name!r} cannot be used in arithmetic directly; index it inside "
            f"te.compute, e.g. te.compute(shape, lambda *i: {self.name}[i] + 1)")

    __add__ = __radd__ = __sub__ = __rsub__ = __mul__ = __rmul__ = _no_arith
    __truediv__ = __rtruediv__ = __floordiv__ = __rfloordiv__ = __mod__ = __rmod__ = _no_arith
    __neg__ = __lt__ = __le__ = __gt__ = __ge__ = __pow__ = _no_arith

    def __bool__(self) -> bool:
        return True

    def __repr__(self) -> str:
        return (f"Tensor(shape={_shape_str(self.shape)}, op.name={self.op.name!r}, "
                f"dtype={self.dtype!r})")


def _shape_str(shape: Sequence[PrimExpr]) -> str:
    return "(" + ", ".join(str(s.value) if isinstance(s, IntImm) else getattr(s, "name", repr(s))
                           for s in shape) + ")"


def _static_dim(s: PrimExpr, name: str) -> int:
    if isinstance(s, IntImm):
        return s.value
    raise TypeError(f"tensor {name!r} has a symbolic leading dimension {s!r}")


def _index(i: Any, name: str, dim: int) -> PrimExpr:
    if isinstance(i, slice):
        raise IndexError(f"tensor {name!r}: slices are not supported in te; give one index "
                         f"per dimension (dimension {dim} got {i!r})")
    if isinstance(i, bool) or isinstance(i, float) or isinstance(i, Tensor):
        raise TypeError(f"tensor {name!r}: index {dim} must be an integer expression, got {i!r}")
    e = op.const(i)
    if not dt.parse(e.dtype).is_integer:
        raise TypeError(f"tensor {name!r}: index {dim} must be an integer expression, got "
                        f"{e!r} of dtype {e.dtype}")
    return e


def tensor_of_buffer(buffer: Buffer) -> "Tensor | None":
    return _TENSOR_OF_BUFFER.get(buffer)


# ---- operations -------------------------------------------------------------------------------

class Operation:
    """Base of te operations: a name, a tag, attrs, and the output tensors."""

    name: str
    tag: str
    attrs: FrozenDict
    outputs: tuple[Tensor, ...]

    @property
    def num_outputs(self) -> int:
        return len(self.outputs)

    def output(self, index: int) -> Tensor:
        return self.outputs[index]

    @property
    def input_tensors(self) -> list[Tensor]:
        return []


class PlaceholderOp(Operation):
    """An input: a named, shaped tensor provided by the caller."""

    def __init__(self, name: str, shape: tuple[PrimExpr, ...], dtype: str):
        self.name, self.tag, self.attrs = name, "", FrozenDict()
        self.shape, self.dtype = shape, dtype
        self.outputs = (Tensor(self, 0, decl_buffer(shape, dtype, name)),)

    def __repr__(self) -> str:
        return f"PlaceholderOp({self.name!r}, shape={_shape_str(self.shape)}, dtype={self.dtype!r})"


class ComputeOp(Operation):
    """``outputs[i][axis] = body[i]``; ``reduce_axis`` is non-empty when the body reduces."""

    def __init__(self, name: str, tag: str, attrs: FrozenDict, axis: tuple[IterVar, ...],
                 body: tuple[PrimExpr, ...], dtypes: Sequence[str]):
        self.name, self.tag, self.attrs = name, tag, attrs
        self.axis = axis
        self.body = body
        first = body[0]
        self.reduce_axis: tuple[IterVar, ...] = first.axis if isinstance(first, Reduce) else ()
        shape = tuple(iv.dom.extent for iv in axis)
        names = [name] if len(body) == 1 else [f"{name}_v{i}" for i in range(len(body))]
        self.outputs = tuple(Tensor(self, i, decl_buffer(shape, t, n))
                             for i, (t, n) in enumerate(zip(dtypes, names)))
        self._inputs = _read_tensors(body, name)

    @property
    def input_tensors(self) -> list[Tensor]:
        return list(self._inputs)

    def __repr__(self) -> str:
        return (f"ComputeOp({self.name!r}, axis={[iv.var.name for iv in self.axis]}, "
                f"reduce_axis={[iv.var.name for iv in self.reduce_axis]}, tag={self.tag!r})")


class _LoadCollector(IRVisitor):
    def __init__(self) -> None:
        self.buffers: list[Buffer] = []

    def visit_BufferLoad(self, load: BufferLoad) -> None:
        if load.buffer not in self.buffers:
            self.buffers.append(load.buffer)
        self.generic_visit(load)

    def visit_Reduce(self, r: Reduce) -> None:
        # The combiner's own expressions are over its lhs/rhs vars; only sources read data.
        for f in (r.source, r.condition, r.init, tuple(iv.dom for iv in r.axis)):
            self.visit_field(f)


def _read_tensors(body: Sequence[PrimExpr], op_name: str) -> tuple[Tensor, ...]:
    c = _LoadCollector()
    for b in body:
        c.visit(b)
    out = []
    for buf in c.buffers:
        t = tensor_of_buffer(buf)
        if t is None:
            raise ValueError(f"compute {op_name!r} reads buffer {buf.name!r}, which belongs to "
                             "no live te tensor; read te tensors (placeholder/compute results)")
        if t not in out:
            out.append(t)
    return tuple(out)


# ---- public constructors ----------------------------------------------------------------------

def _shape(shape: Any, what: str) -> tuple[PrimExpr, ...]:
    if isinstance(shape, (int, np.integer, PrimExpr)) and not isinstance(shape, bool):
        shape = (shape,)
    if not isinstance(shape, (tuple, list)):
        raise TypeError(f"{what}: shape must be a tuple of integers or integer expressions, "
                        f"got {shape!r}")
    out = []
    for d, s in enumerate(shape):
        if isinstance(s, IterVar):
            s = s.var
        if isinstance(s, (bool, np.bool_)) or not isinstance(s, (int, np.integer, PrimExpr)):
            raise TypeError(f"{what}: shape[{d}] must be an integer or an integer expression "
                            f"(e.g. te.var('n')), got {s!r} ({type(s).__name__})")
        e = op.const(int(s)) if isinstance(s, np.integer) else op.const(s)
        if not dt.parse(e.dtype).is_integer:
            raise TypeError(f"{what}: shape[{d}] must be an integer, got {e!r} of dtype {e.dtype}")
        if isinstance(e, IntImm) and e.value < 0:
            raise ValueError(f"{what}: shape[{d}] is negative ({e.value})")
        out.append(e)
    return tuple(out)


def placeholder(shape: Any, dtype: str = "float32", name: str = "placeholder") -> Tensor:
    """An input tensor of ``shape`` (ints or integer Vars/SizeVars) and ``dtype``."""
    return PlaceholderOp(name, _shape(shape, f"placeholder {name!r}"), dt.normalize(dtype)).outputs[0]


def _axis_names(fcompute: Callable, ndim: int, name: str) -> list[str]:
    try:
        spec = inspect.getfullargspec(fcompute)
    except TypeError:
        return [f"i{i}" for i in range(ndim)]
    if spec.varkw or spec.kwonlyargs or spec.defaults:
        raise TypeError(f"compute {name!r}: fcompute must take only positional index arguments")
    args = list(spec.args)
    if inspect.ismethod(fcompute):
        args = args[1:]
    if spec.varargs is not None:
        args += [f"i{i}" for i in range(len(args), ndim)]
    if len(args) != ndim:
        raise ValueError(f"compute {name!r}: fcompute takes {len(args)} index argument(s) but "
                         f"the shape has {ndim} dimension(s)")
    return args


def compute(shape: Any, fcompute: Callable[..., Any], name: str = "compute", tag: str = "",
            attrs: Mapping[str, Any] | None = None) -> Tensor | tuple[Tensor, ...]:
    """A tensor whose element at ``(i0, ..., in)`` is ``fcompute(i0, ..., in)``.

    ``fcompute`` gets one index Var per dimension (named after its parameters) and returns an
    expression, a Reduce (from ``te.sum`` etc.), or a tuple: several Reduce results of one
    multi-value reducer (argmax), or several plain expressions; then a tuple of tensors is
    returned (a single tensor when there is one output, as in TVM).
    ``attrs`` become the block's annotations in :func:`create_prim_func`.
    """
    what = f"compute {name!r}"
    shp = _shape(shape, what)
    axis = tuple(AxisIterVar(Range(op.const(0, s.dtype), s), Var(n, s.dtype), IterType.DATA_PAR)
                 for n, s in zip(_axis_names(fcompute, len(shp), name), shp))
    result = fcompute(*(iv.var for iv in axis))
    body = _body(result, what)
    op_ = ComputeOp(name, tag, frozen(attrs), axis, body, [b.dtype for b in body])
    return op_.outputs[0] if len(body) == 1 else op_.outputs


def _body(result: Any, what: str) -> tuple[PrimExpr, ...]:
    items = list(result) if isinstance(result, (tuple, list)) else [result]
    if not items:
        raise ValueError(f"{what}: fcompute returned an empty tuple")
    body = []
    for e in items:
        if isinstance(e, Tensor):
            raise TypeError(f"{what}: fcompute returned the tensor {e.name!r}; return an "
                            f"element such as {e.name}[i, ...]")
        if isinstance(e, bool) or not isinstance(e, (int, float, PrimExpr)):
            raise TypeError(f"{what}: fcompute must return expressions, got {e!r}")
        body.append(op.const(e))
    reduces = [isinstance(b, Reduce) for b in body]
    if any(reduces):
        if not all(reduces):
            raise TypeError(f"{what}: a tuple result must be all reductions or none")
        _check_same_reduce(body, what)
    for b in body:
        _check_no_nested_reduce(b.source if isinstance(b, Reduce) else (b,), what)
    return tuple(body)


def _check_same_reduce(body: list, what: str) -> None:
    first = body[0]
    if len(first.source) != len(body):
        raise ValueError(f"{what}: the reducer {first.combiner.name!r} produces "
                         f"{len(first.source)} values; return all of them from fcompute "
                         "(e.g. idx, val = te.compute(shape, lambda i: argmax(...)))")
    for k, r in enumerate(body):
        if (r.combiner is not first.combiner or r.source is not first.source
                or r.axis is not first.axis or r.value_index != k):
            raise ValueError(f"{what}: the reductions of one compute must be the outputs of a "
                             "single multi-value reducer call, in order")


def _check_no_nested_reduce(exprs: Sequence[PrimExpr], what: str) -> None:
    class _Find(IRVisitor):
        def visit_Reduce(self, r: Reduce) -> None:
            raise ValueError(f"{what}: a reduction (te.sum, ...) must be the whole body of the "
                             "compute, not part of a larger expression; compute it as its own "
                             "stage first")

    for e in exprs:
        _Find().visit(e)

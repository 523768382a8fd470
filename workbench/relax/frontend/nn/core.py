"""The nn frontend's core: ``Tensor`` (a Relax value being traced), ``Parameter``, ``Module``
and ``Module.export_tvm`` (TVM's ``relax.frontend.nn.core``).

Tracing: ``export_tvm(spec)`` makes one Relax function per method in ``spec``. Its parameters are
the method's inputs (named as in the spec) followed by every Parameter of the module, named by
its attribute path (``fc1.weight``); the function attr ``num_input`` says how many inputs come
first. The method runs with nn Tensors whose operations emit bindings into a dataflow block
through the current BlockBuilder, each named after its op (``matmul``, ``add``, ...).
"""
from __future__ import annotations

from typing import Any, Iterator, Sequence

import numpy as np

from workbench.ir.module import IRModule
from workbench.relax.block_builder import BlockBuilder
from workbench.relax.expr import Expr, Tuple, Var
from workbench.relax.struct_info import TensorStructInfo
from workbench.relax.frontend.nn import spec as _spec


def _builder(what: str) -> BlockBuilder:
    bb = BlockBuilder.current()
    if bb is None:
        raise RuntimeError(f"nn: {what} can only be used while tracing (inside "
                           "Module.export_tvm)")
    return bb


def wrap(expr: Expr, name: str) -> Any:
    """Emit ``expr`` (named ``name``) and wrap the result as nn Tensor(s)."""
    var = _builder(name).emit(expr, name)
    si = var.struct_info
    from workbench.relax.struct_info import TupleStructInfo
    if isinstance(si, TupleStructInfo):
        return tuple(wrap(var[i], f"{name}_{i}") for i in range(len(si.fields)))
    return Tensor(var)


class Tensor:
    """A Relax value during tracing; arithmetic and methods emit ops."""

    def __init__(self, expr: Expr):
        self._expr = expr

    @property
    def expr(self) -> Expr:
        return self._expr

    @staticmethod
    def placeholder(shape: Sequence[Any], dtype: str, name: str = "tensor") -> "Tensor":
        """A Tensor standing for a value of ``shape`` (ints, tir expressions) and ``dtype``
        that no op made: the ``out`` of ``nn.extern`` / ``nn.tensor_ir_op``."""
        if not isinstance(shape, (list, tuple)):
            raise TypeError(f"Tensor.placeholder: shape must be a list or tuple, got {shape!r}")
        return Tensor(Var(name, TensorStructInfo(tuple(shape), dtype)))

    @property
    def _sinfo(self) -> TensorStructInfo:
        si = self._expr.struct_info
        if not isinstance(si, TensorStructInfo):
            raise TypeError(f"nn.Tensor holds a non-tensor value: {si}")
        return si

    @property
    def shape(self) -> list[Any]:
        """Dims as ints where constant, tir expressions where symbolic."""
        vals = self._sinfo.values
        if vals is None:
            raise ValueError("nn.Tensor: the shape is unknown")
        return [getattr(v, "value", v) if type(v).__name__ == "IntImm" else v for v in vals]

    @property
    def ndim(self) -> int:
        return self._sinfo.ndim

    @property
    def dtype(self) -> str:
        return self._sinfo.dtype

    def __add__(self, other: Any) -> "Tensor": return _op().add(self, other)
    def __radd__(self, other: Any) -> "Tensor": return _op().add(other, self)
    def __sub__(self, other: Any) -> "Tensor": return _op().subtract(self, other)
    def __rsub__(self, other: Any) -> "Tensor": return _op().subtract(other, self)
    def __mul__(self, other: Any) -> "Tensor": return _op().multiply(self, other)
    def __rmul__(self, other: Any) -> "Tensor": return _op().multiply(other, self)
    def __truediv__(self, other: Any) -> "Tensor": return _op().divide(self, other)
    def __matmul__(self, other: Any) -> "Tensor": return _op().matmul(self, other)
    def __neg__(self) -> "Tensor": return _op().negative(self)

    def reshape(self, *shape: Any) -> "Tensor":
        if len(shape) == 1 and isinstance(shape[0], (list, tuple)):
            shape = tuple(shape[0])
        return _op().reshape(self, shape)

    def permute_dims(self, *axes: int) -> "Tensor":
        return _op().permute_dims(self, list(axes) if axes else None)

    def astype(self, dtype: str) -> "Tensor":
        return _op().astype(self, dtype)

    def __repr__(self) -> str:
        return f"nn.Tensor({self._expr.struct_info})"


def _op():
    from workbench.relax.frontend.nn import op
    return op


class Parameter(Tensor):
    """A trainable weight: shape, dtype, and optional ``data`` (a numpy array)."""

    def __init__(self, shape: Sequence[int], dtype: str | None = None):
        self._shape = tuple(int(s) for s in shape)
        self._dtype = dtype or "float32"
        self._data: np.ndarray | None = None
        self._expr = None  # type: ignore[assignment]

    @property
    def shape(self) -> list[Any]:
        return list(self._shape)

    @property
    def dtype(self) -> str:
        return self._dtype

    @property
    def ndim(self) -> int:
        return len(self._shape)

    @property
    def expr(self) -> Expr:
        if self._expr is None:
            raise RuntimeError("nn.Parameter: used outside Module.export_tvm (no value to trace)")
        return self._expr

    @property
    def data(self) -> np.ndarray | None:
        return self._data

    @data.setter
    def data(self, value: Any) -> None:
        if value is None:
            self._data = None
            return
        arr = value.numpy() if hasattr(value, "numpy") and not isinstance(value, np.ndarray) \
            else np.asarray(value)
        if tuple(arr.shape) != self._shape:
            raise ValueError(f"nn.Parameter: data of shape {tuple(arr.shape)} does not match "
                             f"the parameter's shape {self._shape}")
        if str(arr.dtype) != self._dtype:
            raise ValueError(f"nn.Parameter: data of dtype {arr.dtype} does not match the "
                             f"parameter's dtype {self._dtype}")
        self._data = arr

    def __repr__(self) -> str:
        return f"nn.Parameter({list(self._shape)}, {self._dtype!r})"


class Module:
    """Base class of nn modules: attributes that are Parameters or Modules form the tree."""

    def forward(self, *args: Any) -> Any:
        raise NotImplementedError(f"{type(self).__name__} must define forward")

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        return self.forward(*args, **kwargs)

    def _children(self) -> Iterator[tuple[str, Any]]:
        for name, v in vars(self).items():
            if isinstance(v, (Parameter, Module)):
                yield name, v
            elif isinstance(v, (list, tuple)) and v and all(isinstance(x, Module) for x in v):
                for i, x in enumerate(v):
                    yield f"{name}.{i}", x

    def named_parameters(self, prefix: str = "") -> Iterator[tuple[str, Parameter]]:
        """``("fc1.weight", Parameter)`` pairs in attribute order."""
        for name, v in self._children():
            full = f"{prefix}{name}"
            if isinstance(v, Parameter):
                yield full, v
            else:
                yield from v.named_parameters(full + ".")

    def parameters(self) -> list[Parameter]:
        return [p for _, p in self.named_parameters()]

    def state_dict(self) -> dict[str, Parameter]:
        return dict(self.named_parameters())

    def export_tvm(self, spec: dict[str, dict[str, Any]], debug: bool = False
                   ) -> tuple[IRModule, list[tuple[str, Parameter]]]:
        """``(IRModule, [(name, Parameter), ...])``: one function per method of ``spec``
        (``{"forward": {"x": nn.spec.Tensor(("n", 8), "float32")}}``); see the module
        docstring for the parameter order."""
        if debug:
            raise NotImplementedError("export_tvm: debug=True (effects) is not supported")
        params = list(self.named_parameters())
        bb = BlockBuilder()
        for method, inputs in spec.items():
            fn = getattr(self, method, None)
            if fn is None or not callable(fn):
                raise AttributeError(f"export_tvm: {type(self).__name__} has no method "
                                     f"{method!r}")
            self._trace(bb, method, fn, inputs, params)
        return bb.get(), params

    @staticmethod
    def _trace(bb: BlockBuilder, method: str, fn: Any, inputs: dict[str, Any],
               params: list[tuple[str, Parameter]]) -> None:
        from workbench.tir.expr import SizeVar
        dims: dict[str, SizeVar] = {}

        def dim(d: int | str) -> Any:
            if isinstance(d, str):
                return dims.setdefault(d, SizeVar(d, "int64"))
            return d
        in_vars = []
        for name, s in inputs.items():
            s = _spec.as_spec(s)
            in_vars.append(Var(name, TensorStructInfo(tuple(dim(d) for d in s.shape), s.dtype)))
        p_vars = [Var(name, TensorStructInfo(p._shape, p._dtype)) for name, p in params]
        try:
            for (_, p), v in zip(params, p_vars):
                p._expr = v
            with bb.function(method, in_vars + p_vars, attrs={"num_input": len(in_vars)}):
                with bb.dataflow():
                    out = fn(*[Tensor(v) for v in in_vars])
                    result = bb.emit_output(_to_expr(out), "gv")
                bb.emit_func_output(result)
        finally:
            for _, p in params:
                p._expr = None  # type: ignore[assignment]


def _to_expr(v: Any) -> Expr:
    if isinstance(v, Tensor):
        return v.expr
    if isinstance(v, (list, tuple)):
        return Tuple(tuple(_to_expr(x) for x in v))
    if isinstance(v, Expr):
        return v
    raise TypeError(f"nn: a method must return nn Tensors (or tuples of them), got {v!r}")


class ModuleList(Module):
    """A list of modules (parameters named ``<attr>.<index>.<name>``)."""

    def __init__(self, modules: Sequence[Module]):
        self.modules = list(modules)

    def __iter__(self):
        return iter(self.modules)

    def __getitem__(self, i: int) -> Module:
        return self.modules[i]

    def __len__(self) -> int:
        return len(self.modules)

    def named_parameters(self, prefix: str = "") -> Iterator[tuple[str, Parameter]]:
        for i, m in enumerate(self.modules):
            yield from m.named_parameters(f"{prefix}{i}.")


class Sequential(ModuleList):
    """Modules applied in order."""

    def __init__(self, *modules: Module):
        super().__init__(modules)

    def forward(self, x: Any) -> Any:
        for m in self.modules:
            x = m(x)
        return x


__all__ = ["Tensor", "Parameter", "Module", "ModuleList", "Sequential", "wrap"]

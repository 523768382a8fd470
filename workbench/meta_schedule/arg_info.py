"""ArgInfo: what a tuned function's arguments look like (TVM's ``meta_schedule.arg_info``).

Only tensors exist, as in TVM: ``TensorInfo("float32", (128, 128))``, whose JSON form is
``["TENSOR", "float32", [128, 128]]``. The runner allocates (and random-fills) arguments from
these alone, so a measured kernel needs nothing of the IR.
"""
from __future__ import annotations

from typing import Any, Sequence

from workbench.ir.module import IRModule
from workbench.tir.expr import IntImm
from workbench.tir.function import PrimFunc

__all__ = ["ArgInfo", "TensorInfo"]


class ArgInfo:
    """Abstract argument information; ``as_json`` / ``from_json`` round-trip."""

    def as_json(self) -> Any:
        raise NotImplementedError

    @staticmethod
    def from_json(json_obj: Any) -> "ArgInfo":
        """Parse ``["TENSOR", dtype, shape]``; anything else raises ``ValueError``."""
        if isinstance(json_obj, (list, tuple)) and json_obj and json_obj[0] == "TENSOR":
            return TensorInfo.from_json(json_obj)
        raise ValueError(f"ArgInfo.from_json: expected ['TENSOR', dtype, shape], got {json_obj!r}")

    @staticmethod
    def from_prim_func(func: PrimFunc) -> list["ArgInfo"]:
        """One TensorInfo per parameter of ``func``. Scalar parameters and symbolic shapes
        cannot be measured and raise ``ValueError`` naming the parameter."""
        if not isinstance(func, PrimFunc):
            raise TypeError(f"ArgInfo.from_prim_func expects a PrimFunc, got {type(func).__name__}")
        out: list[ArgInfo] = []
        for param in func.params:
            buf = func.buffer_map.get(param)
            if buf is None:
                raise ValueError(f"ArgInfo.from_prim_func: parameter {param.name!r} is a scalar "
                                 f"({param.dtype}); only buffer arguments can be measured")
            shape = []
            for dim in buf.shape:
                if not isinstance(dim, IntImm):
                    raise ValueError(f"ArgInfo.from_prim_func: buffer {buf.name!r} has the "
                                     f"symbolic dimension {dim!r}; tune a function with "
                                     "static shapes")
                shape.append(int(dim.value))
            out.append(TensorInfo(buf.dtype, shape))
        return out

    @staticmethod
    def from_entry_func(mod: IRModule, remove_preproc: bool = True) -> list["ArgInfo"]:
        """Arguments of the entry PrimFunc of ``mod``: one marked ``tir.is_entry_func``, else
        ``main``, else the only PrimFunc.

        With ``remove_preproc`` (TVM's default), the function is first stripped of its weight
        layout-rewrite blocks (``RemoveWeightLayoutRewriteBlock``, as the tuner's builder
        does), so a weight that ``RewriteLayout`` re-laid out is reported in its *packed*
        shape: what the built kernel takes. Without it, the original shapes."""
        func = mod if isinstance(mod, PrimFunc) else find_entry_func(mod)
        if remove_preproc:
            from workbench.tir.transform.remove_weight_layout_rewrite_block import (
                remove_weight_layout_rewrite_block,
            )
            func = remove_weight_layout_rewrite_block(func)
        return ArgInfo.from_prim_func(func)


def find_entry_func(mod: IRModule) -> PrimFunc:
    """The entry PrimFunc of ``mod`` (see :meth:`ArgInfo.from_entry_func`)."""
    funcs = [(name, f) for name, f in mod.items() if isinstance(f, PrimFunc)]
    for _, f in funcs:
        if f.attrs.get("tir.is_entry_func"):
            return f
    for name, f in funcs:
        if name == "main":
            return f
    if len(funcs) == 1:
        return funcs[0][1]
    raise ValueError(f"cannot find the entry function of a module with PrimFuncs "
                     f"{[n for n, _ in funcs]}: name one 'main' or mark it tir.is_entry_func")


class TensorInfo(ArgInfo):
    """A tensor argument: ``dtype`` (str) and ``shape`` (tuple of ints). Compared by value."""

    __slots__ = ("dtype", "shape")

    def __init__(self, dtype: str, shape: Sequence[int]) -> None:
        if not isinstance(dtype, str):
            raise TypeError(f"TensorInfo: dtype must be a str, got {dtype!r}")
        try:
            dims = tuple(int(d) for d in shape)
        except (TypeError, ValueError):
            raise TypeError(f"TensorInfo: shape must be a sequence of ints, got {shape!r}") \
                from None
        if any(d < 0 for d in dims):
            raise ValueError(f"TensorInfo: negative dimension in shape {dims}")
        self.dtype = dtype
        self.shape = dims

    def as_json(self) -> list:
        return ["TENSOR", self.dtype, list(self.shape)]

    @staticmethod
    def from_json(json_obj: Any) -> "TensorInfo":
        try:
            tag, dtype, shape = json_obj
        except (TypeError, ValueError):
            raise ValueError(f"TensorInfo.from_json: expected ['TENSOR', dtype, shape], "
                             f"got {json_obj!r}") from None
        if tag != "TENSOR" or not isinstance(shape, (list, tuple)):
            raise ValueError(f"TensorInfo.from_json: expected ['TENSOR', dtype, shape], "
                             f"got {json_obj!r}")
        return TensorInfo(dtype, shape)

    def __eq__(self, other: object) -> bool:
        return (isinstance(other, TensorInfo) and self.dtype == other.dtype
                and self.shape == other.shape)

    def __hash__(self) -> int:
        return hash((self.dtype, self.shape))

    def __getstate__(self) -> tuple:
        return (self.dtype, self.shape)

    def __setstate__(self, state: tuple) -> None:
        self.dtype, self.shape = state

    def __repr__(self) -> str:
        return f'TensorInfo("{self.dtype}", {list(self.shape)})'

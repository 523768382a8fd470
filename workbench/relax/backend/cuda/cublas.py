"""The cuBLAS pattern table (TVM's ``relax.backend.cuda.cublas``).

Importing this module registers the ``cublas.*`` patterns: matmul, optionally with the rhs
through ``permute_dims`` (``matmul_transposed``: a linear layer), a bias and a relu or gelu;
plus matmul followed by dequantize or by a scale multiply. Their check (``_check_matmul``)
accepts what cuBLAS runs, as TVM's does: element types (fp16, fp32, int8, bf16, fp8 e4m3),
a constant reduction axis, int8 sizes that are multiples of 4, fp8 with a transposed rhs
and 16-byte-aligned rows, a bias that is a vector, and batch counts that are equal (or a
batched lhs with an unbatched rhs). ``partition_for_cublas`` partitions a module with all of
them for the ``cublas`` codegen.
"""
from __future__ import annotations

import operator
from functools import reduce
from typing import Any

from workbench.ir.dtype import parse as parse_dtype
from workbench.ir.module import IRModule
from workbench.relax.backend.pattern_registry import get_patterns_with_prefix, register_patterns
from workbench.relax.backend.patterns import (
    make_matmul_dequantize_pattern, make_matmul_multiply_pattern, make_matmul_pattern,
)
from workbench.relax.backend.utils import has_leaking_intermediate_variables
from workbench.relax.expr import Call, Op
from workbench.relax.transform.fuse_ops_by_pattern import FuseOpsByPattern
from workbench.relax.transform.fusion_pattern import PatternCheckContext
from workbench.tir.arith.analyzer import Analyzer
from workbench.tir.expr import IntImm, PrimExpr, Var

_FP8 = "float8_e4m3fn"


def _is_supported_dtype(lhs_dtype: str, rhs_dtype: str, out_dtype: str) -> bool:
    """Whether cuBLAS multiplies these element types."""
    if lhs_dtype == _FP8 and rhs_dtype == _FP8:
        return out_dtype != "float8_e5m2"  # an e4m3 product cannot be written as e5m2
    return lhs_dtype == rhs_dtype and lhs_dtype in ("float16", "float32", "int8", "bfloat16")


def _const(dim: Any) -> int | None:
    """The value of a constant dimension, None for a symbolic one."""
    if isinstance(dim, int):
        return dim
    return dim.value if isinstance(dim, IntImm) else None


def _product(dims: Any) -> Any:
    """The product of dims, folded to an int when they are constant."""
    prod = reduce(operator.mul, dims, 1)
    if isinstance(prod, PrimExpr):
        prod = Analyzer().simplify(prod)
        return prod.value if isinstance(prod, IntImm) else prod
    return prod


def _check_matmul(context: PatternCheckContext) -> bool:
    """Whether cuBLAS can run the matched matmul (see the module docstring)."""
    if has_leaking_intermediate_variables(context):
        return False
    ann = context.annotated_expr
    lhs, rhs, matmul = ann["lhs"], ann["rhs"], ann["root"]
    if "scale" in ann and "zp" in ann:
        scale, zero_point = ann["scale"], ann["zp"]
        if scale.struct_info.ndim != 0 or zero_point.struct_info.ndim != 0:
            return False  # only scalar scale and zero point
        if zero_point.data.numpy()[()].item() != 0.0:
            return False
    lhs_dtype, rhs_dtype = lhs.struct_info.dtype, rhs.struct_info.dtype
    out_dtype = matmul.struct_info.dtype
    if not _is_supported_dtype(lhs_dtype, rhs_dtype, out_dtype):
        return False
    lhs_shape, rhs_shape = tuple(lhs.struct_info.shape), tuple(rhs.struct_info.shape)
    if _const(lhs_shape[-1]) is None:
        return False  # the reduction axis must be constant
    if lhs_dtype == "int8":
        if _const(lhs_shape[-1]) % 4 != 0:
            return False  # IGEMM reduces over multiples of 4
        if _const(rhs_shape[-1]) is None or _const(rhs_shape[-1]) % 4 != 0:
            return False
    elif lhs_dtype == _FP8:
        if not _rhs_transposed(matmul, context):
            return False  # cuBLAS fp8 needs the rhs transposed
        if not _aligned(rhs_shape[-1], lhs_dtype) or not _aligned(rhs_shape[-2], out_dtype):
            return False  # and 16-byte-aligned rows
    lhs_batches, rhs_batches = _product(lhs_shape[:-2]), _product(rhs_shape[:-2])
    if "bias" in ann:
        if lhs_dtype == "int8":
            return False  # IGEMM has no epilogue
        bias_batches = _const(_product(tuple(ann["bias"].struct_info.shape)[:-1]))
        if bias_batches is None or bias_batches > 1:
            return False  # only a bias vector
    # cuBLASLt cannot broadcast a batch of one against a batch; a batched lhs with an
    # unbatched rhs runs as one GEMM over the flattened batch.
    analyzer = Analyzer()
    if _symbolic(lhs_batches) or _symbolic(rhs_batches):
        return True
    return analyzer.can_prove_equal(lhs_batches, rhs_batches) or (
        analyzer.can_prove(_ge(lhs_batches, 1)) and analyzer.can_prove_equal(rhs_batches, 1))


def _symbolic(e: Any) -> bool:
    return isinstance(e, Var)


def _ge(a: Any, b: int) -> Any:
    return a >= b if isinstance(a, PrimExpr) else bool(a >= b)


def _rhs_transposed(matmul: Call, context: PatternCheckContext) -> bool:
    rhs_var = matmul.args[1]
    value = context.matched_bindings.get(rhs_var)
    return isinstance(value, Call) and isinstance(value.op, Op) and \
        value.op.name == "relax.permute_dims"


def _aligned(dim: Any, dtype: str) -> bool:
    value = _const(dim)
    return value is not None and value % (16 // parse_dtype(dtype).bytes) == 0


register_patterns([
    ("cublas.matmul", *make_matmul_pattern(with_bias=False), _check_matmul),
    ("cublas.matmul_bias", *make_matmul_pattern(with_bias=True), _check_matmul),
    ("cublas.matmul_bias_relu",
     *make_matmul_pattern(with_bias=True, activation="relax.nn.relu"), _check_matmul),
    ("cublas.matmul_bias_gelu",
     *make_matmul_pattern(with_bias=True, activation="relax.nn.gelu"), _check_matmul),
    ("cublas.matmul_transposed",
     *make_matmul_pattern(with_bias=False, transposed_rhs=True), _check_matmul),
    ("cublas.matmul_transposed_bias",
     *make_matmul_pattern(with_bias=True, transposed_rhs=True), _check_matmul),
    ("cublas.matmul_transposed_bias_relu",
     *make_matmul_pattern(with_bias=True, activation="relax.nn.relu", transposed_rhs=True),
     _check_matmul),
    ("cublas.matmul_transposed_bias_gelu",
     *make_matmul_pattern(with_bias=True, activation="relax.nn.gelu", transposed_rhs=True),
     _check_matmul),
    ("cublas.matmul_transposed_dequantize",
     *make_matmul_dequantize_pattern(transposed_rhs=True), _check_matmul),
    ("cublas.matmul_transposed_multiply",
     *make_matmul_multiply_pattern(transposed_rhs=True), _check_matmul),
])


def partition_for_cublas(mod: IRModule, bind_constants: bool = False) -> IRModule:
    """``mod`` with the parts cuBLAS can run grouped into functions annotated for the
    ``cublas`` codegen (``FuseOpsByPattern`` with every ``cublas.*`` pattern,
    ``annotate_codegen=True``). ``bind_constants`` keeps constants inside the parts."""
    if not isinstance(mod, IRModule):
        raise TypeError(f"partition_for_cublas expects an IRModule, got {type(mod).__name__}")
    return FuseOpsByPattern(get_patterns_with_prefix("cublas"), bind_constants=bind_constants,
                            annotate_codegen=True)(mod)


__all__ = ["partition_for_cublas"]

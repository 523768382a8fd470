"""Pattern makers the backends' tables share (TVM's ``relax.backend.patterns``).

Each returns ``(pattern, annotations)``: the pattern of a fused operation and ``{name:
sub-pattern}`` for the pieces a check function or codegen wants (``lhs``, ``rhs``, ``bias``,
``root`` -- the main op's call).
"""
from __future__ import annotations

from typing import Optional

from workbench.relax.dpl.pattern import DFPattern, is_const, is_op, wildcard

Annotated = tuple[DFPattern, dict[str, DFPattern]]


def _with_bias_activation_pattern(out: DFPattern, annotations: dict[str, DFPattern],
                                  with_bias: bool = False,
                                  activation: Optional[str] = None) -> Annotated:
    if with_bias:
        annotations["bias"] = bias = wildcard()
        out = is_op("relax.add")(out, bias)
    if activation:
        out = is_op(activation)(out)
    return out, annotations


def make_fused_bias_activation_pattern(op_name: str, with_bias: bool = False,
                                       activation: Optional[str] = None) -> Annotated:
    """``op_name(lhs, rhs)``, then ``+ bias`` (``with_bias``), then ``activation`` (an op name
    such as ``"relax.nn.relu"``)."""
    lhs, rhs = wildcard(), wildcard()
    out = is_op(op_name)(lhs, rhs)
    return _with_bias_activation_pattern(out, {"lhs": lhs, "rhs": rhs, "root": out},
                                         with_bias, activation)


def make_residual_block_pattern(node_output: DFPattern | Annotated,
                                binary_op: str = "relax.add",
                                activation: Optional[str] = None) -> Annotated:
    """``binary_op(node_output, residual)`` (either argument order), then ``activation``."""
    node_output, annotations = node_output if isinstance(node_output, tuple) else \
        (node_output, {})
    residual = wildcard()
    op = is_op(binary_op)
    out = op(node_output, residual) | op(residual, node_output)
    if activation is not None:
        out = is_op(activation)(out)
    return out, {**annotations, "residual": residual}


def make_conv2d_pattern(with_bias: bool = False, activation: Optional[str] = None
                        ) -> Annotated:
    """``relax.nn.conv2d(input, weight)`` with optional bias and activation."""
    data, kernel = wildcard(), wildcard()
    conv = is_op("relax.nn.conv2d")(data, kernel)
    return _with_bias_activation_pattern(conv, {"input": data, "weight": kernel, "root": conv},
                                         with_bias, activation)


def make_matmul_pattern(with_bias: bool = False, activation: Optional[str] = None,
                        transposed_rhs: bool = False) -> Annotated:
    """``relax.matmul(lhs, rhs)`` -- ``rhs`` through ``relax.permute_dims`` when
    ``transposed_rhs`` (a linear layer's weight) -- with optional bias and activation."""
    lhs, rhs = wildcard(), wildcard()
    annotations = {"lhs": lhs, "rhs": rhs}
    if transposed_rhs:
        rhs = is_op("relax.permute_dims")(rhs)
    out = is_op("relax.matmul")(lhs, rhs)
    annotations["root"] = out
    return _with_bias_activation_pattern(out, annotations, with_bias, activation)


def make_matmul_dequantize_pattern(transposed_rhs: bool = False) -> Annotated:
    """``relax.dequantize(matmul(lhs, rhs), scale, zp)`` with constant scale and zero point."""
    lhs, rhs = wildcard(), wildcard()
    annotations = {"lhs": lhs, "rhs": rhs}
    if transposed_rhs:
        rhs = is_op("relax.permute_dims")(rhs)
    out = is_op("relax.matmul")(lhs, rhs)
    annotations["root"] = out
    scale, zp = is_const(), is_const()
    annotations.update({"scale": scale, "zp": zp})
    return is_op("relax.dequantize")(out, scale, zp), annotations


def make_matmul_multiply_pattern(transposed_rhs: bool = False) -> Annotated:
    """``astype(matmul(lhs, rhs) * (scaleA * scaleB))`` with one-element scales."""
    lhs, rhs, scale_a, scale_b = wildcard(), wildcard(), wildcard(), wildcard()
    annotations = {"lhs": lhs, "rhs": rhs, "scaleA": scale_a, "scaleB": scale_b}
    if transposed_rhs:
        rhs = is_op("relax.permute_dims")(rhs)
    out = is_op("relax.matmul")(lhs, rhs)
    annotations["root"] = out
    scale = is_op("relax.multiply")(scale_a.has_shape((1,)), scale_b.has_shape((1,)))
    out = is_op("relax.astype")(is_op("relax.multiply")(out, scale))
    return out, annotations


def make_layer_norm_pattern() -> Annotated:
    """``relax.nn.layer_norm(input, gamma, beta)``."""
    return is_op("relax.nn.layer_norm")(wildcard(), wildcard(), wildcard()), {}


__all__ = ["make_fused_bias_activation_pattern", "make_residual_block_pattern",
           "make_conv2d_pattern", "make_matmul_pattern", "make_matmul_dequantize_pattern",
           "make_matmul_multiply_pattern", "make_layer_norm_pattern"]

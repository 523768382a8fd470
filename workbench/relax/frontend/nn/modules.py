"""Standard nn modules: Linear, Conv2D, LayerNorm, RMSNorm, Embedding, ReLU, GELU, SiLU."""
from __future__ import annotations

from typing import Any, Sequence

from workbench.relax.frontend.nn import op
from workbench.relax.frontend.nn.core import Module, Parameter, Tensor


class Linear(Module):
    """``x @ weight.T + bias`` with ``weight`` (out_features, in_features)."""

    def __init__(self, in_features: int, out_features: int, bias: bool = True,
                 dtype: str | None = None, out_dtype: str | None = None):
        self.in_features, self.out_features = in_features, out_features
        self.out_dtype = out_dtype
        self.weight = Parameter((out_features, in_features), dtype)
        self.bias = Parameter((out_features,), dtype) if bias else None

    def forward(self, x: Tensor) -> Tensor:
        y = op.matmul(x, op.permute_dims(self.weight), out_dtype=self.out_dtype)
        return op.add(y, self.bias) if self.bias is not None else y


class Conv2D(Module):
    """2-d convolution; the weight is (out, in / groups, k, k) for NCHW, (k, k, in / groups,
    out) for NHWC."""

    def __init__(self, in_channels: int, out_channels: int, kernel_size: int | Sequence[int],
                 stride: Any = 1, padding: Any = 0, dilation: Any = 1, groups: int = 1,
                 bias: bool = True, dtype: str | None = None, data_layout: str = "NCHW"):
        kh, kw = (kernel_size, kernel_size) if isinstance(kernel_size, int) else kernel_size
        self.stride, self.padding, self.dilation, self.groups = stride, padding, dilation, groups
        self.data_layout = data_layout
        shape = (out_channels, in_channels // groups, kh, kw) if data_layout == "NCHW" \
            else (kh, kw, in_channels // groups, out_channels)
        self.weight = Parameter(shape, dtype)
        self.bias = Parameter((out_channels,), dtype) if bias else None

    def forward(self, x: Tensor) -> Tensor:
        return op.conv2d(x, self.weight, self.bias, self.stride, self.padding, self.dilation,
                         self.groups, self.data_layout)


class LayerNorm(Module):
    """Layer norm over the trailing ``normalized_shape`` dims."""

    def __init__(self, normalized_shape: int, eps: float = 1e-5,
                 elementwise_affine: bool = True, dtype: str | None = None):
        self.normalized_shape, self.eps = normalized_shape, eps
        self.weight = Parameter((normalized_shape,), dtype) if elementwise_affine else None
        self.bias = Parameter((normalized_shape,), dtype) if elementwise_affine else None

    def forward(self, x: Tensor) -> Tensor:
        return op.layer_norm(x, self.normalized_shape, self.weight, self.bias, self.eps)


class RMSNorm(Module):
    """RMS norm over ``axes`` with a ``weight`` of ``hidden_size`` (and an optional bias)."""

    def __init__(self, hidden_size: int, axes: int | Sequence[int] = -1, epsilon: float = 1e-5,
                 bias: bool = False, dtype: str | None = None):
        self.axes, self.epsilon = axes, epsilon
        self.weight = Parameter((hidden_size,), dtype)
        self.bias = Parameter((hidden_size,), dtype) if bias else None

    def forward(self, x: Tensor) -> Tensor:
        y = op.rms_norm(x, self.weight, self.axes, self.epsilon)
        return op.add(y, self.bias) if self.bias is not None else y


class Embedding(Module):
    """Rows of ``weight`` (num, dim) at integer ``x`` (any shape)."""

    def __init__(self, num: int, dim: int, dtype: str | None = None):
        self.num, self.dim = num, dim
        self.weight = Parameter((num, dim), dtype)

    def forward(self, x: Tensor) -> Tensor:
        if x.ndim == 1:
            return op.take(self.weight, x, axis=0)
        flat = op.reshape(x, [-1])
        rows = op.take(self.weight, flat, axis=0)
        return op.reshape(rows, [*x.shape, self.dim])


class ReLU(Module):
    def forward(self, x: Tensor) -> Tensor:
        return op.relu(x)


class GELU(Module):
    def forward(self, x: Tensor) -> Tensor:
        return op.gelu(x)


class SiLU(Module):
    def forward(self, x: Tensor) -> Tensor:
        return op.silu(x)


__all__ = ["Linear", "Conv2D", "LayerNorm", "RMSNorm", "Embedding", "ReLU", "GELU", "SiLU"]

"""Neural-network ops (``relax.op.nn``)."""
from workbench.relax.op.linear_algebra import linear
from workbench.relax.op.nn.activation import (
    gelu, gelu_tanh, leaky_relu, log_softmax, relu, silu, softmax,
)
from workbench.relax.op.nn.attention import attention
from workbench.relax.op.nn.convolution import conv2d, conv2d_winograd
from workbench.relax.op.nn.convolution_int8 import conv2d_nchwc_int8
from workbench.relax.op.nn.normalization import batch_norm, layer_norm, rms_norm
from workbench.relax.op.nn.padding import pad
from workbench.relax.op.nn.pooling import (
    adaptive_avg_pool2d, avg_pool2d, max_pool2d, max_pool2d_with_indices,
)

__all__ = ["relu", "gelu", "gelu_tanh", "silu", "leaky_relu", "softmax", "log_softmax",
           "attention", "conv2d", "conv2d_winograd", "conv2d_nchwc_int8", "batch_norm",
           "layer_norm", "rms_norm", "max_pool2d", "avg_pool2d", "adaptive_avg_pool2d", "linear",
           "pad", "max_pool2d_with_indices"]

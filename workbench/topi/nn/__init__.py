"""Neural-network operators (TVM's ``topi.nn``): convolutions, pooling, matrix products,
softmax, normalization, activations and padding."""
from workbench.topi.nn.conv2d import (
    conv2d, conv2d_nchw, conv2d_nhwc, depthwise_conv2d_nchw, depthwise_conv2d_nhwc,
    get_pad_tuple, group_conv2d_nchw, group_conv2d_nhwc,
)
from workbench.topi.nn.dense import batch_matmul, dense, matmul
from workbench.topi.nn.elemwise import gelu, leaky_relu, relu, silu
from workbench.topi.nn.layer_norm import layer_norm
from workbench.topi.nn.pad import pad, pad_mode
from workbench.topi.nn.pooling import (
    adaptive_avg_pool2d, adaptive_pool, global_pool, max_pool2d_with_indices, pool2d,
)
from workbench.topi.nn.quantize import dequantize, quantize, requantize
from workbench.topi.nn.softmax import log_softmax, softmax
from workbench.topi.transform import flatten

__all__ = [
    "conv2d", "conv2d_nchw", "conv2d_nhwc", "depthwise_conv2d_nchw", "depthwise_conv2d_nhwc",
    "group_conv2d_nchw", "group_conv2d_nhwc", "get_pad_tuple", "batch_matmul", "dense",
    "matmul", "gelu", "leaky_relu", "relu", "silu", "layer_norm", "pad", "pad_mode", "adaptive_avg_pool2d",
    "adaptive_pool", "global_pool", "pool2d", "max_pool2d_with_indices", "log_softmax", "softmax", "flatten", "requantize",
    "quantize", "dequantize",
]

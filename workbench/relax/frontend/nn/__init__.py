"""``relax.frontend.nn``: PyTorch-like modules traced into Relax with ``Module.export_tvm``."""
from workbench.relax.frontend.nn import op, spec
from workbench.relax.frontend.nn.core import (
    Module, ModuleList, Parameter, Sequential, Tensor,
)
from workbench.relax.frontend.nn.kv_cache import FixedKVCache
from workbench.relax.frontend.nn.modules import (
    GELU, Conv2D, Embedding, LayerNorm, Linear, ReLU, RMSNorm, SiLU,
)
from workbench.relax.frontend.nn.op import gelu, relu, silu, softmax
from workbench.relax.frontend.nn.extern_ops import (
    ExternModule, ObjectModule, SourceModule, extern, tensor_expr_op, tensor_ir_op,
)

__all__ = ["Module", "ModuleList", "Parameter", "Sequential", "Tensor", "Linear", "Conv2D",
           "LayerNorm", "RMSNorm", "Embedding", "ReLU", "GELU", "SiLU", "op", "spec", "relu",
           "gelu", "silu", "softmax", "FixedKVCache", "extern", "tensor_expr_op",
           "tensor_ir_op", "ExternModule", "ObjectModule", "SourceModule"]

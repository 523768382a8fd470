"""Relax passes: legalization, then the compilation pipeline (see workbench.relax.pipeline)."""
from workbench.relax.transform.legalize_ops import LegalizeOps
from workbench.relax.transform.annotate_tir_op_pattern import AnnotateTIROpPattern, OpPatternKind
# The compilation passes after legalization (issue 5), in pipeline order.
from workbench.relax.transform.fuse_ops import FuseOps
from workbench.relax.transform.fuse_tir import FuseTIR
from workbench.relax.transform.dead_code_elimination import DeadCodeElimination
from workbench.relax.transform.call_tir_rewrite import CallTIRRewrite, ToNonDataflow
from workbench.relax.transform.static_plan_block_memory import (
    LowerAllocTensor, MemoryUsage, StaticPlanBlockMemory, estimate_memory_usage, memory_usage,
)
from workbench.relax.transform.vm_shape_lower import VMShapeLower
from workbench.relax.transform.attach_global_symbol import AttachGlobalSymbol
from workbench.relax.transform.bind_params import BindParams
from workbench.relax.transform.canonicalize_bindings import CanonicalizeBindings

__all__ = ["LegalizeOps", "AnnotateTIROpPattern", "OpPatternKind", "FuseOps", "FuseTIR",
           "DeadCodeElimination", "ToNonDataflow", "CallTIRRewrite", "StaticPlanBlockMemory",
           "LowerAllocTensor", "VMShapeLower", "AttachGlobalSymbol", "BindParams",
           "CanonicalizeBindings",
           "MemoryUsage", "memory_usage", "estimate_memory_usage"]
# Tuned kernels from a meta-schedule database (issue 7): the pass lives with the tuner
# (floor 5, workbench.meta_schedule.relax_passes); TVM's name is re-exported here, loaded on
# first use (module __getattr__ below) so that importing relax does not import the tuner. A
# database object comes from the tuner, so relax.build(database=...) finds it loaded.
__all__ += ["MetaScheduleApplyDatabase"]
# Constant weights of layout-rewritten tuned kernels, packed at compile time.
from workbench.relax.transform.prepack_constant_weights import PrepackConstantWeights  # noqa: E402

__all__ += ["PrepackConstantWeights"]
# Batch norm folded into the convolution before it (constant weights), at compile time.
from workbench.relax.transform.fold_batchnorm import FoldBatchnormToConv2D  # noqa: E402

__all__ += ["FoldBatchnormToConv2D"]
# Convolutional graphs in a channel-blocked layout (NCHW16c / NCHW8c), weights reordered at
# compile time.
from workbench.relax.transform.convert_layout_nchwc import ConvertLayoutNCHWc  # noqa: E402

__all__ += ["ConvertLayoutNCHWc"]
# A per-channel scale of a convolution's input (squeeze-excite) moved onto its weights.
from workbench.relax.transform.fold_channel_scale import FoldChannelScaleToConv2D  # noqa: E402

__all__ += ["FoldChannelScaleToConv2D"]
# The explicit matmul-scale-mask-softmax-matmul chain as one relax.nn.attention call.
from workbench.relax.transform.fuse_attention import FuseAttention  # noqa: E402

__all__ += ["FuseAttention"]
# A linear layer's flatten / unflatten views moved past its epilogue, where they cancel.
from workbench.relax.transform.sink_reshapes import SinkReshapes  # noqa: E402

__all__ += ["SinkReshapes"]
# Products with a constant weight computed over whole vector registers of columns.
from workbench.relax.transform.pad_matmul_columns import PadMatmulColumns  # noqa: E402

__all__ += ["PadMatmulColumns"]
# Kernel calls on constants computed at compile time.
from workbench.relax.transform.fold_constant import FoldConstant  # noqa: E402

__all__ += ["FoldConstant"]


# TVM's build-pipeline steps Workbench's VM does not need (unchanged module; see the module).
from workbench.relax.transform.vm_build_steps import (  # noqa: E402
    AttachExternModules, ComputePrimValue, KillAfterLastUse, LowerRuntimeBuiltin,
    RemovePurityChecking, RewriteCUDAGraph, RewriteDataflowReshape,
)
__all__ += ["RewriteDataflowReshape", "RemovePurityChecking", "RewriteCUDAGraph",
            "KillAfterLastUse", "LowerRuntimeBuiltin", "ComputePrimValue", "AttachExternModules"]
# matmul(x, permute_dims(w)) as one kernel reading w in place (before LegalizeOps).
from workbench.relax.transform.fuse_transpose_matmul import FuseTransposeMatmul  # noqa: E402
__all__ += ["FuseTransposeMatmul"]
# Writing passes: per-function passes, and the module-level infrastructure under TVM's names.
from workbench.relax.transform.function_pass import FunctionPass, function_pass  # noqa: E402
from workbench.ir.transform import Pass, PassContext, PassInfo, Sequential  # noqa: E402
from workbench.ir.transform import module_pass  # noqa: E402

__all__ += ["FunctionPass", "function_pass", "module_pass", "Pass", "PassContext", "PassInfo",
            "Sequential", "MetaScheduleTuneTIR", "MetaScheduleTuneIRMod"]

# Bring your own codegen (issue 23): partition by dataflow patterns, then hand the partitions
# to a registered backend codegen.
from workbench.relax.transform.fusion_pattern import FusionPattern, PatternCheckContext  # noqa: E402
from workbench.relax.transform.fuse_ops_by_pattern import FuseOpsByPattern  # noqa: E402
from workbench.relax.transform.run_codegen import RunCodegen  # noqa: E402
from workbench.relax.transform.merge_composite_functions import MergeCompositeFunctions  # noqa: E402,E501

__all__ += ["FusionPattern", "PatternCheckContext", "FuseOpsByPattern", "RunCodegen",
            "MergeCompositeFunctions"]

# WinogradFromRecords: the tuner's choice between a convolution's Winograd and direct kernels,
# ConvertLayoutNCHWc's ``choose`` in a build with a database.
_TUNER_PASSES = ("MetaScheduleApplyDatabase", "MetaScheduleTuneTIR", "MetaScheduleTuneIRMod",
                 "WinogradFromRecords")


def __getattr__(name: str):
    """TVM's names for the tuner's Relax passes, imported from the tuner on first use."""
    if name in _TUNER_PASSES:
        import workbench.meta_schedule.relax_passes as relax_passes
        return getattr(relax_passes, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")

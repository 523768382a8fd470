"""The Relax compilation pipeline: one named, ordered list of module passes from a graph to
VM-ready code (TVM's ``relax.get_default_pipeline``).

Each stage is a pass object with a ``name`` and ``__call__(IRModule) -> IRModule``. A
:class:`Pipeline` runs them in order and reports each step to an optional instrument (the pass
name, the module after it and the seconds it took), which is how notebooks show the graph pass
by pass (:func:`run_with_log`), like the TIR lowering pipeline.

The default order, and why:

0. ``FoldBatchnormToConv2D``  batch norm after a constant-weight convolution folded into its
                              weights and a per-channel shift (compile time)
   ``ConvertLayoutNCHWc``     convolutions and the ops between them in the blocked layout
                              NCHW{16,8}c, weights reordered at compile time, one
                              ``layout_transform`` per tensor at the region's boundaries
                              (after a CanonicalizeBindings + DeadCodeElimination that
                              forward batch norm's tuple)                    [convert_layout]
   ``FoldChannelScaleToConv2D`` a per-channel scale of a convolution's input (squeeze-excite's
                              ``x * s``) multiplies the weights instead of the feature map
   ``FuseAttention``          the explicit softmax(Q K^T * scale + mask) V chain (both
                              importers' hand-written / decomposed attention) -> one
                              ``nn.attention``, which legalizes to the fused streaming kernel
   ``SinkReshapes``           a linear layer's flatten / unflatten views cancel, so its
                              product, bias, activation and residual add are one chain
   ``PadMatmulColumns``       a product with a constant weight whose columns are not whole
                              vector registers computes zero-padded ones, sliced after
1. ``LegalizeOps``            high-level ops -> ``call_tir`` of te-made PrimFuncs
2. ``AnnotateTIROpPattern``   each PrimFunc's fusion pattern (``op_pattern``)
   ``FoldConstant``           kernel calls on constants only (a bound weight's transpose)
                              are computed at compile time
3. ``CanonicalizeBindings``   forward ``y = x`` / ``y = (a, b)[0]`` so fusion sees through
4. ``DeadCodeElimination``    tuples left unused by 3 would block fusion
5. ``FuseOps``                group producers/consumers into Primitive functions   [fuse]
6. ``FuseTIR``                one PrimFunc per group                                [fuse]
   ``MetaScheduleApplyDatabase`` tuned schedules from a database                 [database]
   ``AnnotateConstantParams`` each kernel's parameters that are constants at every call
                              (repacking them is free: the default schedule may) [default_schedule]
   ``ApplyDefaultSchedule``   every kernel the database did not cover gets a default
                              schedule from its block structure (``workbench.dlight``)
                                                                          [default_schedule]
7. ``PrepackConstantWeights`` kernels with a weight-packing (layout rewrite) block take
                              constant weights packed at compile time instead
8. ``DeadCodeElimination``    unused bindings and functions (fusion leaves some)
9. ``ToNonDataflow``          from here on, code has effects
10. ``CallTIRRewrite``        ``call_tir`` -> ``builtin.alloc_tensor`` + DPS kernel call
11. ``StaticPlanBlockMemory`` share storage between non-overlapping lifetimes   [plan_memory]
12. ``LowerAllocTensor``      what is left gets its own storage
13. ``VMShapeLower``          parameter checks, shape heap, ``make_shape``
14. ``AttachGlobalSymbol``    kernels are found by name in the compiled library

``relax.build`` then runs ``VMCodeGen`` and compiles the PrimFuncs.
"""
from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Any, Callable, Iterable

from workbench.ir.module import IRModule
from workbench.ir.transform import Pass, PassContext, Sequential

# (pass name, module after the pass, seconds)
RelaxInstrument = Callable[[str, IRModule, float], None]


class Pipeline(Sequential):
    """An ordered, flat list of passes; ``pipeline(mod)`` runs them all, as a
    :class:`workbench.transform.Sequential` (instruments see the pipeline and each pass; the
    context's opt level, required and disabled passes apply).

    ``pipeline(mod, instrument)`` also calls ``instrument(pass_name, module, seconds)`` after
    each pass it runs (how :func:`run_with_log` and ``relax.build(instrument=...)`` observe a
    build)."""

    def __init__(self, passes: Iterable[Pass], name: str = "pipeline"):
        super().__init__(list(passes), name=name)

    def __call__(self, mod: IRModule, instrument: RelaxInstrument | None = None) -> IRModule:
        if not isinstance(mod, IRModule):
            raise TypeError(f"{self.name}: expected an IRModule, got {type(mod).__name__}")
        if instrument is None:
            return super().__call__(mod)
        started = [time.perf_counter()]

        def after(p: Pass, m: IRModule) -> None:
            instrument(p.info.name, m, time.perf_counter() - started[0])
            started[0] = time.perf_counter()  # the instrument's own time is not the next pass's

        def body(m: IRModule, ctx: PassContext) -> IRModule:
            started[0] = time.perf_counter()
            return self._run_members(m, ctx, after)

        return self._run(mod, PassContext.current(), body)

    @property
    def pass_names(self) -> list[str]:
        return [p.info.name for p in self.passes]

    def __repr__(self) -> str:
        return f"Pipeline({self.name!r}, [{', '.join(self.pass_names)}])"


def get_default_pipeline(target: Any = None, fuse: bool = True,
                         plan_memory: bool = True, database: Any = None,
                         default_schedule: bool | None = None,
                         convert_layout: bool | None = None,
                         winograd: bool | str | None = None,
                         choose_winograd: Any = None) -> Pipeline:
    """The default pipeline for ``target`` (only CPU/llvm targets exist; the target is accepted
    for TVM compatibility). ``fuse=False`` skips FuseOps/FuseTIR (one kernel per op);
    ``plan_memory=False`` skips StaticPlanBlockMemory (one storage per tensor).
    ``database`` (a meta-schedule Database) adds ``MetaScheduleApplyDatabase`` right after
    fusion, so the compiled graph uses the tuned kernels (see ``meta_schedule.compile_relax``);
    ``PrepackConstantWeights`` then makes the tuned kernels that pack a constant weight on
    every call (RewriteLayout) take it packed at compile time.
    ``default_schedule`` (default: the option ``default_schedule``, on) adds
    ``ApplyDefaultSchedule`` with the CPU rules (``workbench.dlight``) after that: every
    kernel not already scheduled -- by the database or by hand -- gets a default schedule
    (parallel, vectorized, register-tiled), whose constant weights the next pass packs.
    ``convert_layout`` (default: the option ``convert_layout``, on) adds
    ``ConvertLayoutNCHWc`` for the target after batch-norm folding (with the binding clean-up
    it needs first): convolutional graphs run in the channel-blocked layout; ``winograd``
    and ``choose_winograd`` are its arguments ``winograd`` and ``choose`` (None: the option
    ``winograd``, and with a ``database`` each 3x3 convolution that can be a Winograd one is
    a Winograd or a direct convolution as the database's records of the two kernels say --
    ``WinogradFromRecords``, the rule where the database has not both)."""
    from workbench.relax import transform as T
    from workbench.relax.transform.attach_global_symbol import AttachGlobalSymbol
    from workbench.relax.transform.call_tir_rewrite import CallTIRRewrite, ToNonDataflow
    from workbench.relax.transform.dead_code_elimination import DeadCodeElimination
    from workbench.relax.transform.fuse_ops import FuseOps
    from workbench.relax.transform.fuse_tir import FuseTIR
    from workbench.relax.transform.prepack_constant_weights import PrepackConstantWeights
    from workbench.relax.transform.static_plan_block_memory import (
        LowerAllocTensor, StaticPlanBlockMemory,
    )
    from workbench.relax.transform.vm_shape_lower import VMShapeLower
    from workbench.relax.transform.canonicalize_bindings import CanonicalizeBindings
    from workbench.relax.transform.fold_constant import FoldConstant
    from workbench.relax.transform.fold_batchnorm import FoldBatchnormToConv2D
    if convert_layout is None:
        from workbench import options
        convert_layout = options.get("convert_layout")
    if database is None:
        database = _current_database()
    passes: list[Pass] = [FoldBatchnormToConv2D()]
    if convert_layout:
        choose = choose_winograd
        if choose is None and database is not None:
            choose = T.WinogradFromRecords(database, target)
        passes += [CanonicalizeBindings(), DeadCodeElimination(),
                   T.ConvertLayoutNCHWc(target, winograd=winograd, choose=choose)]
    passes += [T.FoldChannelScaleToConv2D(), T.FuseAttention(), T.SinkReshapes(),
               T.PadMatmulColumns(target),
               T.LegalizeOps(), T.AnnotateTIROpPattern(),
               FoldConstant(target),
               CanonicalizeBindings(), DeadCodeElimination()]
    if fuse:
        passes += [FuseOps(), FuseTIR()]
    if database is not None:
        from workbench.relax.transform import MetaScheduleApplyDatabase  # the tuner's pass
        passes.append(MetaScheduleApplyDatabase(database, target))
    if default_schedule is None:
        from workbench import options
        default_schedule = options.get("default_schedule")
    if default_schedule:
        from workbench.dlight import DefaultCPUSchedule
        from workbench.relax.transform.annotate_constant_params import AnnotateConstantParams
        passes += [AnnotateConstantParams(), DefaultCPUSchedule(target)]
    # Always, not only with a database: a module may bring its own scheduled kernels; without
    # a packing block the pass only walks each PrimFunc's statements once.
    passes += [PrepackConstantWeights(), DeadCodeElimination(), ToNonDataflow(),
               CallTIRRewrite()]
    if plan_memory:
        passes.append(StaticPlanBlockMemory())
    passes += [LowerAllocTensor(), VMShapeLower(), AttachGlobalSymbol()]
    return Pipeline(passes, "default")


def _current_database() -> Any:
    """The tuner's ``Database.current()`` (TVM's ``with database:``), without importing the
    tuner: if it was never imported, no database can be in scope."""
    import sys
    db_module = sys.modules.get("workbench.meta_schedule.database")
    return None if db_module is None else db_module.Database.current()


@dataclass
class PassRecord:
    """The module after one pass of a pipeline run."""

    pass_name: str
    seconds: float
    script: str

    def _repr_html_(self) -> str:
        from workbench.ir.printer import html_highlight
        return f"<b>{self.pass_name}</b> ({self.seconds * 1e3:.1f} ms)" + \
            html_highlight(self.script)


def run_with_log(mod: IRModule, pipeline: Pipeline | None = None
                 ) -> tuple[IRModule, list[PassRecord]]:
    """Run ``pipeline`` (default: :func:`get_default_pipeline`) keeping the module's text and
    the time after every pass."""
    log: list[PassRecord] = []

    def record(name: str, m: IRModule, seconds: float) -> None:
        log.append(PassRecord(name, seconds, m.script()))

    out = (pipeline or get_default_pipeline())(mod, record)
    return out, log


__all__ = ["Pipeline", "get_default_pipeline", "run_with_log", "PassRecord", "RelaxInstrument"]



def __getattr__(name: str) -> Any:
    """TVM's ``relax.pipeline.get_pipeline`` / ``zero_pipeline`` / ... live in
    :mod:`workbench.relax.named_pipelines` (which builds on this module)."""
    from workbench.relax import named_pipelines
    if name in named_pipelines.__all__:
        return getattr(named_pipelines, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")

"""The lowering pipeline: one flat, named list of passes from block-form TIR to codegen-ready TIR.

Each stage is a :class:`Pass` over PrimFuncs. :func:`lower` runs them in order on every PrimFunc
of a module and reports each step to an optional instrument (the pass name, the function, the
IR after the pass and the seconds it took), which is how notebooks show the IR pass by pass.
"""
from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Callable, Iterable

from workbench.ir.module import IRModule
from workbench.ir.transform import Pass as _IRPass, PassContext, Sequential
from workbench.tir.analysis.verify import verify_prim_func
from workbench.tir.function import PrimFunc
from workbench.tir.transform.flatten_buffer import flatten_buffer
from workbench.tir.transform.legalize_bf16 import legalize_bf16
from workbench.tir.transform.lower_blocks import lower_init_block, lower_opaque_block
from workbench.tir.transform.lower_match_buffer import lower_match_buffer
from workbench.tir.transform.plan_buffers import compact_buffer_allocation, plan_buffer_allocation
from workbench.tir.transform.simplify import simplify_func
from workbench.tir.transform.unroll_loop import unroll_loop
from workbench.tir.transform.unswitch_predicates import unswitch_tile_predicates
from workbench.tir.transform.parallel_when_worth_it import parallel_when_worth_it
from workbench.tir.transform.vectorize_loop import vectorize_loop


def _lower_opaque_block_keeping_views(func: PrimFunc) -> PrimFunc:
    return lower_opaque_block(func, keep_match_buffers=True)


class Pass(_IRPass):
    """A named function-level pass: ``fn`` on every PrimFunc of a module. It is a
    ``workbench.transform.Pass`` (a Sequential runs it, instruments see it); called on a
    PrimFunc alone it is just ``fn``."""

    def __init__(self, name: str, fn: Callable[[PrimFunc], PrimFunc]) -> None:
        self.name = name
        self.fn = fn

    def __call__(self, obj: PrimFunc | IRModule) -> PrimFunc | IRModule:
        if isinstance(obj, PrimFunc):
            return self.fn(obj)
        return super().__call__(obj)

    def transform_module(self, mod: IRModule, ctx: PassContext | None = None) -> IRModule:
        out = mod.copy()
        for name, func in mod.items():
            if isinstance(func, PrimFunc):
                out[name] = self.fn(func)
        return out


# The order matters: blocks go first (so later passes see plain loops), buffers are flattened
# before vectorizing (so a vector access is one Ramp index), and simplification runs after each
# pass that creates index arithmetic.
# Match buffers are lowered after compaction (TVM's order): a tensorized block's views then
# get the compacted buffer's strides, which code with its own address arithmetic (AMX tile
# loads) bakes in; until then the block stays an opaque shell declaring the regions it covers.
LOWERING_PIPELINE: tuple[Pass, ...] = (
    Pass("VerifyInput", verify_prim_func),        # user IR is well formed
    Pass("PlanBufferAllocation", plan_buffer_allocation),     # allocate at the users' LCA
    Pass("LowerInitBlock", lower_init_block),     # reduction init -> guarded store
    Pass("LowerOpaqueBlock", _lower_opaque_block_keeping_views),  # blocks -> loops, predicates,
                                                  # allocations; tensorized blocks -> shells
    Pass("CompactBufferAllocation", compact_buffer_allocation),  # shrink to the touched region
    Pass("LowerMatchBuffer", lower_match_buffer), # tensorized blocks' views -> source buffers
    Pass("FlattenBuffer", flatten_buffer),        # N-d accesses -> 1-d linear indices
    Pass("Simplify", simplify_func),              # clean index expressions
    Pass("UnrollLoop", unroll_loop),              # unroll kinds and auto-unroll pragmas
    Pass("UnswitchTilePredicates", unswitch_tile_predicates),  # whole tiles over a symbolic
                                                  # extent skip their bounds checks
    Pass("ParallelWhenWorthIt", parallel_when_worth_it),  # a small symbolic parallel loop
                                                  # runs on the calling thread
    Pass("VectorizeLoop", vectorize_loop),        # vectorized loops -> Ramp/Broadcast
    Pass("Simplify", simplify_func),              # fold what vectorizing exposed
    Pass("LegalizeBF16", legalize_bf16),          # bfloat16 arithmetic -> float32
    Pass("VerifyLowered", verify_prim_func),      # nothing malformed reaches LLVM
)

# (pass name, function name, IR after the pass, seconds)
Instrument = Callable[[str, str, PrimFunc, float], None]


def lower(mod: IRModule | PrimFunc, instrument: Instrument | None = None,
          passes: Iterable[Pass] = LOWERING_PIPELINE) -> IRModule:
    """Lower every PrimFunc in ``mod`` through ``passes``; other functions pass through.

    The build's lowering (``passes`` the default) under a PassContext with instruments and
    no ``instrument`` here runs as a Sequential named ``tir.lowering``, so the instruments
    see each pass (on the whole module, as TVM's TIR pipeline runs)."""
    mod = IRModule.from_expr(mod) if isinstance(mod, PrimFunc) else mod
    if not isinstance(mod, IRModule):
        raise TypeError(f"lower expects an IRModule or PrimFunc, got {type(mod).__name__}")
    if passes is LOWERING_PIPELINE and instrument is None and PassContext.current().instruments:
        named = mod.copy()
        for name, func in mod.items():
            if isinstance(func, PrimFunc) and "global_symbol" not in func.attrs:
                named[name] = func.with_attr("global_symbol", name)
        return Sequential(list(passes), name="tir.lowering")(named)
    out = mod.copy()
    for name, func in mod.items():
        if not isinstance(func, PrimFunc):
            continue
        if "global_symbol" not in func.attrs:
            func = func.with_attr("global_symbol", name)
        for p in passes:
            start = time.perf_counter()
            func = p.fn(func)
            if instrument is not None:
                instrument(p.name, name, func, time.perf_counter() - start)
        out[name] = func
    return out


@dataclass
class PassRecord:
    pass_name: str
    func_name: str
    seconds: float
    script: str


def lower_with_log(mod: IRModule | PrimFunc) -> tuple[IRModule, list[PassRecord]]:
    """Lower and keep the IR text and time after every pass (for notebooks and debugging)."""
    log: list[PassRecord] = []

    def record(pass_name: str, func_name: str, func: PrimFunc, seconds: float) -> None:
        log.append(PassRecord(pass_name, func_name, seconds, func.script(func_name)))

    return lower(mod, record), log

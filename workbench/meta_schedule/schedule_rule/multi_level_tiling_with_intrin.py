"""MultiLevelTilingWithIntrin: tile a block around a tensor intrinsic (TVM's rule of that name,
the MultiLevelTilingVNNI family; reference section 6.4).

For a block that needs multi-level tiling and computes what the intrinsic describes
(:func:`workbench.tir.schedule.analysis.tensorize_loop_mapping`):

1. each loop the description covers is split ``[None, extent]`` and the inner pieces are moved
   innermost in the order of the description's loops;
2. the first inner piece is blockized (block ``<name>_o``), and the outer block is annotated
   ``meta_schedule.auto_tensorize = <intrin>`` (``RewriteTensorize`` tensorizes it after
   sampling);
3. ordinary multi-level tiling (``MultiLevelTiling``'s structure and write reuse) proceeds on the
   outer block.

A block that does not match (or whose extents the intrinsic does not divide; there is no
padding) is returned unchanged for the next rule -- the plain MultiLevelTiling after it. Not in
TVM: ``intrin_name`` may be a list; every candidate that matches gives its own design space.
The rule checks at construction that each name is registered, and at initialization drops the
candidates whose implementation needs a CPU feature the target lacks.

``MultiLevelTilingMicroKernel`` picks shapes of a register-blocked micro-kernel family (float32
``avx512_fp32_mk_<MR>x<NR>x<KC>``, int8 ``avx512_vnni_mk_*``) that divide the block's loops.
With ``strict``, a candidate is kept only if the blockized tile matches the intrinsic as it is
(not after RewriteLayout re-lays out a weight).
"""
from __future__ import annotations

from typing import TYPE_CHECKING, Any, Sequence

from workbench.meta_schedule import analysis as A
from workbench.meta_schedule.schedule_rule.multi_level_tiling import MultiLevelTiling
from workbench.meta_schedule.schedule_rule.schedule_rule import register_schedule_rule
from workbench.tir.expr import Call
from workbench.tir.functor import post_order_visit
from workbench.tir.schedule import BlockRV, Schedule, ScheduleError
from workbench.tir.schedule.analysis import tensorize_loop_mapping
from workbench.tir.tensor_intrin import TensorIntrin

if TYPE_CHECKING:  # pragma: no cover
    from workbench.meta_schedule.tune_context import TuneContext

__all__ = ["MultiLevelTilingWithIntrin", "MultiLevelTilingMicroKernel", "AUTO_TENSORIZE",
           "intrin_supported"]

#: Block annotation naming the intrinsic RewriteTensorize applies (TVM's spelling).
AUTO_TENSORIZE = "meta_schedule.auto_tensorize"


def intrin_supported(name: str, target: Any) -> bool:
    """Can ``target`` run the implementation of intrinsic ``name`` (all the CPU features of the
    LLVM intrinsics it calls)?"""
    from workbench.codegen.intrinsics import required_features
    impl = TensorIntrin.get(name).impl
    needed: set[str] = set()

    def visit(n: Any) -> None:
        if isinstance(n, Call) and n.op in ("call_llvm_pure_intrin", "call_llvm_intrin"):
            needed.update(required_features(n.args[0].value))
    post_order_visit(impl.body, visit)
    return all(target.has_feature(f) for f in needed)


@register_schedule_rule("multi-level-tiling-with-intrin")
class MultiLevelTilingWithIntrin(MultiLevelTiling):
    def __init__(self, intrin_name: str | Sequence[str], structure: str = "SSRSRS",
                 tile_binds: Any = None, max_innermost_factor: int | None = None,
                 vector_load_lens: Any = None, reuse_read: Any = None,
                 reuse_write: Any = None, strict: bool = False) -> None:
        super().__init__(structure, tile_binds,
                         64 if max_innermost_factor is None else max_innermost_factor,
                         vector_load_lens, reuse_read, reuse_write)
        names = [intrin_name] if isinstance(intrin_name, str) else list(intrin_name)
        for name in names:
            TensorIntrin.get(name)  # raises ValueError naming the missing intrinsic
        self.intrin_name = intrin_name
        self.candidates = names
        self.strict = strict

    def _initialize_with_tune_context(self, context: "TuneContext") -> None:
        target = context.target
        if target is not None:
            self.candidates = [n for n in self.candidates if intrin_supported(n, target)]

    def apply(self, sch: Schedule, block: BlockRV) -> list[Schedule]:
        info = A.block_info(sch, block)
        if not A.needs_multi_level_tiling(info, sch._index()):
            return [sch]
        out: list[Schedule] = []
        for name in self._names_for(info):
            mapping = tensorize_loop_mapping(info, TensorIntrin.get(name).desc)
            if mapping is None:
                continue
            new = sch.copy()
            try:
                outer = tile_with_tensor_intrin(new, block, mapping)
            except ScheduleError:
                continue
            if self.strict and not _tensorizes(new, outer, name):
                continue
            new.annotate(outer, AUTO_TENSORIZE, name)
            out.extend(MultiLevelTiling.apply(self, new, outer))
        return out or [sch]

    def _names_for(self, info: Any) -> list[str]:
        return list(self.candidates)


def _tensorizes(sch: Schedule, block: BlockRV, name: str) -> bool:
    """Does ``block`` match ``name`` as it is (tried on a copy)?"""
    trial = sch.copy()
    try:
        trial.tensorize(block, name)
    except ScheduleError:
        return False
    return True


def tile_with_tensor_intrin(sch: Schedule, block: BlockRV, mapping: Any) -> BlockRV:
    """Split the covered loops, move the inner pieces innermost (in the description's order)
    and blockize them; returns the outer block (TVM's ``TileWithTensorIntrin``)."""
    loops = sch.get_loops(block)
    outer = list(loops)
    inner = []
    for pos, ext in zip(mapping.positions, mapping.extents):
        o, i = sch.split(loops[pos], factors=[None, ext])
        outer[pos] = o
        inner.append(i)
    ordered = [inner[k] for k in mapping.loop_order]
    sch.reorder(*outer, *ordered)
    return sch.blockize(ordered[0])


def _micro_kernel_name(family: str, mr: int, nr: int, kc: int) -> str:
    from workbench.tir.tensor_intrin.x86 import fp32_microkernel_name, vnni_microkernel_name
    if family == "vnni":
        return vnni_microkernel_name(mr, nr, kc)
    return fp32_microkernel_name(mr, nr, kc, family)


# family: (NR granularity, KC granularity, strict): the int8 kernel needs the weight already
# in the packed VNNI layout (RewriteLayout cannot produce it), so its match is checked up front.
_FAMILIES = {"avx512": (16, 1, False), "avx2": (8, 1, False), "vnni": (16, 4, True)}


@register_schedule_rule("multi-level-tiling-micro-kernel")
class MultiLevelTilingMicroKernel(MultiLevelTilingWithIntrin):
    """MultiLevelTilingWithIntrin over register-blocked micro-kernel shapes that divide the
    block: ``family`` "avx512" / "avx2" (float32, ``<isa>_fp32_mk_*``) or "vnni" (uint8 x int8
    with a packed weight, ``avx512_vnni_mk_*``).

    ``shapes`` are the ``(MR, NR)`` register tiles to try, in order of preference; at most
    ``max_candidates`` that divide the block give design spaces. ``KC`` is the largest divisor
    of the covered reduction loop that is at most ``max_kc`` (a multiple of 4 for "vnni").
    """

    def __init__(self, family: str = "avx512",
                 shapes: Sequence[tuple[int, int]] = ((4, 64), (6, 64), (7, 64), (8, 32)),
                 max_candidates: int = 2, max_kc: int = 256, **kwargs: Any) -> None:
        if family not in _FAMILIES:
            raise ValueError(f"MultiLevelTilingMicroKernel: family must be one of "
                             f"{sorted(_FAMILIES)}, got {family!r}")
        self.family = family
        self.shapes = [tuple(s) for s in shapes]
        self.max_candidates = max_candidates
        self.max_kc = max_kc
        nr_unit, kc_unit, strict = _FAMILIES[family]
        probe = _micro_kernel_name(family, 1, nr_unit, kc_unit)
        super().__init__(probe, strict=strict, **kwargs)

    def _names_for(self, info: Any) -> list[str]:
        if not self.candidates:
            return []  # the target lacks the ISA
        nr_unit, kc_unit, _ = _FAMILIES[self.family]
        probe = tensorize_loop_mapping(info, TensorIntrin.get(
            _micro_kernel_name(self.family, 1, nr_unit, kc_unit)).desc)
        if probe is None:
            return []
        loops = {lp.loop_var: lp for lp in info.loops}
        m, n, k = (A.const_int(loops[v].extent) for v in probe.loops)
        kcs = [d for d in range(kc_unit, min(k, self.max_kc) + 1, kc_unit) if k % d == 0]
        if not kcs:
            return []
        names = [_micro_kernel_name(self.family, mr, nr, kcs[-1]) for mr, nr in self.shapes
                 if m % mr == 0 and n % nr == 0]
        return names[:self.max_candidates]

    def apply(self, sch: Schedule, block: BlockRV) -> list[Schedule]:
        out = super().apply(sch, block)
        if self.family == "vnni" or out == [sch]:
            return out
        # float32 also keeps the untensorized block as a design space of its own (the plain
        # MultiLevelTiling after this rule tiles it): a micro-kernel space has few decisions
        # (a 128^3 matmul gave 8 distinct candidates, the best 5x slower than the tiled space),
        # so the search must be free to prefer ordinary tiling.
        return [*out, sch]

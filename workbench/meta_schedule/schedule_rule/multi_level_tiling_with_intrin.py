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

The block itself, untouched, is always returned too, for the next rule -- in the end the plain
MultiLevelTiling (TVM returns it only when the block does not match): the design space then
always holds an untensorized space, so a tensorize refusal can never leave a task without a
valid candidate. Not in TVM: ``intrin_name`` may be a list; every candidate that matches gives
its own design space. The rule checks at construction that each name is registered, and at
initialization drops the candidates whose implementation needs a CPU feature the target lacks.

Intrinsics that read the weight packed ``[N/16, K/P, 16, P]`` (``pack=(dtype, P)``: the 16 x P
dot products and the int8 / bf16 micro-kernels) match a block whose weight is in that layout as
it is; otherwise the design space packs it first (``pack_weight.py``: a layout-free weight in a
preproc block, any other in a copy inside the kernel), and each candidate is kept only if the
blockized tile matches the intrinsic as it is (``strict``).

``MultiLevelTilingMicroKernel`` picks shapes of a register-blocked micro-kernel family (float32
``avx512_fp32_mk_<MR>x<NR>x<KC>``; int8 / bf16 on packed weights: ``avx512_vnni_mk_*``,
``avx512_bf16_mk_*``, AMX ``amx_int8_mk_*`` / ``amx_bf16_mk_*``) that divide the block's loops,
packing the weight for the latter first.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Sequence

from workbench.meta_schedule import analysis as A
from workbench.meta_schedule.schedule_rule.multi_level_tiling import MultiLevelTiling
from workbench.meta_schedule.schedule_rule.pack_weight import pack_weight
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
    """Can ``target`` run the implementation of intrinsic ``name``: all the CPU features of
    the LLVM intrinsics it calls, and the CPU state some of them need (AMX tiles) granted to
    this process -- the candidates are measured here; where the OS refuses it (a sandbox that
    blocks ``arch_prctl``) the rule falls back to the other kernels."""
    from workbench.codegen.intrinsics import CPU_STATE_PREFIXES, required_features
    from workbench.runtime import cpu_state
    impl = TensorIntrin.get(name).impl
    needed: set[str] = set()
    states: set[str] = set()

    def visit(n: Any) -> None:
        if isinstance(n, Call) and n.op in ("call_llvm_pure_intrin", "call_llvm_intrin"):
            llvm_name = n.args[0].value
            needed.update(required_features(llvm_name))
            states.update(s for prefix, s in CPU_STATE_PREFIXES if llvm_name.startswith(prefix))
    post_order_visit(impl.body, visit)
    return all(target.has_feature(f) for f in needed) and \
        all(cpu_state.available(s) for s in states)


@register_schedule_rule("multi-level-tiling-with-intrin")
class MultiLevelTilingWithIntrin(MultiLevelTiling):
    """See the module docstring. ``pack``: ``(dtype, P)`` for intrinsics that read their
    weight packed ``[N/16, K/P, 16, P]`` (the 16 x P dot products): a weight not in that layout
    is packed in the design space (``pack_weight.py``) and every candidate's match is checked
    up front. ``first_supported``: of the candidate intrinsics the target can run, keep only
    the first (a native intrinsic, then its generic form for other CPUs).
    ``keep_untensorized=False``: TVM's behaviour, the untensorized block is passed on only
    when no tensorized space came out."""

    def __init__(self, intrin_name: str | Sequence[str], structure: str = "SSRSRS",
                 tile_binds: Any = None, max_innermost_factor: int | None = None,
                 vector_load_lens: Any = None, reuse_read: Any = None,
                 reuse_write: Any = None, strict: bool = False,
                 pack: tuple[str, int] | None = None, first_supported: bool = False,
                 keep_untensorized: bool = True) -> None:
        super().__init__(structure, tile_binds,
                         64 if max_innermost_factor is None else max_innermost_factor,
                         vector_load_lens, reuse_read, reuse_write)
        names = [intrin_name] if isinstance(intrin_name, str) else list(intrin_name)
        for name in names:
            TensorIntrin.get(name)  # raises ValueError naming the missing intrinsic
        self.intrin_name = intrin_name
        self.candidates = names
        self.pack = None if pack is None else (str(pack[0]), int(pack[1]))
        self.strict = strict or self.pack is not None
        self.first_supported = first_supported
        self.keep_untensorized = keep_untensorized

    def _initialize_with_tune_context(self, context: "TuneContext") -> None:
        target = context.target
        if target is not None:
            self.candidates = [n for n in self.candidates if intrin_supported(n, target)]
        if self.first_supported:
            self.candidates = self.candidates[:1]

    def apply(self, sch: Schedule, block: BlockRV) -> list[Schedule]:
        """The tensorized design spaces of ``block`` (its weight packed first where the
        intrinsic needs it and it is not; a candidate that does not match as tiled is kept
        only where RewriteLayout may mend it, on a layout-free weight), and ``sch`` itself,
        untouched, for the plain MultiLevelTiling after this rule. Unlike TVM's rule, which
        returns only the tensorized spaces when the block matches (``keep_untensorized=False``
        here), a tensorized space whose every sample fails (a postprocessor refusing the match,
        a build error) then never leaves a task without a valid candidate."""
        info = A.block_info(sch, block)
        if not A.needs_multi_level_tiling(info, sch.func_index()):
            return [sch]
        out = self._tile_all(sch, block, info)
        if not out and self.pack is not None and self.candidates:
            for packed in pack_weight(sch, block, *self.pack):
                out = self._tile_all(packed, block, A.block_info(packed, block))
                if out:
                    break
        return [*out, sch] if self.keep_untensorized or not out else out

    def _tile_all(self, sch: Schedule, block: BlockRV, info: Any) -> list[Schedule]:
        """One tiled schedule per matching candidate intrinsic (none: empty)."""
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
            if not _tensorizes(new, outer, name) and (
                    self.strict or not _reads_layout_free(new, outer)):
                # a mismatch only RewriteLayout could mend, on a weight it may not re-lay out
                continue
            new.annotate(outer, AUTO_TENSORIZE, name)
            out.extend(MultiLevelTiling.apply(self, new, outer))
        return out

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


def _reads_layout_free(sch: Schedule, block: BlockRV) -> bool:
    """Does ``block`` read a layout-free buffer (one RewriteLayout lays out after sampling)?"""
    from workbench.meta_schedule.postproc.rewrite_layout import layout_free_buffers
    free = {id(b) for b in layout_free_buffers(sch.func_index().func)}
    reads = A.block_info(sch, block).block.reads
    return any(id(r.buffer) in free for r in reads)


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


@dataclass(frozen=True)
class _Family:
    """A micro-kernel family: its intrinsic names, the granularity of its (MR, NR, KC), the
    weight packing it needs (P of ``[N/16, K/P, 16, P]``, None: a plain row-major weight
    that RewriteLayout lays out), and the register tiles tried by default."""

    prefix: str
    units: tuple[int, int, int]
    pack: tuple[str, int] | None
    shapes: tuple[tuple[int, int], ...]
    max_kc: int = 256

    def name(self, mr: int, nr: int, kc: int) -> str:
        return f"{self.prefix}_{mr}x{nr}x{kc}"


_AVX512_SHAPES = ((4, 64), (6, 64), (7, 64), (8, 32))
# AMX: MR in row groups of up to 16 (28 = 16 + 12 fits a 56-wide image), NR multiples of 16.
_AMX_SHAPES = ((32, 32), (28, 32), (16, 32), (32, 16), (28, 16), (16, 16))
_FAMILIES = {
    "avx512": _Family("avx512_fp32_mk", (1, 16, 1), None, _AVX512_SHAPES),
    "avx2": _Family("avx2_fp32_mk", (1, 8, 1), None, ((4, 24), (6, 16), (3, 32))),
    "vnni": _Family("avx512_vnni_mk", (1, 16, 4), ("int8", 4), _AVX512_SHAPES),
    "avx512-bf16": _Family("avx512_bf16_mk", (1, 16, 2), ("bfloat16", 2), _AVX512_SHAPES),
    # AMX: a call configures and releases the tiles; a long KC loop amortizes that.
    "amx-int8": _Family("amx_int8_mk", (1, 16, 64), ("int8", 4), _AMX_SHAPES, 1024),
    "amx-bf16": _Family("amx_bf16_mk", (1, 16, 32), ("bfloat16", 2), _AMX_SHAPES, 1024),
}


@register_schedule_rule("multi-level-tiling-micro-kernel")
class MultiLevelTilingMicroKernel(MultiLevelTilingWithIntrin):
    """MultiLevelTilingWithIntrin over register-blocked micro-kernel shapes that divide the
    block. ``family``:

    - "avx512" / "avx2": float32 ``<isa>_fp32_mk_*`` (the weight is laid out by RewriteLayout);
    - "vnni": uint8 x int8 ``avx512_vnni_mk_*``; "avx512-bf16": ``avx512_bf16_mk_*``;
    - "amx-int8" / "amx-bf16": AMX tile kernels ``amx_int8_mk_*`` / ``amx_bf16_mk_*``.

    The last four read the weight packed ``[N/16, K/P, 16, P]`` (``pack``, module docstring).

    ``shapes`` are the ``(MR, NR)`` register tiles to try, in order of preference (default:
    the family's); at most ``max_candidates`` that divide the block give design spaces.
    ``KC`` is the largest divisor of the covered reduction loop that is at most ``max_kc``
    (default: the family's) and a multiple of the family's k granularity.
    """

    def __init__(self, family: str = "avx512",
                 shapes: Sequence[tuple[int, int]] | None = None,
                 max_candidates: int = 2, max_kc: int | None = None, **kwargs: Any) -> None:
        if family not in _FAMILIES:
            raise ValueError(f"MultiLevelTilingMicroKernel: family must be one of "
                             f"{sorted(_FAMILIES)}, got {family!r}")
        fam = _FAMILIES[family]
        self.family = family
        self.shapes = [tuple(s) for s in (shapes if shapes is not None else fam.shapes)]
        self.max_candidates = max_candidates
        self.max_kc = fam.max_kc if max_kc is None else max_kc
        super().__init__(fam.name(*fam.units), pack=fam.pack, **kwargs)

    def _names_for(self, info: Any) -> list[str]:
        if not self.candidates:
            return []  # the target lacks the ISA
        fam = _FAMILIES[self.family]
        m_unit, n_unit, kc_unit = fam.units
        probe = tensorize_loop_mapping(info, TensorIntrin.get(fam.name(*fam.units)).desc)
        if probe is None:
            return []
        loops = {lp.loop_var: lp for lp in info.loops}
        m, n, k = (A.const_int(loops[v].extent) for v in probe.loops)
        kcs = [d for d in range(kc_unit, min(k, self.max_kc) + 1, kc_unit) if k % d == 0]
        if not kcs:
            return []
        names = [fam.name(mr, nr, kcs[-1]) for mr, nr in self.shapes
                 if m % mr == 0 and n % nr == 0 and mr % m_unit == 0 and nr % n_unit == 0]
        return names[:self.max_candidates]

"""What the default-schedule rules know about a block: its iteration variables, the loops that
bind them, and how each buffer access depends on each variable.

Everything here reads the schedule through its public handles (``sch.get``, ``sch.get_sref``,
``sch.get_loops``, ``sch.get_child_blocks``) and changes nothing. The rules decide from these
facts alone -- block structure and access strides -- never from op or block names, so an op
added later is scheduled by whichever rule its loop nest fits.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Iterable

from workbench.tir.buffer import Buffer
from workbench.tir.expr import (
    Add, BufferLoad, Call, Cast, IntImm, Mul, PrimExpr, Sub, Var,
)
from workbench.tir.analysis import collect_vars, const_int
from workbench.tir.function import PrimFunc
from workbench.tir.functor import IRVisitor
from workbench.tir.schedule import BlockRV, LoopRV, Schedule
from workbench.tir.stmt import Block, BlockRealize, BufferStore, IterType

__all__ = [
    "Access", "BlockFacts", "block_facts", "root_blocks", "const_extent", "coefficient",
    "is_output", "calls_in", "CHEAP_CALLS", "param_buffers", "block_realize", "expr_vars",
    "count_reductions",
]

#: Intrinsics cheap enough to recompute wherever an inlined value is used.
CHEAP_CALLS = frozenset({"if_then_else", "likely", "abs", "fabs", "round", "floor", "ceil",
                         "trunc", "reinterpret"})


#: The value of a constant extent (an ``IntImm``), else None: tir.analysis's ``const_int``.
const_extent = const_int


def coefficient(expr: PrimExpr, var: Var) -> int | None:
    """The constant ``c`` with ``expr == c * var + (terms free of var)``; 0 when ``expr`` does
    not use ``var``; None when ``expr`` is not affine in ``var`` with a constant coefficient."""
    if isinstance(expr, Var):
        return 1 if expr is var else 0
    if isinstance(expr, IntImm):
        return 0
    if isinstance(expr, Cast):
        return coefficient(expr.value, var)
    if isinstance(expr, (Add, Sub)):
        a, b = coefficient(expr.a, var), coefficient(expr.b, var)
        if a is None or b is None:
            return None
        return a + b if isinstance(expr, Add) else a - b
    if isinstance(expr, Mul):
        a, b = coefficient(expr.a, var), coefficient(expr.b, var)
        if a is None or b is None:
            return None
        if a == 0 and b == 0:
            return 0 if var not in expr_vars(expr) else None
        scale = expr.b if a != 0 else expr.a
        if a != 0 and b != 0 or not isinstance(scale, IntImm):
            return None
        return (a or b) * int(scale.value)
    return 0 if var not in expr_vars(expr) else None


def expr_vars(e: PrimExpr) -> frozenset[Var]:
    """The variables ``e`` uses, frozen (an :class:`Access` keeps them per dimension)."""
    return frozenset(collect_vars(e))


def _is_unit_dim(extent: PrimExpr) -> bool:
    return isinstance(extent, IntImm) and int(extent.value) == 1


@dataclass(frozen=True)
class Access:
    """One load or store ``buffer[indices]`` of a block, in terms of its iteration vars."""

    buffer: Buffer
    indices: tuple[PrimExpr, ...]

    def __post_init__(self) -> None:
        object.__setattr__(self, "dim_vars", tuple(expr_vars(i) for i in self.indices))

    def depends(self, var: Var) -> bool:
        return any(var in vs for vs in self.dim_vars)  # type: ignore[attr-defined]

    def dims_of(self, var: Var) -> list[int]:
        """The dimensions whose index uses ``var``."""
        return [d for d, vs in enumerate(self.dim_vars) if var in vs]  # type: ignore[attr-defined]

    @property
    def last_dim(self) -> int:
        """The innermost dimension that can vary: trailing dimensions of extent 1 (indexed
        by 0, such as the channel multiplier of a ``(k, k, C, 1)`` depthwise weight) do not
        count, as they do not change the address."""
        d = len(self.indices) - 1
        unit = [_is_unit_dim(e) and not vs  # type: ignore[attr-defined]
                for e, vs in zip(self.buffer.shape, self.dim_vars)]
        while d > 0 and unit[d]:
            d -= 1
        return d

    def is_unit_stride(self, var: Var) -> bool:
        """Consecutive values of ``var`` touch consecutive elements: ``var`` appears only in
        the last (varying) index, with coefficient 1 (buffers are dense, row-major)."""
        last = self.last_dim
        return self.dims_of(var) == [last] and coefficient(self.indices[last], var) == 1

    def stride_in_last(self, var: Var) -> int | None:
        """``var``'s coefficient when it appears only in the last (varying) index, else
        None."""
        last = self.last_dim
        if self.dims_of(var) != [last]:
            return None
        return coefficient(self.indices[last], var)

    def plain_dim(self, var: Var) -> int | None:
        """The dimension indexed by exactly ``var`` when no other dimension uses it."""
        dims = self.dims_of(var)
        if len(dims) == 1 and self.indices[dims[0]] is var:
            return dims[0]
        return None


@dataclass(frozen=True)
class BlockFacts:
    """A leaf block whose iteration variables are each bound to one loop of its nest, in order
    (the form ``te.create_prim_func`` and FuseTIR produce): ``loops[i]`` binds ``iters[i]``."""

    rv: BlockRV
    block: Block
    iters: tuple[Var, ...]
    kinds: tuple[int, ...]
    extents: tuple[PrimExpr, ...]
    loops: tuple[LoopRV, ...]
    stores: tuple[Access, ...]
    loads: tuple[Access, ...]

    @property
    def name(self) -> str:
        return self.block.name_hint

    @property
    def spatial(self) -> list[int]:
        return [i for i, k in enumerate(self.kinds) if k == IterType.DATA_PAR]

    @property
    def reduction(self) -> list[int]:
        return [i for i, k in enumerate(self.kinds) if k == IterType.COMM_REDUCE]

    @property
    def is_spatial(self) -> bool:
        return not self.reduction

    @property
    def store(self) -> Access:
        return self.stores[0]

    def extent(self, i: int) -> int | None:
        return const_extent(self.extents[i])

    def loads_depending(self, var: Var) -> list[Access]:
        return [a for a in self.loads if a.depends(var)]

    def spatial_work(self) -> int | None:
        """The number of points of the spatial iteration space (None when symbolic)."""
        n = 1
        for i in self.spatial:
            e = self.extent(i)
            if e is None:
                return None
            n *= e
        return n

    def work(self) -> int | None:
        n = 1
        for i in range(len(self.iters)):
            e = self.extent(i)
            if e is None:
                return None
            n *= e
        return n


class _Accesses(IRVisitor):
    def __init__(self) -> None:
        self.loads: list[Access] = []
        self.stores: list[Access] = []
        self.calls: list[str] = []

    def visit_BufferLoad(self, e: BufferLoad) -> None:
        self.loads.append(Access(e.buffer, tuple(e.indices)))
        self.generic_visit(e)

    def visit_BufferStore(self, s: BufferStore) -> None:
        self.stores.append(Access(s.buffer, tuple(s.indices)))
        self.generic_visit(s)

    def visit_Call(self, e: Call) -> None:
        self.calls.append(e.op)
        self.generic_visit(e)


def calls_in(block: Block) -> list[str]:
    """The intrinsics the block's body calls (``exp``, ``if_then_else``, ...)."""
    v = _Accesses()
    v.visit(block.body)
    return v.calls


def block_facts(sch: Schedule, block: BlockRV) -> BlockFacts | None:
    """The facts of ``block``, or None when its form is not the one the rules handle: an
    iteration variable that is neither spatial nor a reduction, a binding that is not one
    loop per variable in order, or a body without a store."""
    blk: Block = sch.get(block)
    realize = block_realize(sch, block)
    if realize is None:
        return None
    loops = tuple(sch.get_loops(block))
    ivs = blk.iter_vars
    if len(loops) != len(ivs) or any(iv.iter_type not in (IterType.DATA_PAR,
                                                          IterType.COMM_REDUCE) for iv in ivs):
        return None
    for lp, value in zip(loops, realize.iter_values):
        loop = sch.get(lp)
        if value is not loop.loop_var or not _same_int(loop.min, 0):
            return None
    acc = _Accesses()
    acc.visit(blk.body)
    if not acc.stores:
        return None
    written = {id(s.buffer) for s in acc.stores}
    loads = tuple(a for a in acc.loads if id(a.buffer) not in written)
    return BlockFacts(block, blk, tuple(iv.var for iv in ivs),
                      tuple(iv.iter_type for iv in ivs), tuple(iv.dom.extent for iv in ivs),
                      loops, tuple(acc.stores), loads)


def block_realize(sch: Schedule, block: BlockRV) -> BlockRealize | None:
    """The BlockRealize binding ``block`` (found under the block's parent statement)."""
    from workbench.tir.stmt import SeqStmt
    blk = sch.get(block)
    parent = sch.get_sref(block).parent
    body = getattr(parent, "body", None)
    for stmt in (body.seq if isinstance(body, SeqStmt) else (body,)):
        if isinstance(stmt, BlockRealize) and stmt.block is blk:
            return stmt
    return None


def count_reductions(func: PrimFunc) -> int:
    """The blocks of ``func`` that reduce (have an init or a reduction variable): a cheap test
    the rules run before building a schedule."""
    from workbench.tir.analysis import blocks_under
    return sum(1 for b in blocks_under(func.body)
               if b.init is not None or any(iv.iter_type != IterType.DATA_PAR
                                            for iv in b.iter_vars))


def _same_int(e: PrimExpr, value: int) -> bool:
    return isinstance(e, IntImm) and e.value == value


def root_blocks(sch: Schedule) -> list[BlockRV] | None:
    """The blocks directly under the root block, in program order; None when some block is
    nested inside another (a form the rules leave alone) or the body has no root block."""
    func: PrimFunc = sch.mod[sch.func_working_on]
    if not isinstance(func.body, BlockRealize):
        return None
    root = sch.get_sblock(func.body.block.name_hint)
    children = sch.get_child_blocks(root)
    for child in children:
        if sch.get_child_blocks(child):
            return None
    return children


def is_output(sch: Schedule, block: BlockRV) -> bool:
    """The block writes a parameter buffer of the function."""
    func: PrimFunc = sch.mod[sch.func_working_on]
    params = {id(b) for b in func.buffer_map.values()}
    return any(id(w.buffer) in params for w in sch.get(block).writes)


def param_buffers(sch: Schedule) -> set[int]:
    func: PrimFunc = sch.mod[sch.func_working_on]
    return {id(b) for b in func.buffer_map.values()}


#: PrimFunc attribute: the indices of the parameters that every caller passes a compile-time
#: constant (set by Relax's ``AnnotateConstantParams``). Repacking one of those costs nothing
#: at run time (``PrepackConstantWeights`` packs it once, at compile time).
CONSTANT_PARAMS_ATTR = "constant_params"


def constant_param_buffers(sch: Schedule) -> set[int]:
    """ids of the parameter buffers :data:`CONSTANT_PARAMS_ATTR` names."""
    func: PrimFunc = sch.mod[sch.func_working_on]
    indices = func.attrs.get(CONSTANT_PARAMS_ATTR, ())
    out = set()
    for i in indices:
        if 0 <= int(i) < len(func.params):
            buf = func.buffer_map.get(func.params[int(i)])
            if buf is not None:
                out.add(id(buf))
    return out


def blocks_by_name(sch: Schedule, names: Iterable[str]) -> list[BlockRV]:
    return [sch.get_sblock(n) for n in names]

"""tensorize: replace a block's body by a tensor intrinsic's implementation.

Given a loop, the subtree under it is first blockized (``<block>_o``); given a block, that block
is used. The intrinsic's ``desc`` is then matched structurally against the block (TVM's
TensorizeComparator, simplified):

- the root block of ``desc`` stands for the block itself: its iter vars are not compared; its
  read/write regions give, for each workload buffer, the *base indices* of the sub-region the
  intrinsic covers (leading workload dimensions the desc buffer lacks must have extent 1, the
  trailing extents must equal the desc region's);
- below it, loops (min, extent, kind), inner blocks (iter var types and domains, bindings,
  predicate, init) and statements must have the same structure; loop and block variables map by
  definition; values must have the same dtypes, operators and constants; buffers map by first
  use (dtype and scope equal, shapes free);
- every buffer access must be ``base + <desc indices>`` in the workload, proven by the analyzer.

The block's ``init`` (if any) is kept: the intrinsic describes the update, and lowering runs the
init before the first update as usual. On success the block's body becomes a fresh copy of
``impl``'s root-block body, and each ``impl`` buffer is bound to its workload region with a
``MatchBufferRegion`` (base indices, extents of the ``impl`` block's regions), which
``tir.transform.lower_match_buffer`` resolves when the function is lowered.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from workbench.ir import dtype as dt
from workbench.ir.node import FrozenDict
from workbench.tir import expr as E
from workbench.tir import op
from workbench.tir.arith import Analyzer
from workbench.tir.buffer import Buffer, BufferRegion, MatchBufferRegion, Range
from workbench.tir.function import PrimFunc
from workbench.tir.functor import renew_defs
from workbench.tir.schedule.error import ScheduleError
from workbench.tir.schedule.primitive.blockize import blockize
from workbench.tir.schedule.state import FuncIndex, replace_stmt
from workbench.tir.stmt import (
    Block, BlockRealize, BufferStore, Evaluate, For, IfThenElse, LetStmt, SeqStmt, Stmt,
)
from workbench.tir.tensor_intrin import TensorIntrin

PRIM = "tensorize"


class _Mismatch(Exception):
    """The workload does not match the description (message says where)."""


def tensorize(func: PrimFunc, index: FuncIndex, target: str | E.Var, intrin_name: str,
              preserve_unit_iters: bool = True) -> tuple[PrimFunc, str]:
    """Tensorize block ``target`` (a name) or the subtree of loop ``target`` (a loop var) with
    the registered intrinsic ``intrin_name``. Returns ``(func, name of the tensorized block)``."""
    try:
        intrin = TensorIntrin.get(intrin_name)
    except ValueError as e:
        raise ScheduleError(PRIM, repr(intrin_name), str(e)) from None
    if isinstance(target, E.Var):
        func, name = blockize(func, index, target, preserve_unit_iters)
        index = FuncIndex(func)
    else:
        name = target
    info = index.blocks[name]
    subject = f"block {name!r}"
    if not info.ancestors:
        raise ScheduleError(PRIM, subject, "the root block cannot be tensorized")
    match = _match(info.realize, intrin.desc, intrin_name, subject)
    new_block = _bind_impl(info.block, intrin, match, intrin_name, subject)
    return replace_stmt(func, info.ancestors, info.realize,
                        info.realize.replace(block=new_block)), name


# ---- matching -------------------------------------------------------------------------------

@dataclass
class _Match:
    """What matching found: desc buffer -> workload buffer, and each workload buffer's base."""

    buffers: dict[Buffer, Buffer] = field(default_factory=dict)
    base: dict[Buffer, list[E.PrimExpr]] = field(default_factory=dict)


def _match(realize: BlockRealize, desc: PrimFunc, name: str, subject: str) -> _Match:
    cmp = _Comparator()
    d_root = desc.body
    try:
        if not _is_true(realize.predicate):
            raise _Mismatch(f"the block has a predicate ({realize.predicate!r}); the "
                            "intrinsic covers whole tiles only")
        block = realize.block
        if block.alloc_buffers or block.match_buffers:
            raise _Mismatch("the block allocates or matches buffers")
        cmp.stmt(d_root.block.body, block.body, "body")
        result = _Match(cmp.buffers)
        d_regions = list(d_root.block.writes) + list(d_root.block.reads)
        w_regions = list(block.writes) + list(block.reads)
        for d_region in d_regions:
            w_buf = cmp.buffers.get(d_region.buffer)
            if w_buf is None or w_buf in result.base:
                continue
            w_region = next((r for r in w_regions if r.buffer is w_buf), None)
            if w_region is None:
                raise _Mismatch(f"the block does not declare an access to {w_buf.name!r}, "
                                f"which the intrinsic's {d_region.buffer.name!r} stands for")
            result.base[w_buf] = _base_of(d_region, w_region, cmp.analyzer)
        for d_buf, w_buf in cmp.buffers.items():
            if w_buf not in result.base:
                raise _Mismatch(f"the intrinsic's root block declares no region of "
                                f"{d_buf.name!r}")
        for d_buf, d_idx, w_idx, where in cmp.accesses:
            w_buf = cmp.buffers[d_buf]
            _check_access(d_idx, w_idx, result.base[w_buf], cmp, f"{where}: {w_buf.name!r}")
    except _Mismatch as e:
        raise ScheduleError(PRIM, subject, f"the block does not match tensor intrinsic "
                            f"{name!r}: {e}") from None
    return result


def _is_true(e: E.PrimExpr) -> bool:
    return isinstance(e, E.IntImm) and bool(e.value)


def _base_of(d_region: BufferRegion, w_region: BufferRegion, ana: Analyzer) -> list[E.PrimExpr]:
    d_rank, w_rank = len(d_region.region), len(w_region.region)
    name = w_region.buffer.name
    if d_rank > w_rank:
        raise _Mismatch(f"buffer {name!r} has {w_rank} dimension(s), the intrinsic's "
                        f"{d_region.buffer.name!r} has {d_rank}")
    lead = w_rank - d_rank
    base: list[E.PrimExpr] = []
    for k, w in enumerate(w_region.region):
        if k < lead:
            if not _provably(ana, op.eq(w.extent, 1)):
                raise _Mismatch(f"the region of {name!r} has extent {w.extent!r} in dimension "
                                f"{k}, which the intrinsic does not have (must be 1)")
            base.append(w.min)
            continue
        d = d_region.region[k - lead]
        if not _provably(ana, op.eq(w.extent, _retype(d.extent, w.extent.dtype))):
            raise _Mismatch(f"the region of {name!r} has extent {w.extent!r} in dimension {k}, "
                            f"the intrinsic's {d_region.buffer.name!r} has {d.extent!r}")
        base.append(ana.simplify(op.sub(w.min, _retype(d.min, w.min.dtype))))
    return base


def _provably(ana: Analyzer, cond: E.PrimExpr) -> bool:
    got = ana.simplify(cond)
    return isinstance(got, E.IntImm) and bool(got.value)


def _check_access(d_idx: tuple, w_idx: tuple, base: list[E.PrimExpr], cmp: "_Comparator",
                  where: str) -> None:
    lead = len(w_idx) - len(d_idx)
    if lead < 0:
        raise _Mismatch(f"{where} is indexed with {len(w_idx)} index(es), the intrinsic uses "
                        f"{len(d_idx)}")
    for k, w in enumerate(w_idx):
        want = base[k] if k < lead else \
            op.add(base[k], cmp.translate(d_idx[k - lead], w.dtype))
        if not _provably(cmp.analyzer, op.eq(w, want)):
            raise _Mismatch(f"{where} index {k} is {w!r}, the intrinsic needs {want!r}")


def _retype(e: E.PrimExpr, dtype: str) -> E.PrimExpr:
    """An integer expression in another integer dtype (constants stay constants)."""
    if e.dtype == dtype:
        return e
    if isinstance(e, E.IntImm):
        return op.const(e.value, dtype)
    return op.cast(dtype, e)


_BINARY_OPS = {
    E.Add: op.add, E.Sub: op.sub, E.Mul: op.mul, E.FloorDiv: op.floordiv,
    E.FloorMod: op.floormod, E.Min: op.min, E.Max: op.max,
}


class _Comparator:
    """Walks desc and workload side by side (desc first in every call)."""

    def __init__(self) -> None:
        self.vars: dict[E.Var, E.Var] = {}
        self.buffers: dict[Buffer, Buffer] = {}
        self.accesses: list[tuple[Buffer, tuple, tuple, str]] = []
        self.analyzer = Analyzer()

    # -- statements --------------------------------------------------------------------------
    def stmt(self, d: Stmt, w: Stmt, where: str) -> None:
        if type(d) is not type(w):
            raise _Mismatch(f"at {where}: the intrinsic has a {type(d).__name__}, the block a "
                            f"{type(w).__name__}")
        rule = _STMT_RULES.get(type(d))
        if rule is None:
            raise _Mismatch(f"at {where}: {type(d).__name__} is not supported in an intrinsic "
                            "description")
        rule(self, d, w, where)

    def _seq(self, d: SeqStmt, w: SeqStmt, where: str) -> None:
        if len(d.seq) != len(w.seq):
            raise _Mismatch(f"at {where}: {len(d.seq)} statements in the intrinsic, "
                            f"{len(w.seq)} in the block")
        for k, (a, b) in enumerate(zip(d.seq, w.seq)):
            self.stmt(a, b, f"{where}[{k}]")

    def _for(self, d: For, w: For, where: str) -> None:
        where = f"{where}/loop {w.loop_var.name}"
        self.index_expr(d.min, w.min, where)
        self.index_expr(d.extent, w.extent, where)
        if d.kind != w.kind:
            raise _Mismatch(f"at {where}: loop kind {w.kind!r}, the intrinsic's is {d.kind!r}")
        self.define(d.loop_var, w.loop_var)
        self.analyzer.bind(w.loop_var, Range(w.min, w.extent), allow_override=True)
        self.stmt(d.body, w.body, where)

    def _realize(self, d: BlockRealize, w: BlockRealize, where: str) -> None:
        db, wb = d.block, w.block
        where = f"{where}/block {wb.name_hint}"
        if len(db.iter_vars) != len(wb.iter_vars):
            raise _Mismatch(f"at {where}: {len(wb.iter_vars)} iter vars, the intrinsic's block "
                            f"has {len(db.iter_vars)}")
        for div, wiv, dv, wv in zip(db.iter_vars, wb.iter_vars, d.iter_values, w.iter_values):
            if div.iter_type != wiv.iter_type:
                raise _Mismatch(f"at {where}: iter var {wiv.var.name!r} has another type "
                                "(spatial/reduction) than the intrinsic's")
            self.index_expr(div.dom.min, wiv.dom.min, where)
            self.index_expr(div.dom.extent, wiv.dom.extent, where)
            self.index_expr(dv, wv, where)
            self.define(div.var, wiv.var)
            self.analyzer.bind(wiv.var, wiv.dom, allow_override=True)
        self.index_expr(d.predicate, w.predicate, where)
        if (db.init is None) != (wb.init is None):
            raise _Mismatch(f"at {where}: the block {'has' if wb.init else 'has no'} init, the "
                            f"intrinsic's {'has' if db.init else 'has none'}")
        if db.alloc_buffers or wb.alloc_buffers or db.match_buffers or wb.match_buffers:
            raise _Mismatch(f"at {where}: inner blocks may not allocate or match buffers")
        if db.init is not None:
            self.stmt(db.init, wb.init, f"{where}/init")
        self.stmt(db.body, wb.body, where)

    def _store(self, d: BufferStore, w: BufferStore, where: str) -> None:
        self.buffer(d.buffer, w.buffer, where)
        self.accesses.append((d.buffer, d.indices, w.indices, f"{where}/store"))
        self.value(d.value, w.value, where)

    def _let(self, d: LetStmt, w: LetStmt, where: str) -> None:
        self.value(d.value, w.value, where)
        self.define(d.var, w.var)
        self.stmt(d.body, w.body, where)

    def _if(self, d: IfThenElse, w: IfThenElse, where: str) -> None:
        self.value(d.condition, w.condition, where)
        self.stmt(d.then_case, w.then_case, where)
        if (d.else_case is None) != (w.else_case is None):
            raise _Mismatch(f"at {where}: else branches differ")
        if d.else_case is not None:
            self.stmt(d.else_case, w.else_case, where)

    def _evaluate(self, d: Evaluate, w: Evaluate, where: str) -> None:
        self.value(d.value, w.value, where)

    # -- definitions and buffers -------------------------------------------------------------
    def define(self, d: E.Var, w: E.Var) -> None:
        self.vars[d] = w

    def buffer(self, d: Buffer, w: Buffer, where: str) -> None:
        got = self.buffers.get(d)
        if got is None:
            if d.dtype != w.dtype or d.scope != w.scope:
                raise _Mismatch(f"at {where}: buffer {w.name!r} is {w.dtype} ({w.scope}), the "
                                f"intrinsic's {d.name!r} is {d.dtype} ({d.scope})")
            if w in self.buffers.values():
                raise _Mismatch(f"at {where}: buffer {w.name!r} stands for two different "
                                "buffers of the intrinsic")
            self.buffers[d] = w
        elif got is not w:
            raise _Mismatch(f"at {where}: the intrinsic's {d.name!r} stands for both "
                            f"{got.name!r} and {w.name!r}")

    # -- expressions -------------------------------------------------------------------------
    def index_expr(self, d: E.PrimExpr, w: E.PrimExpr, where: str) -> None:
        """Integer expressions (extents, bindings, predicates): equal in value, any int dtype."""
        if not dt.parse(d.dtype).is_integer or not dt.parse(w.dtype).is_integer:
            self.value(d, w, where)
            return
        want = self.translate(d, w.dtype)
        if not _provably(self.analyzer, op.eq(w, want)):
            raise _Mismatch(f"at {where}: {w!r} where the intrinsic has {d!r}")

    def translate(self, d: E.PrimExpr, dtype: str) -> E.PrimExpr:
        """A desc integer expression over workload vars, in ``dtype``."""
        if isinstance(d, E.IntImm):
            return op.const(d.value, dtype)
        if isinstance(d, E.Var):
            w = self.vars.get(d)
            if w is None:
                raise _Mismatch(f"the intrinsic uses {d.name!r} outside its definition")
            return _retype(w, dtype)
        fn = _BINARY_OPS.get(type(d))
        if fn is not None:
            return fn(self.translate(d.a, dtype), self.translate(d.b, dtype))
        if isinstance(d, E.Cast):
            return self.translate(d.value, dtype)
        raise _Mismatch(f"index expression {d!r} of the intrinsic is not supported")

    def value(self, d: Any, w: Any, where: str) -> None:
        if type(d) is not type(w):
            raise _Mismatch(f"at {where}: {w!r} where the intrinsic has {d!r}")
        if isinstance(d, E.PrimExpr) and d.dtype != w.dtype and \
                not isinstance(d, (E.Var, E.IntImm)):
            raise _Mismatch(f"at {where}: {w!r} is {w.dtype}, the intrinsic's {d!r} is "
                            f"{d.dtype}")
        if isinstance(d, E.Var):
            if self.vars.get(d) is not w:
                raise _Mismatch(f"at {where}: variable {w.name!r} where the intrinsic has "
                                f"{d.name!r}")
            return
        if isinstance(d, E.IntImm):
            if d.value != w.value or (d.dtype != w.dtype and not _index_like(d.dtype, w.dtype)):
                raise _Mismatch(f"at {where}: constant {w!r}, the intrinsic has {d!r}")
            return
        if isinstance(d, (E.FloatImm, E.StringImm)):
            if d.value != w.value:
                raise _Mismatch(f"at {where}: constant {w!r}, the intrinsic has {d!r}")
            return
        if isinstance(d, E.BufferLoad):
            self.buffer(d.buffer, w.buffer, where)
            self.accesses.append((d.buffer, d.indices, w.indices, f"{where}/load"))
            return
        if isinstance(d, E.Call) and d.op != w.op:
            raise _Mismatch(f"at {where}: call of {w.op!r}, the intrinsic calls {d.op!r}")
        if isinstance(d, (E.Ramp, E.Broadcast, E.Shuffle)):
            raise _Mismatch(f"at {where}: vector expressions cannot be matched")
        for name in ("a", "b", "value", "condition", "true_value", "false_value"):
            if hasattr(d, name):
                self.value(getattr(d, name), getattr(w, name), where)
        if isinstance(d, E.Call):
            if len(d.args) != len(w.args):
                raise _Mismatch(f"at {where}: {w.op} with {len(w.args)} arguments")
            for a, b in zip(d.args, w.args):
                self.value(a, b, where)


def _index_like(a: str, b: str) -> bool:
    return {a, b} <= {"int32", "int64"}


_STMT_RULES = {
    SeqStmt: _Comparator._seq, For: _Comparator._for, BlockRealize: _Comparator._realize,
    BufferStore: _Comparator._store, LetStmt: _Comparator._let, IfThenElse: _Comparator._if,
    Evaluate: _Comparator._evaluate,
}


# ---- binding the implementation ---------------------------------------------------------------

def _bind_impl(block: Block, intrin: TensorIntrin, match: _Match, name: str,
               subject: str) -> Block:
    desc, impl = intrin.desc, _fresh_copy(intrin.impl)
    impl_block = impl.body.block
    regions = {r.buffer: r for r in tuple(impl_block.reads) + tuple(impl_block.writes)}
    matches = []
    for d_buf, i_buf in zip(desc.buffers, impl.buffers):
        w_buf = match.buffers.get(d_buf)
        if w_buf is None:
            raise ScheduleError(PRIM, subject, f"tensor intrinsic {name!r}: the description "
                                f"never accesses its buffer {d_buf.name!r}")
        base = match.base[w_buf]
        i_region = regions.get(i_buf)
        if i_region is None:
            raise ScheduleError(PRIM, subject, f"tensor intrinsic {name!r}: the "
                                f"implementation's root block declares no region of "
                                f"{i_buf.name!r}")
        lead = len(base) - len(i_region.region)
        ranges = []
        for k, b in enumerate(base):
            if k < lead:
                ranges.append(Range(b, op.const(1, b.dtype)))
            else:
                r = i_region.region[k - lead]
                ranges.append(Range(op.add(b, _retype(r.min, b.dtype)),
                                    _retype(r.extent, b.dtype)))
        source = BufferRegion(w_buf, tuple(ranges))
        if not i_buf.strides:
            _check_contiguous(source, i_buf, name, subject)
        matches.append(MatchBufferRegion(i_buf, source))
    annotations = dict(block.annotations)
    for key, value in impl_block.annotations.items():
        annotations.setdefault(key, value)
    return block.replace(body=impl_block.body, match_buffers=tuple(matches),
                         annotations=FrozenDict(annotations))


def _check_contiguous(source: BufferRegion, impl_buf: Buffer, name: str, subject: str) -> None:
    """A compact impl buffer needs a contiguous region: unit extents, then one free dimension,
    then whole dimensions of a compact workload buffer."""
    buf = source.buffer
    ana = Analyzer()
    whole = True
    ok = not buf.strides
    for k in range(len(source.region) - 1, -1, -1):
        r = source.region[k]
        if not ok:
            break
        if whole:
            whole = _provably(ana, op.eq(r.extent, buf.shape[k]))
            continue
        ok = _provably(ana, op.eq(r.extent, 1))
    if not ok:
        raise ScheduleError(PRIM, subject, f"tensor intrinsic {name!r}: its implementation "
                            f"views {impl_buf.name!r} as compact (no strides), but the matched "
                            f"region of {buf.name!r} is not contiguous")


def _fresh_copy(func: PrimFunc) -> PrimFunc:
    """A copy with new Vars and Buffers, so each tensorized block owns its implementation."""
    return renew_defs(func)


__all__ = ["tensorize"]

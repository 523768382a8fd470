"""Lowered TIR -> LLVM IR (llvmlite), following the kernel ABI in docs/internals.md.

Each PrimFunc ``f`` becomes ``i32 f(i64* args)``, a thin wrapper that unpacks the argument
slots and calls ``f_compute`` (internal, pointers marked ``noalias`` and 64-byte aligned, so
LLVM may vectorize freely; it is inlined into the wrapper). Expressions and statements are
emitted through dispatch tables keyed by node class. Parallel loops are outlined into
closures run by libgomp (see :mod:`workbench.codegen.parallel`).
"""
from __future__ import annotations

import json
from typing import Any, Callable

import llvmlite.ir as ir

from workbench.codegen.index_cse import KEYED as CSE_KEYED
from workbench.codegen.index_cse import IndexCSE
from workbench.codegen.intrinsics import INTRINSIC_RULES, emit_llvm_intrin_call
from workbench.codegen.llvm_types import I8, I32, I64, I8P, element_bytes, memory_type, \
    value_type
from workbench.codegen.wide_index import widen
from workbench.ir import dtype as dt
from workbench.ir.module import IRModule
from workbench.target import Target
from workbench.tir import expr as E
from workbench.tir import stmt as S
from workbench.tir.buffer import Buffer
from workbench.tir.function import PrimFunc

# Allocations up to this size live on the stack (hoisted to the function entry); larger ones,
# and any with a size known only at run time, are heap-allocated for their scope.
MAX_STACK_BYTES = 64 * 1024


class RenderError(ValueError):
    """The IR has something codegen cannot emit; the message names the function and node."""


class FunctionContext:
    """Emission state for one LLVM function: builder, variable values, pointer types."""

    def __init__(self, renderer: "LLVMRenderer", fn: ir.Function, name: str) -> None:
        self.renderer = renderer
        self.module = renderer.module
        self.target = renderer.target
        self.fn = fn
        self.name = name
        entry = fn.append_basic_block("entry")
        self.alloca_block = entry
        body = fn.append_basic_block("body")
        self.b = ir.IRBuilder(body)
        self.vars: dict[E.Var, ir.Value] = {}
        self.cse = IndexCSE(self.vars)
        self.heap_allocs: list[ir.Value] = []
        self.fail_block: ir.Block | None = None

    # -- helpers ---------------------------------------------------------------------------
    def finish_entry(self) -> None:
        ir.IRBuilder(self.alloca_block).branch(self.fn.blocks[1])

    def entry_alloca(self, ty: ir.Type, count: int, align: int) -> ir.Value:
        """An alloca in the entry block, so loops do not grow the stack."""
        eb = ir.IRBuilder(self.alloca_block)
        if self.alloca_block.instructions:
            eb.position_before(self.alloca_block.instructions[0])
        slot = eb.alloca(ty, size=ir.Constant(I64, count))
        slot.align = align
        return slot

    def per_lane(self, scalar_fn: Callable[[list[ir.Value]], ir.Value],
                 vals: list[ir.Value]) -> ir.Value:
        """Apply a scalar operation lane by lane to vector operands."""
        ty = vals[0].type
        if not isinstance(ty, ir.VectorType):
            return scalar_fn(vals)
        out = None
        for lane in range(ty.count):
            idx = ir.Constant(I32, lane)
            r = scalar_fn([self.b.extract_element(v, idx) for v in vals])
            if out is None:
                out = ir.Constant(ir.VectorType(r.type, ty.count), ir.Undefined)
            out = self.b.insert_element(out, r, idx)
        return out

    def splat(self, value: ir.Value, lanes: int) -> ir.Value:
        vty = ir.VectorType(value.type, lanes)
        v = self.b.insert_element(ir.Constant(vty, ir.Undefined), value, ir.Constant(I32, 0))
        mask = ir.Constant(ir.VectorType(I32, lanes), [ir.Constant(I32, 0)] * lanes)
        return self.b.shuffle_vector(v, ir.Constant(vty, ir.Undefined), mask)

    def buffer_ptr(self, buf: Buffer, dtype: str | None = None) -> ir.Value:
        """The buffer's base pointer typed for element ``dtype``."""
        base = self.vars.get(buf.data)
        if base is None:
            raise RenderError(f"in {self.name!r}: buffer {buf.name!r} has no storage here")
        ty = memory_type(dt.element_of(dtype or buf.dtype)).as_pointer()
        return self.cse.pointer(self.b, base, ty)

    def fail(self) -> ir.Block:
        """The block that returns a non-zero code (a runtime check or allocation failed).

        Parallel closures return nothing; a failure there ends only that thread's chunk.
        """
        if self.fail_block is None:
            self.fail_block = self.fn.append_basic_block("check_failed")
            ret_type = self.fn.function_type.return_type
            fb = ir.IRBuilder(self.fail_block)
            if isinstance(ret_type, ir.VoidType):
                fb.ret_void()
            else:
                fb.ret(ir.Constant(ret_type, 1))
        return self.fail_block

    # -- dispatch ----------------------------------------------------------------------------
    def expr(self, e: E.PrimExpr) -> ir.Value:
        rule = _EXPR_RULES.get(type(e))
        if rule is None:
            raise RenderError(f"in {self.name!r}: cannot emit expression {type(e).__name__}: "
                              f"{e!r}")
        if type(e) in CSE_KEYED:
            return self.cse.render(e, self.b, lambda: rule(self, e))
        return rule(self, e)

    def stmt(self, s: S.Stmt) -> None:
        rule = _STMT_RULES.get(type(s))
        if rule is None:
            raise RenderError(f"in {self.name!r}: cannot emit statement {type(s).__name__}")
        rule(self, s)


# ---- expressions ----------------------------------------------------------------------------

def _is_float(e: E.PrimExpr) -> bool:
    return dt.parse(e.dtype).is_float


def _is_unsigned(e: E.PrimExpr) -> bool:
    t = dt.parse(e.dtype)
    return t.is_uint or t.is_bool


def _int_imm(ctx: FunctionContext, e: E.IntImm) -> ir.Value:
    return ir.Constant(value_type(e.dtype), e.value)


def _float_imm(ctx: FunctionContext, e: E.FloatImm) -> ir.Value:
    if dt.parse(e.dtype).is_bfloat:
        return ir.Constant(value_type(e.dtype), bfloat16_bits(e.value))
    return ir.Constant(value_type(e.dtype), e.value)


def bfloat16_bits(value: float) -> int:
    """The bfloat16 bit pattern nearest to ``value`` (round half to even)."""
    import numpy as np
    return int(np.array(value, dtype=dt.bfloat16_numpy()).view(np.uint16))


def _var(ctx: FunctionContext, v: E.Var) -> ir.Value:
    try:
        return ctx.vars[v]
    except KeyError:
        raise RenderError(f"in {ctx.name!r}: variable {v.name!r} is not defined here") from None


def _fast(ctx: FunctionContext) -> tuple[str, ...]:
    """Float flags. ``contract`` (fusing a*b+c into one FMA, as C compilers and TVM do by
    default) is always on: it rounds once instead of twice and keeps IEEE semantics for
    NaN/Inf and ordering; the rest of fast-math only when the target asks for it."""
    return ("fast",) if ctx.target.fast_math else ("contract",)


def _arith(int_op: str, float_op: str, uint_op: str | None = None):
    def rule(ctx: FunctionContext, e: E.BinaryOp) -> ir.Value:
        a, b = ctx.expr(e.a), ctx.expr(e.b)
        if _is_float(e):
            return getattr(ctx.b, float_op)(a, b, flags=_fast(ctx))
        if uint_op is not None and _is_unsigned(e):
            return getattr(ctx.b, uint_op)(a, b)
        return getattr(ctx.b, int_op)(a, b)
    return rule


def _wrap_nsw(method: str):
    """Signed index arithmetic is assumed not to overflow (as TVM does), which lets LLVM
    widen and vectorize address computations."""
    def emit(b: ir.IRBuilder, x: ir.Value, y: ir.Value) -> ir.Value:
        return getattr(b, method)(x, y, flags=("nsw",))
    return emit


def _add_sub_mul(int_method: str, float_method: str):
    nsw = _wrap_nsw(int_method)

    def rule(ctx: FunctionContext, e: E.BinaryOp) -> ir.Value:
        a, b = ctx.expr(e.a), ctx.expr(e.b)
        if _is_float(e):
            return getattr(ctx.b, float_method)(a, b, flags=_fast(ctx))
        t = dt.parse(e.dtype)
        if t.is_int and t.bits >= 32:
            return nsw(ctx.b, a, b)
        return getattr(ctx.b, int_method)(a, b)
    return rule


def _zero_like(v: ir.Value) -> ir.Value:
    return ir.Constant(v.type, None)


def _floor_adjust(ctx: FunctionContext, b_val: ir.Value, r: ir.Value) -> ir.Value:
    """True where truncating division must be corrected to floor: r != 0 and sign(r) != sign(b)."""
    zero = _zero_like(r)
    nonzero = ctx.b.icmp_signed("!=", r, zero)
    signs_differ = ctx.b.icmp_signed("<", ctx.b.xor(r, b_val), zero)
    return ctx.b.and_(nonzero, signs_differ)


def _floordiv(ctx: FunctionContext, e: E.FloorDiv) -> ir.Value:
    a, b = ctx.expr(e.a), ctx.expr(e.b)
    if _is_unsigned(e):
        return ctx.b.udiv(a, b)
    q = ctx.b.sdiv(a, b)
    r = ctx.b.srem(a, b)
    adjust = _floor_adjust(ctx, b, r)
    one = ir.Constant(q.type, [1] * q.type.count) if isinstance(q.type, ir.VectorType) \
        else ir.Constant(q.type, 1)
    return ctx.b.select(adjust, ctx.b.sub(q, one), q)


def _floormod(ctx: FunctionContext, e: E.FloorMod) -> ir.Value:
    a, b = ctx.expr(e.a), ctx.expr(e.b)
    if _is_unsigned(e):
        return ctx.b.urem(a, b)
    r = ctx.b.srem(a, b)
    adjust = _floor_adjust(ctx, b, r)
    return ctx.b.select(adjust, ctx.b.add(r, b), r)


def _minmax(pred: str):
    def rule(ctx: FunctionContext, e: E.BinaryOp) -> ir.Value:
        a, b = ctx.expr(e.a), ctx.expr(e.b)
        if _is_float(e):
            c = ctx.b.fcmp_ordered(pred, a, b)
        elif _is_unsigned(e):
            c = ctx.b.icmp_unsigned(pred, a, b)
        else:
            c = ctx.b.icmp_signed(pred, a, b)
        return ctx.b.select(c, a, b)
    return rule


_CMP_SYMBOL = {E.EQ: "==", E.NE: "!=", E.LT: "<", E.LE: "<=", E.GT: ">", E.GE: ">="}


def _compare(ctx: FunctionContext, e: E.CmpOp) -> ir.Value:
    a, b = ctx.expr(e.a), ctx.expr(e.b)
    sym = _CMP_SYMBOL[type(e)]
    if _is_float(e.a):
        # != is unordered so that nan != x holds, as in numpy; the rest are ordered.
        if sym == "!=":
            return ctx.b.fcmp_unordered(sym, a, b)
        return ctx.b.fcmp_ordered(sym, a, b)
    if _is_unsigned(e.a):
        return ctx.b.icmp_unsigned(sym, a, b)
    return ctx.b.icmp_signed(sym, a, b)


def _logical(method: str):
    def rule(ctx: FunctionContext, e: E.BinaryOp) -> ir.Value:
        return getattr(ctx.b, method)(ctx.expr(e.a), ctx.expr(e.b))
    return rule


def _not(ctx: FunctionContext, e: E.Not) -> ir.Value:
    return ctx.b.not_(ctx.expr(e.a))


def _cast(ctx: FunctionContext, e: E.Cast) -> ir.Value:
    return cast_value(ctx, ctx.expr(e.value), e.value.dtype, e.dtype)


def _bf16_to_f32(ctx: FunctionContext, v: ir.Value, lanes: int) -> ir.Value:
    """bfloat16 bits -> float32: the bits are the float's upper half."""
    i32 = I32 if lanes == 1 else ir.VectorType(I32, lanes)
    f32 = ir.FloatType() if lanes == 1 else ir.VectorType(ir.FloatType(), lanes)
    wide = ctx.b.shl(ctx.b.zext(v, i32), _splat_const(i32, 16))
    return ctx.b.bitcast(wide, f32)


def _f32_to_bf16(ctx: FunctionContext, v: ir.Value, lanes: int) -> ir.Value:
    """float32 -> bfloat16 bits, rounding half to even; NaN stays a (quiet) NaN."""
    i32 = I32 if lanes == 1 else ir.VectorType(I32, lanes)
    i16 = ir.IntType(16) if lanes == 1 else ir.VectorType(ir.IntType(16), lanes)
    bits = ctx.b.bitcast(v, i32)
    odd = ctx.b.and_(ctx.b.lshr(bits, _splat_const(i32, 16)), _splat_const(i32, 1))
    rounded = ctx.b.add(ctx.b.add(bits, _splat_const(i32, 0x7FFF)), odd)
    out = ctx.b.trunc(ctx.b.lshr(rounded, _splat_const(i32, 16)), i16)
    nan = ctx.b.fcmp_unordered("uno", v, v)
    qnan = ctx.b.trunc(ctx.b.or_(ctx.b.lshr(bits, _splat_const(i32, 16)),
                                 _splat_const(i32, 0x40)), i16)
    return ctx.b.select(nan, qnan, out)


def _splat_const(ty: ir.Type, value: int) -> ir.Constant:
    if isinstance(ty, ir.VectorType):
        return ir.Constant(ty, [ir.Constant(ty.element, value)] * ty.count)
    return ir.Constant(ty, value)


def cast_value(ctx: FunctionContext, v: ir.Value, src: str, dst: str) -> ir.Value:
    s, d = dt.parse(src), dt.parse(dst)
    to = value_type(dst)
    if src == dst:
        return v
    if s.is_bfloat or d.is_bfloat:
        f32 = dt.with_lanes("float32", s.lanes)
        if s.is_bfloat and d.is_bfloat:
            return v
        if s.is_bfloat:
            return cast_value(ctx, _bf16_to_f32(ctx, v, s.lanes), f32, dst)
        return _f32_to_bf16(ctx, cast_value(ctx, v, src, f32), s.lanes)
    if d.is_bool:
        if s.is_float:
            return ctx.b.fcmp_unordered("!=", v, _zero_like(v))
        return ctx.b.icmp_unsigned("!=", v, _zero_like(v))
    if s.is_float and d.is_float:
        if d.bits > s.bits:
            return ctx.b.fpext(v, to)
        return ctx.b.fptrunc(v, to) if d.bits < s.bits else v
    if s.is_float:
        return ctx.b.fptoui(v, to) if d.is_uint else ctx.b.fptosi(v, to)
    signed_src = s.is_int
    if d.is_float:
        return ctx.b.sitofp(v, to) if signed_src else ctx.b.uitofp(v, to)
    if d.bits > s.bits:
        return ctx.b.sext(v, to) if signed_src else ctx.b.zext(v, to)
    if d.bits < s.bits:
        return ctx.b.trunc(v, to)
    return v


def _select(ctx: FunctionContext, e: E.Select) -> ir.Value:
    return ctx.b.select(ctx.expr(e.condition), ctx.expr(e.true_value),
                        ctx.expr(e.false_value))


def _ramp(ctx: FunctionContext, e: E.Ramp) -> ir.Value:
    base = ctx.splat(ctx.expr(e.base), e.lanes)
    stride = ctx.splat(ctx.expr(e.stride), e.lanes)
    elem = value_type(e.base.dtype)
    steps = ir.Constant(ir.VectorType(elem, e.lanes), [ir.Constant(elem, i)
                                                        for i in range(e.lanes)])
    return ctx.b.add(base, ctx.b.mul(stride, steps))


def _broadcast(ctx: FunctionContext, e: E.Broadcast) -> ir.Value:
    return ctx.splat(ctx.expr(e.value), e.lanes)


def _let(ctx: FunctionContext, e: E.Let) -> ir.Value:
    ctx.vars[e.var] = ctx.expr(e.value)
    return ctx.expr(e.body)


def _shuffle(ctx: FunctionContext, e: E.Shuffle) -> ir.Value:
    lanes: list[ir.Value] = []
    for vec in e.vectors:
        v = ctx.expr(vec)
        n = dt.lanes_of(vec.dtype)
        lanes.extend(v if n == 1 else ctx.b.extract_element(v, ir.Constant(I32, i))
                     for i in range(n))
    out = ir.Constant(value_type(e.dtype), ir.Undefined)
    for pos, idx in enumerate(e.indices):
        out = ctx.b.insert_element(out, lanes[idx], ir.Constant(I32, pos))
    return out


def _call(ctx: FunctionContext, e: E.Call) -> ir.Value:
    if e.op == "if_then_else":
        return _if_then_else(ctx, e)
    if e.op in ("call_llvm_pure_intrin", "call_llvm_intrin"):
        return emit_llvm_intrin_call(ctx, e)
    if e.op == "address_of":
        return _address_of(ctx, e.args[0])
    rule = INTRINSIC_RULES.get(e.op)
    if rule is None:
        raise RenderError(f"in {ctx.name!r}: no code generation rule for intrinsic {e.op!r}")
    return rule(ctx, e, [ctx.expr(a) for a in e.args])


def _address_of(ctx: FunctionContext, load: E.BufferLoad) -> ir.Value:
    if not isinstance(load, E.BufferLoad) or len(load.indices) != 1:
        raise RenderError(f"in {ctx.name!r}: address_of takes a flattened scalar BufferLoad, "
                          f"got {load}")
    ptr = ctx.buffer_ptr(load.buffer, load.dtype)
    addr = ctx.b.gep(ptr, [ctx.expr(widen(load.indices[0]))], inbounds=True)
    return ctx.b.bitcast(addr, I8P)


def _if_then_else(ctx: FunctionContext, e: E.Call) -> ir.Value:
    cond_e, then_e, else_e = e.args
    cond = ctx.expr(cond_e)
    if dt.lanes_of(cond_e.dtype) > 1:
        return ctx.b.select(cond, ctx.expr(then_e), ctx.expr(else_e))
    # Only the taken side is evaluated: the other may read out of bounds (padding).
    with ctx.b.if_else(cond) as (then, otherwise):
        with then:
            tv = ctx.expr(then_e)
            then_block = ctx.b.block
        with otherwise:
            ev = ctx.expr(else_e)
            else_block = ctx.b.block
    phi = ctx.b.phi(tv.type)
    phi.add_incoming(tv, then_block)
    phi.add_incoming(ev, else_block)
    return phi


def _contiguous_ramp(idx: E.PrimExpr) -> bool:
    return isinstance(idx, E.Ramp) and isinstance(idx.stride, E.IntImm) and idx.stride.value == 1


def _to_value(ctx: FunctionContext, v: ir.Value, dtype: str) -> ir.Value:
    """Memory representation -> register representation (bool: i8 -> i1)."""
    if dt.parse(dtype).is_bool:
        return ctx.b.icmp_unsigned("!=", v, _zero_like(v))
    return v


def _to_memory(ctx: FunctionContext, v: ir.Value, dtype: str) -> ir.Value:
    if dt.parse(dtype).is_bool:
        return ctx.b.zext(v, memory_type(dtype))
    return v


#: Strided vector loads up to this stride are one wide load and a shuffle.
_MAX_SHUFFLE_STRIDE = 4


def _buffer_load(ctx: FunctionContext, e: E.BufferLoad) -> ir.Value:
    if len(e.indices) != 1:
        raise RenderError(f"in {ctx.name!r}: load of {e.buffer.name!r} is not flattened")
    idx = widen(e.indices[0])
    ptr = ctx.buffer_ptr(e.buffer, e.dtype)
    align = element_bytes(e.dtype)
    lanes = dt.lanes_of(e.dtype)
    if lanes == 1:
        addr = ctx.b.gep(ptr, [ctx.expr(idx)], inbounds=True)
        return _to_value(ctx, ctx.b.load(addr, align=align), e.dtype)
    if _contiguous_ramp(idx):
        addr = ctx.b.gep(ptr, [ctx.expr(idx.base)], inbounds=True)
        vptr = ctx.b.bitcast(addr, memory_type(e.dtype).as_pointer())
        return _to_value(ctx, ctx.b.load(vptr, align=align), e.dtype)
    if isinstance(idx, E.Broadcast):
        addr = ctx.b.gep(ptr, [ctx.expr(idx.value)], inbounds=True)
        scalar = _to_value(ctx, ctx.b.load(addr, align=align), dt.element_of(e.dtype))
        return ctx.splat(scalar, lanes)
    stride = idx.stride.value if isinstance(idx, E.Ramp) and \
        isinstance(idx.stride, E.IntImm) else 0
    if 1 < stride <= _MAX_SHUFFLE_STRIDE:
        # A small constant stride (pooling, strided convolution): one contiguous load of
        # exactly the elements spanned -- nothing past the last lane is read -- and a shuffle
        # picking every stride-th one. Lane-by-lane loads cost several times more.
        span = (lanes - 1) * stride + 1
        addr = ctx.b.gep(ptr, [ctx.expr(idx.base)], inbounds=True)
        wide_ty = memory_type(dt.with_lanes(e.dtype, span))
        wide = ctx.b.load(ctx.b.bitcast(addr, wide_ty.as_pointer()), align=align)
        mask = ir.Constant(ir.VectorType(I32, lanes), [ir.Constant(I32, k * stride)
                                                        for k in range(lanes)])
        picked = ctx.b.shuffle_vector(wide, ir.Constant(wide_ty, ir.Undefined), mask)
        return _to_value(ctx, picked, e.dtype)
    # A gather: one scalar load per lane.
    index_vec = ctx.expr(idx)

    def load_lane(vals: list[ir.Value]) -> ir.Value:
        return ctx.b.load(ctx.b.gep(ptr, vals, inbounds=True), align=align)
    return _to_value(ctx, ctx.per_lane(load_lane, [index_vec]), e.dtype)


_EXPR_RULES: dict[type, Callable[[FunctionContext, Any], ir.Value]] = {
    E.IntImm: _int_imm, E.FloatImm: _float_imm, E.Var: _var, E.SizeVar: _var,
    E.Add: _add_sub_mul("add", "fadd"), E.Sub: _add_sub_mul("sub", "fsub"),
    E.Mul: _add_sub_mul("mul", "fmul"),
    E.Div: _arith("sdiv", "fdiv", "udiv"), E.Mod: _arith("srem", "frem", "urem"),
    E.FloorDiv: _floordiv, E.FloorMod: _floormod,
    E.Min: _minmax("<"), E.Max: _minmax(">"),
    **{cls: _compare for cls in _CMP_SYMBOL},
    E.And: _logical("and_"), E.Or: _logical("or_"), E.Not: _not,
    E.Cast: _cast, E.Select: _select, E.Ramp: _ramp, E.Broadcast: _broadcast, E.Let: _let,
    E.Shuffle: _shuffle, E.Call: _call, E.BufferLoad: _buffer_load,
}


# ---- statements -----------------------------------------------------------------------------

def _seq(ctx: FunctionContext, s: S.SeqStmt) -> None:
    for child in s.seq:
        ctx.stmt(child)


def _buffer_store(ctx: FunctionContext, s: S.BufferStore) -> None:
    if len(s.indices) != 1:
        raise RenderError(f"in {ctx.name!r}: store to {s.buffer.name!r} is not flattened")
    idx = widen(s.indices[0])
    vdtype = s.value.dtype
    value = _to_memory(ctx, ctx.expr(s.value), vdtype)
    ptr = ctx.buffer_ptr(s.buffer, vdtype)
    align = element_bytes(vdtype)
    lanes = dt.lanes_of(vdtype)
    if lanes == 1:
        ctx.b.store(value, ctx.b.gep(ptr, [ctx.expr(idx)], inbounds=True), align=align)
        return
    if _contiguous_ramp(idx):
        addr = ctx.b.gep(ptr, [ctx.expr(idx.base)], inbounds=True)
        ctx.b.store(value, ctx.b.bitcast(addr, memory_type(vdtype).as_pointer()), align=align)
        return
    index_vec = ctx.expr(idx)
    for lane in range(lanes):
        li = ir.Constant(I32, lane)
        addr = ctx.b.gep(ptr, [ctx.b.extract_element(index_vec, li)], inbounds=True)
        ctx.b.store(ctx.b.extract_element(value, li), addr, align=align)


def emit_serial_loop(ctx: FunctionContext, loop_var: E.Var, begin: ir.Value, end: ir.Value,
                     body: Callable[[], None]) -> None:
    """A canonical counted loop ``for (v = begin; v < end; ++v)`` with a phi induction var."""
    pre = ctx.b.block
    header = ctx.fn.append_basic_block(f"for_{loop_var.name}")
    body_block = ctx.fn.append_basic_block(f"for_{loop_var.name}_body")
    exit_block = ctx.fn.append_basic_block(f"for_{loop_var.name}_end")
    ctx.b.branch(header)
    ctx.b.position_at_end(header)
    iv = ctx.b.phi(begin.type, name=loop_var.name)
    iv.add_incoming(begin, pre)
    signed = not dt.parse(loop_var.dtype).is_uint
    cond = ctx.b.icmp_signed("<", iv, end) if signed else ctx.b.icmp_unsigned("<", iv, end)
    ctx.b.cbranch(cond, body_block, exit_block)
    ctx.b.position_at_end(body_block)
    saved = ctx.vars.get(loop_var)
    ctx.vars[loop_var] = iv
    body()
    if saved is not None:
        ctx.vars[loop_var] = saved
    nxt = ctx.b.add(iv, ir.Constant(iv.type, 1), flags=("nsw",) if signed else ())
    iv.add_incoming(nxt, ctx.b.block)
    ctx.b.branch(header)
    ctx.b.position_at_end(exit_block)


def _for(ctx: FunctionContext, s: S.For) -> None:
    if s.kind == S.ForKind.PARALLEL and not ctx.renderer.in_parallel:
        from workbench.codegen.parallel import emit_parallel_for
        emit_parallel_for(ctx, s)
        return
    begin = ctx.expr(s.min)
    end = ctx.b.add(begin, ctx.expr(s.extent))
    emit_serial_loop(ctx, s.loop_var, begin, end, lambda: ctx.stmt(s.body))


def _while(ctx: FunctionContext, s: S.While) -> None:
    header = ctx.fn.append_basic_block("while")
    body_block = ctx.fn.append_basic_block("while_body")
    exit_block = ctx.fn.append_basic_block("while_end")
    ctx.b.branch(header)
    ctx.b.position_at_end(header)
    ctx.b.cbranch(ctx.expr(s.condition), body_block, exit_block)
    ctx.b.position_at_end(body_block)
    ctx.stmt(s.body)
    ctx.b.branch(header)
    ctx.b.position_at_end(exit_block)


def _if(ctx: FunctionContext, s: S.IfThenElse) -> None:
    cond = ctx.expr(s.condition)
    if s.else_case is None:
        with ctx.b.if_then(cond):
            ctx.stmt(s.then_case)
        return
    with ctx.b.if_else(cond) as (then, otherwise):
        with then:
            ctx.stmt(s.then_case)
        with otherwise:
            ctx.stmt(s.else_case)


def _let_stmt(ctx: FunctionContext, s: S.LetStmt) -> None:
    ctx.vars[s.var] = ctx.expr(s.value)
    ctx.stmt(s.body)


def _evaluate(ctx: FunctionContext, s: S.Evaluate) -> None:
    if not isinstance(s.value, (E.IntImm, E.FloatImm, E.StringImm)):
        ctx.expr(s.value)


def _attr(ctx: FunctionContext, s: S.AttrStmt) -> None:
    ctx.stmt(s.body)


def _assert(ctx: FunctionContext, s: S.AssertStmt) -> None:
    ok = ctx.fn.append_basic_block("assert_ok")
    ctx.b.cbranch(ctx.expr(s.condition), ok, ctx.fail())
    ctx.b.position_at_end(ok)
    ctx.stmt(s.body)


def _decl_buffer(ctx: FunctionContext, s: S.DeclBuffer) -> None:
    ctx.stmt(s.body)


def _allocate(ctx: FunctionContext, s: S.Allocate) -> None:
    elem = memory_type(dt.element_of(s.dtype))
    size = s.extents[0] if len(s.extents) == 1 else None
    nbytes = size.value * element_bytes(s.dtype) if isinstance(size, E.IntImm) else None
    if nbytes is not None and nbytes <= MAX_STACK_BYTES:
        ptr = ctx.entry_alloca(elem, max(size.value, 1), 64)
        ctx.vars[s.buffer_var] = ctx.b.bitcast(ptr, I8P)
        ctx.stmt(s.body)
        return
    total: ir.Value = ir.Constant(I64, element_bytes(s.dtype))
    for ext in s.extents:
        total = ctx.b.mul(total, cast_value(ctx, ctx.expr(ext), ext.dtype, "int64"))
    # Round up to the alignment: aligned_alloc requires a multiple of it.
    total = ctx.b.and_(ctx.b.add(total, ir.Constant(I64, 63)), ir.Constant(I64, ~63))
    malloc = ctx.renderer.declare("aligned_alloc", I8P, [I64, I64])
    free = ctx.renderer.declare("free", ir.VoidType(), [I8P])
    mem = ctx.b.call(malloc, [ir.Constant(I64, 64), total])
    ok = ctx.fn.append_basic_block("alloc_ok")
    ctx.b.cbranch(ctx.b.icmp_unsigned("==", mem, ir.Constant(I8P, None)), ctx.fail(), ok)
    ctx.b.position_at_end(ok)
    ctx.vars[s.buffer_var] = mem
    ctx.stmt(s.body)
    ctx.b.call(free, [mem])


_STMT_RULES: dict[type, Callable[[FunctionContext, Any], None]] = {
    S.SeqStmt: _seq, S.BufferStore: _buffer_store, S.For: _for, S.While: _while,
    S.IfThenElse: _if, S.LetStmt: _let_stmt, S.Evaluate: _evaluate, S.AttrStmt: _attr,
    S.AssertStmt: _assert, S.DeclBuffer: _decl_buffer, S.Allocate: _allocate,
}


# ---- functions and modules ------------------------------------------------------------------

def shape_vars(func: PrimFunc) -> list[E.Var]:
    """Symbolic shape variables of the buffer parameters, in first-use order."""
    seen: list[E.Var] = []
    for buf in func.buffers:
        for dim in buf.shape:
            if isinstance(dim, E.Var) and not any(dim is v for v in seen) and \
                    not any(dim is p for p in func.params):
                seen.append(dim)
    return seen


def _param_meta(func: PrimFunc) -> list[dict[str, Any]]:
    out = []
    for p in func.params:
        buf = func.buffer_map.get(p)
        if buf is None:
            out.append({"name": p.name, "kind": "scalar", "dtype": p.dtype})
            continue
        shape: list[Any] = []
        for dim in buf.shape:
            if isinstance(dim, E.IntImm):
                shape.append(dim.value)
            elif isinstance(dim, E.Var):
                shape.append(dim.name)
            else:
                raise RenderError(f"buffer {buf.name!r}: shape entry {dim!r} must be a constant "
                                  "or a variable")
        out.append({"name": buf.name, "kind": "buffer", "dtype": buf.dtype, "shape": shape})
    return out


class LLVMRenderer:
    """Renders the PrimFuncs of a lowered IRModule into one LLVM module."""

    def __init__(self, target: Target) -> None:
        self.target = target
        self.module = ir.Module(name="workbench")
        self.module.triple = target.triple
        self.in_parallel = False
        self.metadata: dict[str, Any] = {"version": 1, "entry": None, "functions": []}
        self._counter = 0

    def fresh_name(self, prefix: str) -> str:
        self._counter += 1
        return f"{prefix}_{self._counter}"

    def declare(self, name: str, ret: ir.Type, args: list[ir.Type]) -> ir.Function:
        fn = self.module.globals.get(name)
        if fn is None:
            fn = ir.Function(self.module, ir.FunctionType(ret, args), name)
        return fn

    def add_function(self, name: str, func: PrimFunc) -> None:
        svars = shape_vars(func)
        self.metadata["functions"].append({
            "name": name, "params": _param_meta(func), "shape_vars": [v.name for v in svars]})
        if self.metadata["entry"] is None:
            self.metadata["entry"] = name
        compute = self._compute_function(name, func, svars)
        self._wrapper(name, func, svars, compute)

    def _compute_function(self, name: str, func: PrimFunc, svars: list[E.Var]) -> ir.Function:
        arg_types: list[ir.Type] = []
        for p in func.params:
            arg_types.append(I8P if p in func.buffer_map else value_type(p.dtype))
        arg_types += [value_type(v.dtype) for v in svars]
        fn = ir.Function(self.module, ir.FunctionType(I32, arg_types), f"{name}_compute")
        fn.linkage = "internal"
        fn.attributes.add("nounwind")
        ctx = FunctionContext(self, fn, name)
        noalias = bool(func.attrs.get("tir.noalias", True))
        for p, arg in zip(list(func.params) + svars, fn.args):
            arg.name = p.name
            buf = func.buffer_map.get(p)
            if buf is not None:
                if noalias:
                    arg.add_attribute("noalias")
                ctx.vars[buf.data] = arg
            else:
                ctx.vars[p] = arg
        ctx.stmt(func.body)
        if not ctx.b.block.is_terminated:
            ctx.b.ret(ir.Constant(I32, 0))
        ctx.finish_entry()
        return fn

    def _wrapper(self, name: str, func: PrimFunc, svars: list[E.Var], compute: ir.Function):
        fn = ir.Function(self.module, ir.FunctionType(I32, [I64.as_pointer()]), name)
        b = ir.IRBuilder(fn.append_basic_block("entry"))
        args: list[ir.Value] = []
        for i, p in enumerate(list(func.params) + svars):
            slot = b.load(b.gep(fn.args[0], [ir.Constant(I32, i)]))
            if p in func.buffer_map:
                args.append(b.inttoptr(slot, I8P))
                continue
            t = dt.parse(p.dtype)
            if t.is_float:
                as_double = b.bitcast(slot, ir.DoubleType())
                args.append(as_double if t.bits == 64 else b.fptrunc(as_double, value_type(p.dtype)))
            elif t.bits < 64:
                args.append(b.trunc(slot, value_type(p.dtype)))
            else:
                args.append(slot)
        b.ret(b.call(compute, args))

    def finish(self) -> str:
        """The LLVM IR text, with the metadata global appended."""
        data = json.dumps(self.metadata, separators=(",", ":")).encode() + b"\0"
        ty = ir.ArrayType(I8, len(data))
        g = ir.GlobalVariable(self.module, ty, "__workbench_metadata")
        g.initializer = ir.Constant(ty, bytearray(data))
        g.global_constant = True
        return str(self.module)


def render(mod: IRModule, target: Target) -> tuple[str, dict[str, Any]]:
    """LLVM IR text and ABI metadata for every PrimFunc of a lowered module."""
    r = LLVMRenderer(target)
    for name, func in mod.items():
        if isinstance(func, PrimFunc):
            r.add_function(func.attrs.get("global_symbol", name), func)
    if not r.metadata["functions"]:
        raise RenderError("the module has no PrimFunc to compile")
    return r.finish(), r.metadata

"""``vectorize_loop``: loops of kind ``vectorized`` become vector (Ramp/Broadcast) code.

The loop variable becomes ``Ramp(min, 1, lanes)``; every expression that depends on it becomes a
vector of that many lanes, and scalars mixed with vectors are broadcast. Ramps are kept through
``+ - *`` with scalars so a contiguous access stays a single vector load/store. When the body
holds something with no vector form here (an inner loop, a branch on a vector condition, a
reduction into one location, an allocation), the loop is left serial for LLVM's own vectorizer
to try, which is always correct.
"""
from __future__ import annotations

from workbench.ir import dtype as dt
from workbench.tir import op
from workbench.tir.expr import (
    Add, BinaryOp, Broadcast, BufferLoad, Call, Cast, CmpOp, IntImm, Let, Mul, Not, PrimExpr,
    Ramp, Select, Sub, Var,
)
from workbench.tir.function import PrimFunc
from workbench.tir.functor import IRMutator
from workbench.tir.stmt import (
    Allocate, BufferStore, For, ForKind, IfThenElse, LetStmt, Stmt, While,
)

MAX_LANES = 128


class _CannotVectorize(Exception):
    """The body has a construct with no vector form; keep the loop serial."""


def _widens_int(src: str, dst: str) -> bool:
    """``src`` (vector) and ``dst`` (scalar) are integer types with ``dst`` at least as wide."""
    a, b = dt.parse(dt.element_of(src)), dt.parse(dst)
    return a.code == b.code == "int" and b.lanes == 1 and a.bits <= b.bits


def _lanes(e: PrimExpr) -> int:
    return dt.lanes_of(e.dtype)


def _broadcast(e: PrimExpr, lanes: int) -> PrimExpr:
    if _lanes(e) == lanes:
        return e
    if _lanes(e) != 1:
        raise _CannotVectorize(f"mixed vector widths {_lanes(e)} and {lanes}")
    return Broadcast(e, lanes, dt.with_lanes(e.dtype, lanes))


class _Vectorizer(IRMutator):
    def __init__(self, var: Var, start: PrimExpr, lanes: int) -> None:
        super().__init__()
        self.var = var
        self.lanes = lanes
        self.ramp = Ramp(op.cast(var.dtype, start), op.const(1, var.dtype), lanes,
                         dt.with_lanes(var.dtype, lanes))
        self.let_map: dict[Var, Var] = {}

    # -- expressions ----------------------------------------------------------------------
    def visit_Var(self, v: Var) -> PrimExpr:
        if v is self.var:
            return self.ramp
        return self.let_map.get(v, v)

    def visit_BinaryOp(self, e: BinaryOp) -> PrimExpr:
        a, b = self.visit(e.a), self.visit(e.b)
        if a is e.a and b is e.b:
            return e
        la, lb = _lanes(a), _lanes(b)
        if la == 1 and lb == 1:
            return e.replace(a=a, b=b)
        ramp = self._ramp_arith(type(e), a, b)
        if ramp is not None:
            return ramp
        lanes = max(la, lb)
        a, b = _broadcast(a, lanes), _broadcast(b, lanes)
        out = dt.with_lanes(e.dtype, lanes)
        return type(e)(a, b, out)

    @staticmethod
    def _ramp_arith(cls: type, a: PrimExpr, b: PrimExpr) -> PrimExpr | None:
        """Keep ``ramp +- scalar``, ``ramp * scalar`` and ``ramp + ramp`` as ramps."""
        def base(x):
            return x.value if isinstance(x, Broadcast) else x
        sa = isinstance(a, Ramp)
        sb = isinstance(b, Ramp)
        if cls in (Add, Sub) and sa and (sb or _lanes(b) == 1 or isinstance(b, Broadcast)):
            f = op.add if cls is Add else op.sub
            if sb:
                return Ramp(f(a.base, b.base), f(a.stride, b.stride), a.lanes, a.dtype)
            return Ramp(f(a.base, base(b)), a.stride, a.lanes, a.dtype)
        if cls is Add and sb and (_lanes(a) == 1 or isinstance(a, Broadcast)):
            return Ramp(op.add(base(a), b.base), b.stride, b.lanes, b.dtype)
        if cls is Mul and sa and (_lanes(b) == 1 or isinstance(b, Broadcast)):
            s = base(b)
            return Ramp(op.mul(a.base, s), op.mul(a.stride, s), a.lanes, a.dtype)
        if cls is Mul and sb and (_lanes(a) == 1 or isinstance(a, Broadcast)):
            s = base(a)
            return Ramp(op.mul(b.base, s), op.mul(b.stride, s), b.lanes, b.dtype)
        return None

    def visit_CmpOp(self, e: CmpOp) -> PrimExpr:
        a, b = self.visit(e.a), self.visit(e.b)
        if a is e.a and b is e.b:
            return e
        lanes = max(_lanes(a), _lanes(b))
        return type(e)(_broadcast(a, lanes), _broadcast(b, lanes), dt.with_lanes("bool", lanes))

    def visit_Not(self, e: Not) -> PrimExpr:
        a = self.visit(e.a)
        return e if a is e.a else Not(a, a.dtype)

    def visit_Cast(self, e: Cast) -> PrimExpr:
        v = self.visit(e.value)
        if v is e.value:
            return e
        # A widening integer cast of a ramp stays a ramp (of int64 base and stride): an int32
        # loop index added to an int64 symbolic shape's offset is then still one contiguous
        # vector access, not a gather. (Index arithmetic does not overflow int32, as
        # everywhere in lowering.)
        if isinstance(v, (Ramp, Broadcast)) and _widens_int(v.dtype, e.dtype):
            scalar = e.dtype
            if isinstance(v, Broadcast):
                return Broadcast(op.cast(scalar, v.value), v.lanes,
                                 dt.with_lanes(scalar, v.lanes))
            return Ramp(op.cast(scalar, v.base), op.cast(scalar, v.stride), v.lanes,
                        dt.with_lanes(scalar, v.lanes))
        return Cast(dt.with_lanes(e.dtype, _lanes(v)), v)

    def visit_Select(self, e: Select) -> PrimExpr:
        c, t, f = self.visit(e.condition), self.visit(e.true_value), self.visit(e.false_value)
        if c is e.condition and t is e.true_value and f is e.false_value:
            return e
        lanes = max(_lanes(c), _lanes(t), _lanes(f))
        return Select(_broadcast(c, lanes), _broadcast(t, lanes), _broadcast(f, lanes),
                      dt.with_lanes(e.dtype, lanes))

    def visit_Call(self, e: Call) -> PrimExpr:
        args = tuple(self.visit(a) for a in e.args)
        if all(a is b for a, b in zip(args, e.args)):
            return e
        if e.op == "if_then_else":
            if _lanes(args[0]) != 1:
                raise _CannotVectorize("if_then_else on a condition that varies across lanes")
            lanes = max(_lanes(args[1]), _lanes(args[2]))
            return Call(dt.with_lanes(e.dtype, lanes), e.op,
                        (args[0], _broadcast(args[1], lanes), _broadcast(args[2], lanes)))
        lanes = max(_lanes(a) for a in args)
        args = tuple(_broadcast(a, lanes) for a in args)
        return Call(dt.with_lanes(e.dtype, lanes), e.op, args)

    def visit_BufferLoad(self, e: BufferLoad) -> PrimExpr:
        indices = tuple(self.visit(i) for i in e.indices)
        if all(a is b for a, b in zip(indices, e.indices)):
            return e
        lanes = max(_lanes(i) for i in indices)
        indices = tuple(_broadcast(i, lanes) for i in indices)
        return BufferLoad(e.buffer, indices, dt.with_lanes(e.dtype, lanes))

    def visit_Let(self, e: Let) -> PrimExpr:
        raise _CannotVectorize("Let expression")

    def visit_Ramp(self, e: Ramp) -> PrimExpr:
        raise _CannotVectorize("nested vectorization")

    # -- statements -----------------------------------------------------------------------
    def visit_BufferStore(self, s: BufferStore) -> Stmt:
        indices = tuple(self.visit(i) for i in s.indices)
        value = self.visit(s.value)
        if value is s.value and all(a is b for a, b in zip(indices, s.indices)):
            # Every lane would repeat the same store; repeating it is not the same as storing
            # once when the value reads the location (C[0] = C[0] + 1).
            raise _CannotVectorize("a store that does not depend on the vectorized variable")
        idx_lanes = max(_lanes(i) for i in indices)
        if idx_lanes == 1:
            raise _CannotVectorize("several lanes store into one location (a reduction)")
        return BufferStore(s.buffer, _broadcast(value, idx_lanes),
                           tuple(_broadcast(i, idx_lanes) for i in indices))

    def visit_IfThenElse(self, s: IfThenElse) -> Stmt:
        cond = self.visit(s.condition)
        if _lanes(cond) != 1:
            raise _CannotVectorize("branch on a condition that varies across lanes")
        return self.generic_visit(s)

    def visit_LetStmt(self, s: LetStmt) -> Stmt:
        value = self.visit(s.value)
        if _lanes(value) == 1:
            return s.replace(value=value, body=self.visit(s.body))
        new_var = Var(s.var.name, value.dtype)
        self.let_map[s.var] = new_var
        return LetStmt(new_var, value, self.visit(s.body))

    def visit_For(self, s: For) -> Stmt:
        raise _CannotVectorize("a loop inside a vectorized loop")

    def visit_While(self, s: While) -> Stmt:
        raise _CannotVectorize("a while loop inside a vectorized loop")

    def visit_Allocate(self, s: Allocate) -> Stmt:
        raise _CannotVectorize("an allocation inside a vectorized loop")


class _VectorizeLoops(IRMutator):
    def __init__(self) -> None:
        super().__init__()
        self.fallbacks: list[str] = []

    def visit_For(self, loop: For) -> Stmt:
        loop = self.generic_visit(loop)
        if loop.kind != ForKind.VECTORIZED:
            return loop
        extent = loop.extent
        if not isinstance(extent, IntImm) or not 1 <= extent.value <= MAX_LANES:
            self.fallbacks.append(f"{loop.loop_var.name}: extent {extent} is not a small constant")
            return loop.replace(kind=ForKind.SERIAL)
        if extent.value == 1:
            return loop.replace(kind=ForKind.SERIAL)
        try:
            return _Vectorizer(loop.loop_var, loop.min, extent.value).visit(loop.body)
        except _CannotVectorize as why:
            self.fallbacks.append(f"{loop.loop_var.name}: {why}")
            return loop.replace(kind=ForKind.SERIAL)


def vectorize_loop(func: PrimFunc) -> PrimFunc:
    v = _VectorizeLoops()
    body = v.visit(func.body)
    if v.fallbacks:
        func = func.with_attr("vectorize_fallbacks", tuple(v.fallbacks))
    return func.with_body(body)

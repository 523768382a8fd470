"""Tensor IR: expressions, statements, buffers, PrimFuncs, and the tools that work on them."""
from workbench.tir.expr import (
    EQ, GE, GT, LE, LT, NE, Add, And, BinaryOp, Broadcast, BufferLoad, Call, Cast, CmpOp, Div,
    FloatImm, FloorDiv, FloorMod, IntImm, Let, Max, Min, Mod, Mul, Not, Or, PrimExpr, Ramp,
    Reduce, Select, Shuffle, SizeVar, StringImm, Sub, Var,
)
from workbench.tir.buffer import Buffer, BufferRegion, MatchBufferRegion, Range, decl_buffer
from workbench.tir.stmt import (
    Allocate, AssertStmt, AttrStmt, Block, BlockRealize, DeclBuffer, Evaluate, For, ForKind,
    IfThenElse, IterType, IterVar, LetStmt, SeqStmt, Stmt, BufferStore, While,
)
from workbench.tir.function import PrimFunc, prim_func
from workbench.tir.build_entry import build
from workbench.tir.tensor_intrin import TensorIntrin
from workbench.tir.op import (
    abs, all, any, atan, atan2, bitwise_and, bitwise_not, bitwise_or, bitwise_xor, call, cast,
    address_of, call_llvm_intrin, call_llvm_pure_intrin, reinterpret,
    ceil, const, cos, erf, exp, exp2, exp10, fabs, floor, floordiv, floormod, fmod,
    if_then_else, infinity, isfinite, isinf, isnan, log, log1p, log2, log10, logical_and,
    logical_not, logical_or, max, max_value, min, min_value, nearbyint, popcount, pow, round,
    rsqrt, select, shift_left, shift_right, sigmoid, sin, sqrt, tan, tanh, trunc, truncdiv,
    truncmod,
)

# Register TIR's structural-equality rules and printers with the ir layer (which cannot import
# tir itself).
from workbench.tir import structural_rules as _structural_rules  # noqa: E402,F401
from workbench.tir import printer as _printer  # noqa: E402,F401
# The schedule language sits on top of the IR above; importing it last keeps the order one-way.
from workbench.tir.schedule import (  # noqa: E402
    BlockRV, ExprRV, IndexMap, LoopRV, Schedule, ScheduleError, Trace,
)

"""How each TIR intrinsic (``Call.op``) becomes LLVM IR.

``INTRINSIC_RULES`` maps an op name to a function ``(ctx, call, args) -> ir.Value`` where
``args`` are the already-emitted operands. Float math that LLVM has an intrinsic for uses it
(vector forms included); the rest calls libm per lane. float16 math is done in float32.
``exp`` and ``sigmoid`` on float32 vectors compute exp inline
(:mod:`workbench.codegen.inline_exp`): they run inside fused kernels (a convolution's SiLU, an
attention kernel's softmax), where a vector-math call would spill the kernel's registers.
"""
from __future__ import annotations

import math
from typing import Callable

import llvmlite.ir as ir

from workbench.ir import dtype as dt
from workbench.codegen import inline_exp
from workbench.codegen.llvm_types import I1
from workbench.codegen.vector_math import vector_math_call

# LLVM intrinsics that accept scalars and vectors of float.
_LLVM_FLOAT_UNARY = {
    "exp": "llvm.exp", "exp2": "llvm.exp2", "log": "llvm.log", "log2": "llvm.log2",
    "log10": "llvm.log10", "sqrt": "llvm.sqrt", "sin": "llvm.sin", "cos": "llvm.cos",
    "floor": "llvm.floor", "ceil": "llvm.ceil", "trunc": "llvm.trunc", "fabs": "llvm.fabs",
    "round": "llvm.roundeven",          # numpy rounds half to even
    "nearbyint": "llvm.nearbyint",
}
# libm functions (double name, float name), called lane by lane.
_LIBM = {
    "tanh": ("tanh", "tanhf"), "erf": ("erf", "erff"), "log1p": ("log1p", "log1pf"),
    "tan": ("tan", "tanf"), "atan": ("atan", "atanf"), "exp10": ("exp10", "exp10f"),
    "atan2": ("atan2", "atan2f"), "fmod": ("fmod", "fmodf"), "pow": ("pow", "powf"),
}


def _suffix(t: ir.Type) -> str:
    if isinstance(t, ir.VectorType):
        return f"v{t.count}{_suffix(t.element)}"
    if isinstance(t, ir.FloatType):
        return "f32"
    if isinstance(t, ir.DoubleType):
        return "f64"
    if isinstance(t, ir.HalfType):
        return "f16"
    return f"i{t.width}"


def _declare(module: ir.Module, name: str, ret: ir.Type, args: list[ir.Type]) -> ir.Function:
    fn = module.globals.get(name)
    if fn is None:
        fn = ir.Function(module, ir.FunctionType(ret, args), name)
    return fn


def llvm_intrinsic(ctx, name: str, args: list[ir.Value], ret: ir.Type | None = None) -> ir.Value:
    ty = args[0].type
    fn = _declare(ctx.module, f"{name}.{_suffix(ty)}", ret or ty, [a.type for a in args])
    return ctx.b.call(fn, args)


def _in_float32(ctx, call, args, emit: Callable) -> ir.Value:
    """Run ``emit`` in float32 when the operands are float16 (libm has no half functions)."""
    elem = dt.element_of(call.args[0].dtype)
    if elem != "float16":
        return emit(args)
    lanes = dt.lanes_of(call.args[0].dtype)
    f32 = ir.FloatType() if lanes == 1 else ir.VectorType(ir.FloatType(), lanes)
    wide = [ctx.b.fpext(a, f32) for a in args]
    return ctx.b.fptrunc(emit(wide), args[0].type)


def _llvm_unary(name: str, func: str | None = None):
    def emit(ctx, a):
        if func == "exp" and inline_exp.applies(a[0].type):
            return inline_exp.emit_exp(ctx, a[0])
        if func is not None:
            vec = vector_math_call(ctx, func, a)
            if vec is not None:
                return vec
        return llvm_intrinsic(ctx, name, a)

    def rule(ctx, call, args):
        return _in_float32(ctx, call, args, lambda a: emit(ctx, a))
    return rule


def _libm(name: str):
    dname, fname = _LIBM[name]

    def scalar_call(ctx, vals: list[ir.Value]) -> ir.Value:
        ty = vals[0].type
        fn_name = fname if isinstance(ty, ir.FloatType) else dname
        fn = _declare(ctx.module, fn_name, ty, [v.type for v in vals])
        return ctx.b.call(fn, vals)

    def emit(ctx, vals):
        vec = vector_math_call(ctx, name, vals)
        if vec is not None:
            return vec
        return ctx.per_lane(lambda lanes: scalar_call(ctx, lanes), vals)

    def rule(ctx, call, args):
        return _in_float32(ctx, call, args, lambda a: emit(ctx, a))
    return rule


def _const_like(ty: ir.Type, value: float) -> ir.Constant:
    if isinstance(ty, ir.VectorType):
        return ir.Constant(ty, [ir.Constant(ty.element, value)] * ty.count)
    return ir.Constant(ty, value)


def _sigmoid(ctx, call, args):
    def emit(a):
        x = a[0]
        neg = ctx.b.fneg(x)
        # float32 vectors: exp inline (a libmvec call would spill a fused kernel's registers)
        e = (inline_exp.emit_exp_of_sigmoid(ctx, neg) if inline_exp.applies(neg.type) else
             vector_math_call(ctx, "exp", [neg]) or llvm_intrinsic(ctx, "llvm.exp", [neg]))
        return ctx.b.fdiv(_const_like(x.type, 1.0), ctx.b.fadd(_const_like(x.type, 1.0), e))
    return _in_float32(ctx, call, args, emit)


def _rsqrt(ctx, call, args):
    def emit(a):
        return ctx.b.fdiv(_const_like(a[0].type, 1.0), llvm_intrinsic(ctx, "llvm.sqrt", a))
    return _in_float32(ctx, call, args, emit)


def _abs(ctx, call, args):
    t = dt.parse(call.dtype)
    if t.is_float:
        return _llvm_unary("llvm.fabs")(ctx, call, args)
    x = args[0]
    zero = ir.Constant(x.type, None)
    return ctx.b.select(ctx.b.icmp_signed("<", x, zero), ctx.b.sub(zero, x), x)


def _isnan(ctx, call, args):
    x = args[0]
    return ctx.b.fcmp_unordered("uno", x, x)


def _isinf(ctx, call, args):
    x = args[0]
    a = llvm_intrinsic(ctx, "llvm.fabs", [x])
    return ctx.b.fcmp_ordered("==", a, _const_like(x.type, math.inf))


def _isfinite(ctx, call, args):
    x = args[0]
    a = llvm_intrinsic(ctx, "llvm.fabs", [x])
    return ctx.b.fcmp_ordered("<", a, _const_like(x.type, math.inf))


def _bitwise(method: str):
    def rule(ctx, call, args):
        return getattr(ctx.b, method)(args[0], args[1])
    return rule


def _bitwise_not(ctx, call, args):
    return ctx.b.not_(args[0])


def _shift_right(ctx, call, args):
    if dt.parse(call.dtype).is_uint:
        return ctx.b.lshr(args[0], args[1])
    return ctx.b.ashr(args[0], args[1])


def _popcount(ctx, call, args):
    return llvm_intrinsic(ctx, "llvm.ctpop", args)


def _reinterpret(ctx, call, args):
    from workbench.codegen.llvm_types import value_type
    return ctx.b.bitcast(args[0], value_type(call.dtype))


# LLVM intrinsic name prefix -> the CPU features it needs (first match wins). Emitting an
# instruction the target lacks would make LLVM abort the process during instruction selection,
# so codegen refuses it with an error naming the feature instead.
X86_INTRINSIC_FEATURES: tuple[tuple[str, tuple[str, ...]], ...] = (
    ("llvm.x86.tdpbf16ps", ("amx-tile", "amx-bf16")),
    ("llvm.x86.tdpb", ("amx-tile", "amx-int8")),        # tdpbssd / tdpbsud / tdpbusd / tdpbuud
    ("llvm.x86.tile", ("amx-tile",)),                   # tileloadd64 / tilestored64 / tilezero...
    ("llvm.x86.ldtilecfg", ("amx-tile",)),
    ("llvm.x86.sttilecfg", ("amx-tile",)),
    ("llvm.x86.avx512.vpdpbusd", ("avx512vnni",)),
    ("llvm.x86.avx512.vpdpwssd", ("avx512vnni",)),
    ("llvm.x86.avx512bf16.", ("avx512bf16",)),
    ("llvm.x86.avx512.pmaddubs.w.512", ("avx512bw",)),
    ("llvm.x86.avx512.pmaddw.d.512", ("avx512bw",)),
    ("llvm.x86.avx512.", ("avx512f",)),
    ("llvm.x86.avx2.", ("avx2",)),
    ("llvm.x86.fma.", ("fma",)),
)


# Intrinsics that use CPU state the OS hands out on request: the compiled module's metadata
# lists the state ("cpu_state"), and the runtime requests it before running the code (AMX tiles
# need Linux's arch_prctl(ARCH_REQ_XCOMP_PERM) once per process, else the first one is SIGILL).
CPU_STATE_PREFIXES: tuple[tuple[str, str], ...] = (
    ("llvm.x86.tdp", "amx"), ("llvm.x86.tile", "amx"), ("llvm.x86.ldtilecfg", "amx"),
    ("llvm.x86.sttilecfg", "amx"),
)


def required_features(name: str) -> tuple[str, ...]:
    """The CPU features the LLVM intrinsic ``name`` needs (empty for target-independent ones)."""
    for prefix, feats in X86_INTRINSIC_FEATURES:
        if name.startswith(prefix):
            return feats
    return ()


def emit_llvm_intrin_call(ctx, call) -> ir.Value:
    """``call_llvm_pure_intrin`` / ``call_llvm_intrin``: ``args[0]`` is the intrinsic's LLVM
    name; it is declared with the operands' types and the call's dtype as result."""
    from workbench.codegen.llvm_types import value_type
    from workbench.codegen.renderer import RenderError
    name = call.args[0].value
    missing = [f for f in required_features(name) if not ctx.target.has_feature(f)]
    if missing:
        raise RenderError(f"in {ctx.name!r}: intrinsic {name!r} needs CPU feature(s) "
                          f"{', '.join(missing)}, which target {str(ctx.target)!r} lacks")
    for prefix, state in CPU_STATE_PREFIXES:
        if name.startswith(prefix):
            states = ctx.renderer.metadata.setdefault("cpu_state", [])
            if state not in states:
                states.append(state)
    args = [ctx.expr(a) for a in call.args[1:]]
    ret = ir.VoidType() if call.dtype == "void" else value_type(call.dtype)
    fn = ctx.module.globals.get(name)
    if fn is None:
        fn = ir.Function(ctx.module, ir.FunctionType(ret, [a.type for a in args]), name)
    elif fn.function_type.return_type != ret or \
            list(fn.function_type.args) != [a.type for a in args]:
        raise RenderError(f"in {ctx.name!r}: intrinsic {name!r} is called with two different "
                          "signatures")
    return ctx.b.call(fn, args)


INTRINSIC_RULES: dict[str, Callable] = {
    **{name: _llvm_unary(intr, name) for name, intr in _LLVM_FLOAT_UNARY.items()},
    **{name: _libm(name) for name in _LIBM},
    "sigmoid": _sigmoid, "rsqrt": _rsqrt, "abs": _abs,
    "isnan": _isnan, "isinf": _isinf, "isfinite": _isfinite,
    "bitwise_and": _bitwise("and_"), "bitwise_or": _bitwise("or_"),
    "bitwise_xor": _bitwise("xor"), "bitwise_not": _bitwise_not,
    "shift_left": _bitwise("shl"), "shift_right": _shift_right, "popcount": _popcount,
    "reinterpret": _reinterpret,
}

__all__ = ["INTRINSIC_RULES", "llvm_intrinsic", "I1", "emit_llvm_intrin_call", "required_features"]

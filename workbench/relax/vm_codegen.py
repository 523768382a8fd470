"""``VMCodeGen``: lowered Relax functions -> VM bytecode through ``ExecBuilder`` (TVM's
``codegen_vm.cc``).

Contract: :func:`vm_codegen(mod)` emits one VM function per Relax function of ``mod`` (which
must have been through the pipeline: no ``call_tir``, no high-level ops, no symbolic
ShapeExprs) and returns ``(exe, lib_mod)``: the Executable (without kernels) and an IRModule
of the PrimFuncs the bytecode calls, to be compiled and imported by ``relax.build``.

How values become arguments (each expression gets an argument word, TVM's way):

- parameters are registers ``0..n-1`` (named in the function table); every binding gets a fresh
  register, except aliases (``lv = alloc``, ``MatchCast``), which reuse the aliased word;
- constants go to the constant pool (tensors as NDArrays; static ShapeExprs as ShapeTuples;
  strings, ``DataTypeImm`` as DataTypes); int PrimValues are immediates; ``R.null_value()``
  is the void register; a GlobalVar or ExternFunc argument is a function-table index;
- a Tuple value is ``vm.builtin.make_tuple``, a tuple item ``vm.builtin.tuple_getitem``.

Calls: a PrimFunc is called by name (a packed function of the kernel library; void results go
to the void register); a Relax function is a VM call; ``R.call_packed``/ExternFunc by name;
``R.call_builtin_with_ctx`` with ``%vm`` prepended; ``memory.alloc_storage`` /
``memory.alloc_tensor`` become ``vm.builtin.alloc_storage(%vm, size, device, dtype, scope)`` /
``vm.builtin.alloc_tensor(storage, offset, shape, dtype)``.

``If``: ``c = vm.builtin.read_if_cond(cond)``; ``If c, T+2``; true branch; copy its result to
the merge register; ``Goto F+1``; false branch; copy. Any other op reaching here was not
legalized and raises a ``ValueError`` naming it.

Source locations: ``exe.call_sources`` maps ``(function name, instruction index in it)`` of
every Call instruction whose Relax call had a ``span`` (a kernel call of an imported model)
to that :class:`~workbench.relax.span.Span` (not saved with the Executable);
``exe.call_origins`` holds the same as plain text (``CallOrigin``: layer, module, op type),
which the VM's profiler and stepper show and the Executable saves.
"""
from __future__ import annotations

from typing import Any, Callable

from workbench.ir.module import GlobalVar, IRModule
from workbench.relax.call_origins import call_origins
from workbench.relax.expr import (
    Binding, Call, Constant, ExternFunc, Function, If, MatchCast, Op, PrimValue, SeqExpr,
    ShapeExpr, StringImm, Tuple, TupleGetItem, Var,
)
from workbench.relax.struct_info import TupleStructInfo
from workbench.relax.transform.lowered_ops import (
    CALL_BUILTIN_WITH_CTX, MEMORY_ALLOC_STORAGE, MEMORY_ALLOC_TENSOR, MEMORY_KILL_STORAGE,
    MEMORY_KILL_TENSOR, NULL_VALUE, DataTypeImm, NullValue,
)
from workbench.runtime.ndarray import tensor as nd_tensor
from workbench.runtime.relax_vm import DataType, ExecBuilder, Executable, ShapeTuple, VMFuncKind
from workbench.tir.expr import FloatImm, IntImm
from workbench.tir.function import PrimFunc

# One pending instruction: ("call", name, args, dst) | ("ret", reg) | ("goto", k) | ("if", r, k)
Instr = tuple


def _is_void(sinfo: Any) -> bool:
    return isinstance(sinfo, TupleStructInfo) and not sinfo.fields


class _FunctionCodeGen:
    """Generates one VM function; instructions are collected first so If offsets are known."""

    def __init__(self, ib: ExecBuilder, mod: IRModule, name: str, func: Function,
                 call_sources: dict):
        self.ib, self.mod, self.name, self.func = ib, mod, name, func
        self.call_sources = call_sources  # (function, instruction index) -> Span
        self.args: dict[int, int] = {}  # id(var) -> argument word
        self.next_reg = len(func.params)
        for i, p in enumerate(func.params):
            self.args[id(p)] = ib.r(i)

    def new_reg(self) -> int:
        reg = self.next_reg
        self.next_reg += 1
        return reg

    # -- driver --------------------------------------------------------------------------------
    def run(self) -> None:
        code: list[Instr] = []
        result = self.seq(self.func.body, code)
        if not self._is_register(result):
            reg = self.new_reg()
            code.append(("call", "vm.builtin.copy", [result], self.ib.r(reg)))
            result = self.ib.r(reg)
        code.append(("ret", result))
        params = [p.name_hint for p in self.func.params]
        with self.ib.function(self.name, num_inputs=len(params), param_names=params):
            for index, instr in enumerate(code):
                _EMIT[instr[0]](self.ib, *instr[1:])
                if instr[0] == "call" and len(instr) > 4 and instr[4] is not None:
                    self.call_sources[(self.name, index)] = instr[4]

    def _is_register(self, word: int) -> bool:
        from workbench.runtime.relax_vm import Arg, ArgKind
        return Arg(int(word)).kind == ArgKind.Register

    def seq(self, s: Any, code: list[Instr]) -> int:
        if not isinstance(s, SeqExpr):
            return self.arg(s, code)
        for block in s.blocks:
            for b in block.bindings:
                self.binding(b, code)
        return self.arg(s.body, code)

    def binding(self, b: Binding, code: list[Instr]) -> None:
        value = b.value
        if isinstance(b, MatchCast) or isinstance(value, (Var, Constant, ShapeExpr, PrimValue,
                                                          StringImm, DataTypeImm, NullValue)):
            self.args[id(b.var)] = self.arg(value, code)  # an alias: no instruction
            return
        rule = _BINDING_RULES.get(type(value))
        if rule is None:
            raise ValueError(f"VMCodeGen: function {self.name!r}: cannot generate code for "
                             f"{b.var.name_hint} = {value}")
        rule(self, b, value, code)

    # -- arguments -----------------------------------------------------------------------------
    def arg(self, e: Any, code: list[Instr]) -> int:
        if isinstance(e, Var):
            word = self.args.get(id(e))
            if word is None:
                raise ValueError(f"VMCodeGen: function {self.name!r} uses {e.name_hint} "
                                 "before defining it")
            return word
        rule = _ARG_RULES.get(type(e))
        if rule is None:
            raise ValueError(f"VMCodeGen: function {self.name!r}: cannot pass {e!r} as a VM "
                             "argument")
        return rule(self, e, code)

    def func_arg(self, name: str, kind: VMFuncKind) -> int:
        self.ib.declare_function(name, kind)
        return self.ib.f(name)

    def dst_for(self, b: Binding) -> int:
        if _is_void(b.var.struct_info):
            self.args[id(b.var)] = self.ib.void_arg()
            return self.ib.void_arg()
        reg = self.ib.r(self.new_reg())
        self.args[id(b.var)] = reg
        return reg

    # -- bindings ------------------------------------------------------------------------------
    def call(self, b: Binding, c: Call, code: list[Instr]) -> None:
        op = c.op
        if isinstance(op, Op):
            rule = _OP_RULES.get(op.name)
            if rule is None:
                raise ValueError(f"VMCodeGen: function {self.name!r} still calls the op "
                                 f"{op.name} ({b.var.name_hint} = ...); it was not legalized "
                                 "(run relax.transform.LegalizeOps, which needs known shapes)")
            rule(self, b, c, code)
            return
        args = [self.arg(a, code) for a in c.args]
        if isinstance(op, GlobalVar):
            name, callee = self._callee(op)
            code.append(("call", name, args, self.dst_for(b), c.span))
        elif isinstance(op, ExternFunc):
            code.append(("call", op.global_symbol, args, self.dst_for(b), c.span))
        else:
            raise ValueError(f"VMCodeGen: function {self.name!r}: calling {op!r} is not "
                             "supported (closures are not compiled yet)")

    def _callee(self, gv: GlobalVar) -> tuple[str, Any]:
        func = self.mod[gv]
        if isinstance(func, Function):
            name = gv.name_hint
            self.ib.declare_function(name, VMFuncKind.VM_FUNC)
            return name, func
        return func.attrs.get("global_symbol", gv.name_hint), func

    def tuple_value(self, b: Binding, t: Tuple, code: list[Instr]) -> None:
        args = [self.arg(f, code) for f in t.fields]
        code.append(("call", "vm.builtin.make_tuple", args, self.dst_for(b)))

    def get_item(self, b: Binding, g: TupleGetItem, code: list[Instr]) -> None:
        code.append(("call", "vm.builtin.tuple_getitem",
                     [self.arg(g.tuple_value, code), self.ib.imm(g.index)], self.dst_for(b)))

    def if_value(self, b: Binding, e: If, code: list[Instr]) -> None:
        cond = self.ib.r(self.new_reg())
        code.append(("call", "vm.builtin.read_if_cond", [self.arg(e.cond, code)], cond))
        merge = self.ib.r(self.new_reg())
        branches = []
        for branch in (e.true_branch, e.false_branch):
            sub: list[Instr] = []
            result = self.seq(branch, sub)
            sub.append(("call", "vm.builtin.copy", [result], merge))
            branches.append(sub)
        true_code, false_code = branches
        code.append(("if", cond, len(true_code) + 2))
        code += true_code
        code.append(("goto", len(false_code) + 1))
        code += false_code
        self.args[id(b.var)] = merge

    # -- ops -----------------------------------------------------------------------------------
    def alloc_storage(self, b: Binding, c: Call, code: list[Instr]) -> None:
        ib = self.ib
        code.append(("call", "vm.builtin.alloc_storage",
                     [ib.vm_state(), self.arg(c.args[0], code),
                      ib.imm(c.attrs.get("virtual_device_index", 0)),
                      ib.convert_constant(DataType(c.attrs.get("dtype", "uint8"))),
                      ib.convert_constant(c.attrs.get("storage_scope", "global"))],
                     self.dst_for(b)))

    def alloc_tensor(self, b: Binding, c: Call, code: list[Instr]) -> None:
        ib = self.ib
        code.append(("call", "vm.builtin.alloc_tensor",
                     [self.arg(c.args[0], code), ib.imm(c.attrs.get("offset", 0)),
                      self.arg(c.args[1], code),
                      ib.convert_constant(DataType(c.attrs["dtype"]))], self.dst_for(b)))

    def with_ctx(self, b: Binding, c: Call, code: list[Instr]) -> None:
        func, args = c.args[0], c.args[1]
        words = [self.ib.vm_state()] + [self.arg(a, code) for a in args.fields]
        code.append(("call", func.global_symbol, words, self.dst_for(b)))

    def pure_packed(self, b: Binding, c: Call, code: list[Instr]) -> None:
        # R.call_pure_packed("f", x, ...): a plain call of the packed function "f".
        words = [self.arg(a, code) for a in c.args[1:]]
        code.append(("call", c.args[0].global_symbol, words, self.dst_for(b), c.span))

    def null_value(self, b: Binding, c: Call, code: list[Instr]) -> None:
        code.append(("call", "vm.builtin.null_value", [], self.dst_for(b)))

    def kill(self, b: Binding, c: Call, code: list[Instr]) -> None:
        target = self.arg(c.args[0], code)
        if self._is_register(target):
            code.append(("call", "vm.builtin.null_value", [], target))
        self.args[id(b.var)] = self.ib.void_arg()


def _constant_arg(g: _FunctionCodeGen, c: Constant, code: list) -> int:
    return g.ib.convert_constant(nd_tensor(c.data.numpy()))


def _shape_arg(g: _FunctionCodeGen, s: ShapeExpr, code: list) -> int:
    if not all(isinstance(d, IntImm) for d in s.values):
        raise ValueError(f"VMCodeGen: function {g.name!r} has a symbolic shape {s}; run "
                         "VMShapeLower first")
    return g.ib.convert_constant(ShapeTuple(d.value for d in s.values))


def _prim_arg(g: _FunctionCodeGen, p: PrimValue, code: list) -> int:
    v = p.value
    if isinstance(v, IntImm):
        return g.ib.convert_constant(int(v.value))  # an immediate when it fits
    if isinstance(v, FloatImm):
        return g.ib.convert_constant(float(v.value))
    raise ValueError(f"VMCodeGen: function {g.name!r} has a symbolic PrimValue {v}; run "
                     "VMShapeLower first")


def _tuple_arg(g: _FunctionCodeGen, t: Tuple, code: list) -> int:
    reg = g.ib.r(g.new_reg())
    code.append(("call", "vm.builtin.make_tuple", [g.arg(f, code) for f in t.fields], reg))
    return reg


def _gvar_arg(g: _FunctionCodeGen, gv: GlobalVar, code: list) -> int:
    name, callee = g._callee(gv)
    kind = VMFuncKind.VM_FUNC if isinstance(callee, Function) else VMFuncKind.PACKED_FUNC
    return g.func_arg(name, kind)


_ARG_RULES: dict[type, Callable[[_FunctionCodeGen, Any, list], int]] = {
    Constant: _constant_arg,
    ShapeExpr: _shape_arg,
    PrimValue: _prim_arg,
    StringImm: lambda g, s, code: g.ib.convert_constant(s.value),
    DataTypeImm: lambda g, d, code: g.ib.convert_constant(DataType(d.value)),
    NullValue: lambda g, n, code: g.ib.void_arg(),
    Tuple: _tuple_arg,
    GlobalVar: _gvar_arg,
    ExternFunc: lambda g, e, code: g.func_arg(e.global_symbol, VMFuncKind.PACKED_FUNC),
}

_BINDING_RULES: dict[type, Callable[..., None]] = {
    Call: _FunctionCodeGen.call,
    Tuple: _FunctionCodeGen.tuple_value,
    TupleGetItem: _FunctionCodeGen.get_item,
    If: _FunctionCodeGen.if_value,
}

_OP_RULES: dict[str, Callable[..., None]] = {
    MEMORY_ALLOC_STORAGE.name: _FunctionCodeGen.alloc_storage,
    MEMORY_ALLOC_TENSOR.name: _FunctionCodeGen.alloc_tensor,
    CALL_BUILTIN_WITH_CTX.name: _FunctionCodeGen.with_ctx,
    NULL_VALUE.name: _FunctionCodeGen.null_value,
    "relax.call_pure_packed": _FunctionCodeGen.pure_packed,
    MEMORY_KILL_STORAGE.name: _FunctionCodeGen.kill,
    MEMORY_KILL_TENSOR.name: _FunctionCodeGen.kill,
}

_EMIT: dict[str, Callable[..., None]] = {
    "call": lambda ib, name, args, dst, span=None: ib.emit_call(name, args, dst),
    "ret": lambda ib, reg: ib.emit_ret(reg),
    "goto": lambda ib, k: ib.emit_goto(k),
    "if": lambda ib, reg, k: ib.emit_if(reg, k),
}


def vm_codegen(mod: IRModule) -> tuple[Executable, IRModule]:
    """Bytecode for every Relax function of ``mod``; returns the Executable and the module of
    PrimFuncs left to compile (see the module docstring)."""
    ib = ExecBuilder()
    funcs = [(name, f) for name, f in mod.items() if isinstance(f, Function)]
    for name, f in funcs:
        if f.attrs.get("Primitive"):
            raise ValueError(f"VMCodeGen: {name!r} is a fused (Primitive) function; run FuseTIR "
                             "before code generation")
        ib.declare_function(name, VMFuncKind.VM_FUNC)
    call_sources: dict = {}
    for name, f in funcs:
        _FunctionCodeGen(ib, mod, name, f, call_sources).run()
    lib = IRModule({name: f for name, f in mod.items() if isinstance(f, PrimFunc)})
    exe = ib.get()
    exe.call_sources = call_sources
    exe.call_origins = call_origins(call_sources)
    return exe, lib


__all__ = ["vm_codegen"]

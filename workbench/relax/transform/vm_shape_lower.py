"""``VMShapeLower``: input checks and symbolic shapes as VM builtin calls (TVM's pass of that name).

Contract: ``VMShapeLower()(mod)`` (after memory lowering) rewrites every Relax function so that
nothing symbolic is left for the code generator:

- At entry, for each parameter, ``vm.builtin.check_tensor_info(x, ndim, dtype, err_ctx)``
  (``check_shape_info`` / ``check_tuple_info`` / ``check_prim_value_info`` for other kinds),
  then ``vm.builtin.match_shape(x, heap, ndim, code0, v0, ..., err_ctx)``. ``err_ctx`` is
  ``"ErrorContext(fn=<f>, loc=param[<i>], param=<name>, annotation=<struct info>) "``, so every
  failure names the function and the parameter. Codes: 0 = equal to the constant, 1 = store
  into heap slot (first sight of a symbolic dim), 3 = equal to the heap slot (later sights),
  2 = skip (a computed dim like ``n * 2``, checked again once computed).
- When the function has symbolic dims, the first binding is ``shape_heap =
  vm.builtin.alloc_shape_heap(%vm, k)``: one int64 slot per symbolic dim and per derived
  expression. Derived expressions (``n * 16 * 4`` bytes, ``(h - 3) // 2 + 1``) are computed by
  a generated host PrimFunc ``shape_func(heap)`` called once all the dims they use are known.
- Every ShapeExpr with a symbolic dim becomes ``vm.builtin.make_shape(heap, n, code, v, ...)``
  (code 0: the constant ``v``; 1: ``heap[v]``); a symbolic PrimValue becomes
  ``vm.builtin.make_prim_value``. ``MatchCast`` bindings become the same checks followed by a
  plain binding. The result is checked against the return annotation (``loc=return``).

- After the parameters are matched, each symbolic dim with an upper bound in the function's
  ``tir_var_upper_bound`` attribute is checked against it
  (``vm.builtin.check_upper_bound``: memory was planned for the bound).

Functions without symbolic dims get the checks only (``heap`` is ``R.null_value()``).
"""
from __future__ import annotations

from typing import Any

from workbench.ir.module import GlobalVar, IRModule
from workbench.ir.transform import Pass, PassContext
from workbench.relax.expr import (
    Binding, BindingBlock, Call, Expr, Function, If, MatchCast, PrimValue, SeqExpr, ShapeExpr,
    StringImm, Tuple, Var, VarBinding,
)
from workbench.relax.struct_info import (
    FuncStructInfo, ObjectStructInfo, PrimStructInfo, ShapeStructInfo, StructInfo,
    TensorStructInfo, TupleStructInfo,
)
from workbench.relax.transform._util import relax_functions, with_body
from workbench.relax.transform.lowered_ops import (
    VOID_SINFO, DataTypeImm, NullValue, call_builtin_with_ctx, call_packed, prim_int,
)
from workbench.tir import op as tir_op
from workbench.tir.arith.expr_key import KeyMaker
from workbench.tir.buffer import Buffer
from workbench.tir.expr import BufferLoad, IntImm, PrimExpr, SizeVar
from workbench.tir.expr import Var as TirVar
from workbench.tir.function import PrimFunc
from workbench.tir.functor import collect_vars, substitute
from workbench.tir.stmt import BufferStore, seq

# match_shape codes / make_shape codes (workbench.runtime.relax_vm.builtins)
ASSERT_EQUAL_TO_IMM, STORE_TO_HEAP, NO_OP, ASSERT_EQUAL_TO_LOAD = 0, 1, 2, 3
USE_IMM, LOAD_SHAPE = 0, 1


def _sinfo_text(si: StructInfo) -> str:
    from workbench.relax.printer import sinfo_text
    return sinfo_text(si)


class _HeapPlan:
    """Heap slots for a function's symbolic dims and derived expressions."""

    def __init__(self) -> None:
        self.slots: dict[Any, int] = {}   # key -> slot
        self.exprs: list[PrimExpr] = []   # by slot
        self.keys = KeyMaker()
        self.defined: set[TirVar] = set()
        self.computed: set[int] = set()   # slots of derived expressions already computed

    def slot(self, e: PrimExpr) -> int:
        k = self.keys.key(e)
        got = self.slots.get(k)
        if got is None:
            got = self.slots[k] = len(self.exprs)
            self.exprs.append(e)
        return got

    def ready(self, e: PrimExpr) -> bool:
        return all(v in self.defined for v in collect_vars(e))


def _dims_of(si: Any) -> list[PrimExpr]:
    if isinstance(si, (TensorStructInfo, ShapeStructInfo)):
        return list(si.values or ())
    if isinstance(si, PrimStructInfo):
        return [si.value] if si.value is not None else []
    if isinstance(si, TupleStructInfo):
        return [d for f in si.fields for d in _dims_of(f)]
    return []


def _symbolic(e: PrimExpr) -> bool:
    return not isinstance(e, IntImm)


class _Lowerer:
    def __init__(self, mod: IRModule, name: str, func: Function, out: IRModule):
        self.mod, self.name, self.func, self.out = mod, name, func, out
        self.heap = _HeapPlan()
        self.heap_var: Var | None = None
        self.pending_checks: list[tuple[Expr, PrimExpr, int, str]] = []
        self.shape_cache: dict[tuple, Var] = {}

    # -- entry -------------------------------------------------------------------------------
    def run(self) -> Function:
        needs_heap = any(_symbolic(d) for d in self._all_dims())
        pre: list[Binding] = []
        if needs_heap:
            self.heap_var = Var("shape_heap", ObjectStructInfo())
        for i, p in enumerate(self.func.params):
            ctx = self._err_ctx(f"param[{i}]", p.name_hint, p.struct_info)
            pre += self._check_info(p, p.struct_info, ctx)
        for i, p in enumerate(self.func.params):
            ctx = self._err_ctx(f"param[{i}]", p.name_hint, p.struct_info)
            pre += self._match(p, p.struct_info, ctx)
        pre += self._bound_checks()
        pre += self._compute_ready()
        body = self._lower_seq(self.func.body)
        ret_checks = self._return_checks(body)
        if needs_heap:  # sized now that every slot is known
            pre.insert(0, VarBinding(self.heap_var, call_builtin_with_ctx(
                "vm.builtin.alloc_shape_heap", [prim_int(max(1, len(self.heap.exprs)))],
                ObjectStructInfo())))
        blocks = [BindingBlock(tuple(pre))] if pre else []
        new_blocks = tuple(blocks) + body.blocks
        if ret_checks:
            new_blocks += (BindingBlock(tuple(ret_checks)),)
        new_body = SeqExpr(new_blocks, body.body, body.struct_info)
        return with_body(self.func, new_body)

    def _bound_checks(self) -> list[Binding]:
        """``vm.builtin.check_upper_bound(heap, slot, bound, name, err_ctx)`` for each symbolic
        dim the parameters define that ``tir_var_upper_bound`` bounds: memory is planned for
        the bound, so a longer input is refused at entry, by name."""
        from workbench.relax.transform.static_plan_block_memory import upper_bounds
        bounds = upper_bounds(self.func)
        if not bounds or self.heap_var is None:
            return []
        ctx = StringImm(f"ErrorContext(fn={self.name}) ")
        out = []
        for v in sorted(self.heap.defined, key=lambda v: v.name):
            if v.name in bounds:
                out.append(_void(call_packed("vm.builtin.check_upper_bound", [
                    self.heap_var, prim_int(self.heap.slot(v)), prim_int(bounds[v.name]),
                    StringImm(v.name), ctx])))
        return out

    def _all_dims(self) -> list[PrimExpr]:
        dims = [d for p in self.func.params for d in _dims_of(p.struct_info)]
        dims += _dims_of(self.func.ret_struct_info)
        _ShapeCollector(dims).seq(self.func.body)
        return dims

    def _err_ctx(self, loc: str, name: str | None, si: StructInfo) -> StringImm:
        param = f", param={name}" if name else ""
        return StringImm(f"ErrorContext(fn={self.name}, loc={loc}{param}, "
                         f"annotation={_sinfo_text(si)}) ")

    # -- checks ------------------------------------------------------------------------------
    def _check_info(self, value: Expr, si: StructInfo, ctx: StringImm) -> list[Binding]:
        rule = _CHECKS.get(type(si))
        return rule(self, value, si, ctx) if rule else []

    def _check_tensor(self, value: Expr, si: TensorStructInfo, ctx: StringImm) -> list[Binding]:
        args: list[Expr] = [value, prim_int(si.ndim)]
        if si.dtype:
            args.append(DataTypeImm(si.dtype))
        return [_void(call_packed("vm.builtin.check_tensor_info", args + [ctx]))]

    def _check_shape(self, value: Expr, si: ShapeStructInfo, ctx: StringImm) -> list[Binding]:
        return [_void(call_packed("vm.builtin.check_shape_info",
                                  [value, prim_int(si.ndim), ctx]))]

    def _check_prim(self, value: Expr, si: PrimStructInfo, ctx: StringImm) -> list[Binding]:
        return [_void(call_packed("vm.builtin.check_prim_value_info",
                                  [value, DataTypeImm(si.dtype), ctx]))]

    def _check_tuple(self, value: Expr, si: TupleStructInfo, ctx: StringImm) -> list[Binding]:
        return [_void(call_packed("vm.builtin.check_tuple_info",
                                  [value, prim_int(len(si.fields)), ctx]))]

    def _check_func(self, value: Expr, si: FuncStructInfo, ctx: StringImm) -> list[Binding]:
        return [_void(call_packed("vm.builtin.check_func_info", [value, ctx]))]

    def _match(self, value: Expr, si: StructInfo, ctx: StringImm) -> list[Binding]:
        """match_shape for a tensor/shape value; defines new symbolic dims."""
        if not isinstance(si, (TensorStructInfo, ShapeStructInfo)) or si.values is None:
            return []
        codes: list[Expr] = []
        for i, d in enumerate(si.values):
            code, v = self._match_code(d)
            if code == NO_OP:
                self.pending_checks.append((value, d, i, ctx.value))
            codes += [prim_int(code), prim_int(v)]
        heap = self.heap_var if self.heap_var is not None else NullValue()
        return [_void(call_packed("vm.builtin.match_shape",
                                  [value, heap, prim_int(len(si.values)), *codes, ctx]))]

    def _match_code(self, d: PrimExpr) -> tuple[int, int]:
        if isinstance(d, IntImm):
            return ASSERT_EQUAL_TO_IMM, d.value
        if isinstance(d, TirVar):
            slot = self.heap.slot(d)
            if d in self.heap.defined:
                return ASSERT_EQUAL_TO_LOAD, slot
            self.heap.defined.add(d)
            return STORE_TO_HEAP, slot
        return NO_OP, 0

    def _compute_ready(self) -> list[Binding]:
        """Call a shape function for derived expressions that became computable, then check
        the dims that were skipped because they were not known yet."""
        todo = []
        for e in list(self.heap.exprs) + [d for _, d, _, _ in self.pending_checks]:
            if isinstance(e, TirVar) or not _symbolic(e):
                continue
            slot = self.heap.slot(e)
            if slot not in self.heap.computed and self.heap.ready(e):
                self.heap.computed.add(slot)
                todo.append(slot)
        out: list[Binding] = []
        if todo:
            fname = self._shape_func(todo)
            # No sinfo_args on a call of a module function (as TVM; the text has no place
            # for them).
            out.append(_void(Call(GlobalVar(fname), (self.heap_var,), {}, (), VOID_SINFO)))
        still = []
        for value, d, i, ctx in self.pending_checks:
            if self.heap.slot(d) in self.heap.computed:
                out.append(self._check_one_dim(value, d, i, ctx))
            else:
                still.append((value, d, i, ctx))
        self.pending_checks = still
        return out

    def _check_one_dim(self, value: Expr, d: PrimExpr, i: int, ctx: str) -> Binding:
        ndim = len(value.struct_info.values)
        codes: list[Expr] = []
        for k in range(ndim):
            if k == i:
                codes += [prim_int(ASSERT_EQUAL_TO_LOAD), prim_int(self.heap.slot(d))]
            else:
                codes += [prim_int(NO_OP), prim_int(0)]
        return _void(call_packed("vm.builtin.match_shape",
                                 [value, self.heap_var, prim_int(ndim), *codes, StringImm(ctx)]))

    def _shape_func(self, slots: list[int]) -> str:
        """A host PrimFunc computing ``heap[slot] = expr`` for each slot (in order)."""
        from workbench.relax.transform._util import fresh_name
        # The heap's length is a symbolic dim: slots may still be added after this function.
        heap = Buffer(TirVar("H", "handle"), "int64", (SizeVar("heap_size", "int64"),), "H")
        stores = []
        for slot in slots:
            e = self.heap.exprs[slot]
            loads = {v: BufferLoad(heap, (IntImm("int64", self.heap.slot(v)),), "int64")
                     for v in collect_vars(e)}
            value = substitute(e, loads)
            if value.dtype != "int64":
                value = tir_op.cast("int64", value)
            stores.append(BufferStore(heap, value, (IntImm("int64", slot),)))
        handle = TirVar("H_handle", "handle")
        name = fresh_name(self.out, "shape_func")
        self.out[name] = PrimFunc((handle,), seq(*stores), _frozen({handle: heap}),
                                  _frozen({"global_symbol": name, "tir.noalias": True,
                                           "tir.is_host_func": True}))
        return name

    # -- the body ----------------------------------------------------------------------------
    def _lower_seq(self, s: SeqExpr) -> SeqExpr:
        blocks = []
        for block in s.blocks:
            new: list[Binding] = []
            for b in block.bindings:
                new += self._lower_binding(b)
            blocks.append(type(block)(tuple(new)))
        pre: list[Binding] = []
        body = self._lower_value(s.body, pre)
        if pre:
            blocks.append(BindingBlock(tuple(pre)))
        return SeqExpr(tuple(blocks), body, s.struct_info)

    def _lower_binding(self, b: Binding) -> list[Binding]:
        pre: list[Binding] = []
        if isinstance(b, MatchCast):
            value = self._lower_value(b.value, pre)
            ctx = self._err_ctx("match_cast", b.var.name_hint, b.struct_info)
            pre += self._check_info(value, b.struct_info, ctx)
            pre += self._match(value, b.struct_info, ctx)
            pre += self._compute_ready()
            return pre + [VarBinding(b.var, value)]
        value = b.value
        if isinstance(value, If):
            cond = self._lower_value(value.cond, pre)
            branches = []
            for br in (value.true_branch, value.false_branch):
                saved = dict(self.shape_cache)  # shapes made in a branch stay in it
                branches.append(self._lower_seq(_as_seq(br)))
                self.shape_cache = saved
            value = If(cond, *branches, value.struct_info)
        else:
            value = self._lower_value(value, pre)
        return pre + [b if value is b.value else b.replace(value=value)]

    def _lower_value(self, e: Any, pre: list[Binding]) -> Any:
        if isinstance(e, ShapeExpr) and any(_symbolic(d) for d in e.values):
            return self._make_shape(e, pre)
        if isinstance(e, PrimValue) and e.value.dtype.startswith(("int", "uint")) and \
                _symbolic(e.value):
            return self._make_prim(e, pre)
        if isinstance(e, Call):
            args = tuple(self._lower_value(a, pre) for a in e.args)
            return e if all(a is b for a, b in zip(args, e.args)) else e.replace(args=args)
        if isinstance(e, Tuple):
            fields = tuple(self._lower_value(f, pre) for f in e.fields)
            return e if all(a is b for a, b in zip(fields, e.fields)) else \
                Tuple(fields, e.struct_info)
        return e

    def _dim_code(self, d: PrimExpr) -> list[Expr]:
        if isinstance(d, IntImm):
            return [prim_int(USE_IMM), prim_int(d.value)]
        slot = self.heap.slot(d)
        if not isinstance(d, TirVar) and slot not in self.heap.computed:
            raise ValueError(f"VMShapeLower: function {self.name!r} uses the dimension {d} "
                             "before the symbolic dims it depends on are defined")
        return [prim_int(LOAD_SHAPE), prim_int(slot)]

    def _make_shape(self, e: ShapeExpr, pre: list[Binding]) -> Var:
        # One make_shape per distinct shape in a scope: allocations of equal shapes share it.
        key = tuple(self.heap.keys.key(d) for d in e.values)
        got = self.shape_cache.get(key)
        if got is not None:
            return got
        self._ensure_computed(e.values, pre)
        codes = [c for d in e.values for c in self._dim_code(d)]
        var = Var("shape", ShapeStructInfo(e.values))
        pre.append(VarBinding(var, call_packed(
            "vm.builtin.make_shape", [self.heap_var, prim_int(len(e.values)), *codes],
            ShapeStructInfo(e.values))))
        self.shape_cache[key] = var
        return var

    def _make_prim(self, e: PrimValue, pre: list[Binding]) -> Var:
        self._ensure_computed([e.value], pre)
        var = Var("prim", e.struct_info)
        pre.append(VarBinding(var, call_packed(
            "vm.builtin.make_prim_value", [self.heap_var, *self._dim_code(e.value)],
            e.struct_info)))
        return var

    def _ensure_computed(self, dims: Any, pre: list[Binding]) -> None:
        for d in dims:
            if _symbolic(d) and not isinstance(d, TirVar):
                self.heap.slot(d)
        pre += self._compute_ready()

    def _return_checks(self, body: SeqExpr) -> list[Binding]:
        ret = body.body
        si = self.func.ret_struct_info
        if not isinstance(ret, Var) or not isinstance(si, TensorStructInfo):
            return []
        ctx = self._err_ctx("return", None, si)
        out = self._check_info(ret, si, ctx)
        if si.values is not None and (self.heap_var is not None or
                                      not any(_symbolic(d) for d in si.values)):
            codes: list[Expr] = []
            for d in si.values:
                if isinstance(d, IntImm):
                    codes += [prim_int(ASSERT_EQUAL_TO_IMM), prim_int(d.value)]
                elif self.heap.slot(d) in self.heap.computed or d in self.heap.defined:
                    codes += [prim_int(ASSERT_EQUAL_TO_LOAD), prim_int(self.heap.slot(d))]
                else:
                    codes += [prim_int(NO_OP), prim_int(0)]
            heap = self.heap_var if self.heap_var is not None else NullValue()
            out.append(_void(call_packed("vm.builtin.match_shape",
                                         [ret, heap, prim_int(len(si.values)), *codes, ctx])))
        return out


_CHECKS = {
    TensorStructInfo: _Lowerer._check_tensor, ShapeStructInfo: _Lowerer._check_shape,
    PrimStructInfo: _Lowerer._check_prim, TupleStructInfo: _Lowerer._check_tuple,
    FuncStructInfo: _Lowerer._check_func,
}


class _ShapeCollector:
    """Collects the dims of symbolic ShapeExprs and PrimValues in a body."""

    def __init__(self, out: list[PrimExpr]):
        self.out = out

    def seq(self, s: Any) -> None:
        if not isinstance(s, SeqExpr):
            self.expr(s)
            return
        for block in s.blocks:
            for b in block.bindings:
                self.expr(b.value)
                if isinstance(b, MatchCast):
                    self.out += _dims_of(b.struct_info)
        self.expr(s.body)

    def expr(self, e: Any) -> None:
        if isinstance(e, ShapeExpr):
            self.out += list(e.values)
        elif isinstance(e, PrimValue) and e.value.dtype.startswith(("int", "uint")):
            self.out.append(e.value)
        elif isinstance(e, (Call, Tuple)):
            for a in (e.args if isinstance(e, Call) else e.fields):
                self.expr(a)
        elif isinstance(e, If):
            self.seq(e.true_branch)
            self.seq(e.false_branch)


def _as_seq(e: Any) -> SeqExpr:
    return e if isinstance(e, SeqExpr) else SeqExpr((), e, e.struct_info)


def _void(call: Call) -> Binding:
    return VarBinding(Var("_", VOID_SINFO), call)


def _frozen(d: dict) -> Any:
    from workbench.ir.node import FrozenDict
    return FrozenDict(d)


class VMShapeLower(Pass):
    """The pass object: ``mod = VMShapeLower()(mod)`` (see the module docstring)."""

    name = "VMShapeLower"

    def transform_module(self, mod: IRModule, ctx: PassContext | None = None) -> IRModule:
        out = mod.copy()
        for name, func in relax_functions(mod):
            out[name] = _Lowerer(mod, func.attrs.get("global_symbol", name), func, out).run()
        return out


__all__ = ["VMShapeLower"]

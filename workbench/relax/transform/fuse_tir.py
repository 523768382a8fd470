"""``FuseTIR``: turn each fused Relax function into one PrimFunc (TVM's ``FuseTIR``).

Contract: ``FuseTIR()(mod)`` returns a new module in which every call of a ``Primitive``
function (made by ``FuseOps``) is replaced by ``call_tir`` of one new PrimFunc of the same name
(``fused_matmul_add_relu``; the ``call_tir`` keeps the call's ``span``), and the Primitive functions -- and PrimFuncs no longer called --
are removed. The new PrimFunc is in block form, so schedules and the tuner treat it like any
other kernel:

- its parameters are one buffer per tensor parameter of the fused function (tuple parameters
  are flattened), then one buffer per output, then an int64 scalar for every symbolic
  dimension that no buffer dimension names by itself (passed as ``tir_vars``);
- its root block allocates a buffer for every intermediate tensor (``alloc_buffers``) and its
  body is the bodies of the group's kernels in order, each reading and writing the buffers of
  the values it consumes and produces; a kernel's own intermediates are hoisted into the root
  block too;
- every loop, block variable and buffer is a fresh copy (a kernel used twice in one group gets
  two independent loop nests); block and buffer names are made unique (``T_add``, ``T_add_1``);
- groups whose PrimFuncs are structurally equal (a network's repeated blocks) share the first
  one: every such call is ``call_tir`` of that kernel (its ``span`` still tells the calls
  apart), so it is lowered, compiled and tuned once;
- attrs: ``global_symbol`` (its name), ``tir.noalias``, and ``op_pattern``: the group's
  strongest pattern; ``layout_free_buffers`` (the tuner's ``RewriteLayout`` re-lays out those
  parameters) lists, in the fused function's parameter indices, every parameter that is read
  by exactly one kernel argument of the group and is layout-free there (topi's conv2d / dense
  weights). A parameter the group also reads elsewhere is not layout-free: the other reader
  needs the original layout. Nor is a parameter that some call of the group passes a value
  computed in the caller (another kernel's output, such as a weight scaled at run time by
  ``FoldChannelScaleToConv2D``): a re-laid-out copy of it would be made on every call, a cost
  the tuner does not measure. Weights that are constants or the caller's own parameters stay
  layout-free, as in TVM. Without such a parameter the attr is absent.
"""
from __future__ import annotations

from typing import Any

from workbench.ir.module import GlobalVar, IRModule
from workbench.ir.transform import Pass, PassContext
from workbench.ir.node import FrozenDict
from workbench.relax.analysis import bind_symbolic
from workbench.relax.expr import (
    Binding, Call, DataflowVar, Function, ShapeExpr, Tuple, TupleGetItem, Var,
    VarBinding,
)
from workbench.relax.op.base import call_tir, call_tir_parts, is_call_tir
from workbench.relax.te_bridge import _plain_param_dims
from workbench.relax.struct_info import TensorStructInfo, TupleStructInfo
from workbench.relax.transform._util import (
    is_primitive, map_bindings, referenced_functions, relax_functions, with_body,
)
from workbench.tir.buffer import Buffer
from workbench.tir.expr import PrimExpr
from workbench.tir.expr import Var as TirVar
from workbench.tir.function import PrimFunc
from workbench.tir.functor import IRMutator, collect_vars, renew_defs, substitute
from workbench.tir.stmt import Block, BlockRealize, For, IterVar, LetStmt, Stmt, seq
from workbench.tir import op as tir_op


# ---- copying one kernel into the fused function ------------------------------------------------

class _DefCollector(IRMutator):
    """Collects the variables a statement defines (loops, block vars, lets)."""

    def __init__(self) -> None:
        super().__init__()
        self.defs: list[TirVar] = []

    def visit_For(self, s: For) -> Stmt:
        self.defs.append(s.loop_var)
        return self.generic_visit(s)

    def visit_IterVar(self, iv: IterVar) -> IterVar:
        self.defs.append(iv.var)
        return self.generic_visit(iv)

    def visit_LetStmt(self, s: LetStmt) -> Stmt:
        self.defs.append(s.var)
        return self.generic_visit(s)


class _Inline(IRMutator):
    """Rewrites a kernel body into the fused function: buffers by ``bmap``, vars by ``vmap``,
    block names made unique, local buffers renamed."""

    def __init__(self, vmap: dict[TirVar, Any], bmap: dict[Buffer, Buffer], names: "_Names",
                 block_names: "_Names", local: set[int]):
        super().__init__()
        self.vmap, self.bmap, self.names, self.local = vmap, bmap, names, local
        self.block_names = block_names

    def visit_Var(self, v: TirVar) -> Any:
        return self.vmap.get(v, v)

    def rewrite_buffer(self, buf: Buffer) -> Buffer:
        got = self.bmap.get(buf)
        if got is not None:
            return got
        new = self.generic_visit(buf)
        if id(buf) in self.local:
            new = new.replace(name=self.names.fresh(buf.name))
        return new

    def visit_Block(self, b: Block) -> Stmt:
        new = self.generic_visit(b)
        return new.replace(name_hint=self.block_names.fresh(b.name_hint))


class _Names:
    def __init__(self) -> None:
        self.taken: set[str] = set()

    def fresh(self, base: str) -> str:
        name, k = base, 1
        while name in self.taken:
            name, k = f"{base}_{k}", k + 1
        self.taken.add(name)
        return name


def _root_parts(func: PrimFunc) -> tuple[tuple[Buffer, ...], Stmt]:
    """``(alloc_buffers, body)`` of a block-form PrimFunc's root block."""
    body = func.body
    if isinstance(body, BlockRealize) and not body.block.iter_vars:
        return body.block.alloc_buffers, body.block.body
    return (), body


def _bind_shape_vars(formal: Buffer, actual: Buffer, vmap: dict[TirVar, Any]) -> None:
    for f, a in zip(formal.shape, actual.shape):
        if isinstance(f, TirVar) and f not in vmap:
            vmap[f] = a


def _make_buffer(name: str, sinfo: TensorStructInfo, names: _Names) -> Buffer:
    name = names.fresh(name)
    return Buffer(TirVar(name, "handle"), sinfo.dtype, tuple(sinfo.values), name)


# ---- one fused function -> one PrimFunc ----------------------------------------------------------

class _Fuser:
    def __init__(self, mod: IRModule, name: str, func: Function,
                 computed: frozenset[int] = frozenset()):
        self.mod, self.name, self.func = mod, name, func
        self.computed = computed   # parameter indices some caller passes a computed value
        self.names = _Names()
        self.block_names = _Names()
        self.value_buffers: dict[int, list[Buffer]] = {}
        self.params: list[Buffer] = []
        self.allocs: list[Buffer] = []
        self.stmts: list[Stmt] = []
        self.pattern = 0
        self.dims = _function_dims(func)
        self.extra_vars: list[TirVar] = []
        # Per parameter buffer (by id): how many kernel arguments of the group it is passed
        # as, and how many of those the kernel marks layout-free.
        self.param_reads: dict[int, int] = {}
        self.layout_free_reads: dict[int, int] = {}

    def build(self) -> PrimFunc:
        for p in self.func.params:
            bufs = [_make_buffer(p.name_hint if len(_fields(p)) == 1 else f"{p.name_hint}_{i}",
                                 si, self.names) for i, si in enumerate(_fields(p))]
            self.value_buffers[id(p)] = bufs
            self.params += bufs
        outputs = self._output_vars()
        for block in self.func.body.blocks:
            for b in block.bindings:
                self._binding(b, outputs)
        result = [buf for v in outputs for buf in self.value_buffers[id(v)]]
        return self._finish(result)

    def _output_vars(self) -> list[Var]:
        body = self.func.body.body
        bound = {id(b.var): b.value for blk in self.func.body.blocks for b in blk.bindings}
        if isinstance(body, Var) and isinstance(bound.get(id(body)), Tuple):
            return list(bound[id(body)].fields)
        if isinstance(body, Tuple):
            return list(body.fields)
        return [body]

    def _binding(self, b: Binding, outputs: list[Var]) -> None:
        value = b.value
        if is_call_tir(value):
            self._inline_call(b, value, any(o is b.var for o in outputs))
        elif isinstance(value, TupleGetItem):
            self.value_buffers[id(b.var)] = [self.value_buffers[id(value.tuple_value)]
                                             [value.index]]
        elif isinstance(value, Tuple):
            self.value_buffers[id(b.var)] = [x for f in value.fields
                                             for x in self.value_buffers[id(f)]]
        elif isinstance(value, Var):
            self.value_buffers[id(b.var)] = self.value_buffers[id(value)]
        else:
            raise ValueError(f"FuseTIR: function {self.name!r} has a binding FuseTIR cannot "
                             f"merge: {b.var.name_hint} = {value}")

    def _inline_call(self, b: Binding, call: Call, is_output: bool) -> None:
        gvar, inputs, tir_vars, outs = call_tir_parts(call)
        callee: PrimFunc = self.mod[gvar]
        self.pattern = max(self.pattern, int(callee.attrs.get("op_pattern", 8)))
        in_bufs = [buf for a in inputs for buf in self.value_buffers[id(a)]]
        formal = callee.buffers
        n_in, n_out = len(in_bufs), len(outs)
        if len(formal) != n_in + n_out:
            raise ValueError(f"FuseTIR: {gvar.name_hint} takes {len(formal)} buffers but is "
                             f"called with {n_in} inputs and {n_out} outputs")
        self._count_param_uses(callee, formal[:n_in], in_bufs)
        out_bufs = []
        for f, si in zip(formal[n_in:], outs):
            buf = _make_buffer(f.name, si, self.names)
            out_bufs.append(buf)
            if not is_output:
                self.allocs.append(buf)
        self.value_buffers[id(b.var)] = out_bufs
        vmap: dict[TirVar, Any] = {}
        for f, a in zip(formal, in_bufs + out_bufs):
            _bind_shape_vars(f, a, vmap)
        scalars = [p for p in callee.params if p not in callee.buffer_map]
        for p, v in zip(scalars, tir_vars):
            vmap[p] = v
        allocs, body = _root_parts(callee)
        collector = _DefCollector()
        collector.visit(body)
        for v in collector.defs:
            vmap.setdefault(v, type(v)(v.name, v.dtype))
        bmap = dict(zip(formal, in_bufs + out_bufs))
        inline = _Inline(vmap, bmap, self.names, self.block_names, {id(a) for a in allocs})
        self.allocs += [inline.visit_Buffer(a) for a in allocs]
        self.stmts.append(inline.visit(body))

    def _count_param_uses(self, callee: PrimFunc, formal: list[Buffer],
                          actual: list[Buffer]) -> None:
        free = {id(callee.buffer_map[callee.params[int(i)]])
                for i in callee.attrs.get("layout_free_buffers", ()) or ()
                if int(i) < len(callee.params) and callee.params[int(i)] in callee.buffer_map}
        params = {id(b) for b in self.params}
        for f, a in zip(formal, actual):
            if id(a) in params:
                self.param_reads[id(a)] = self.param_reads.get(id(a), 0) + 1
                if id(f) in free:
                    self.layout_free_reads[id(a)] = self.layout_free_reads.get(id(a), 0) + 1

    def _layout_free_params(self) -> tuple[int, ...]:
        """Indices of the parameters whose only use is one layout-free kernel argument and
        whose value is never computed by the caller."""
        computed = {id(buf) for j in self.computed
                    for buf in self.value_buffers[id(self.func.params[j])]}
        return tuple(k for k, b in enumerate(self.params)
                     if self.param_reads.get(id(b)) == 1 and self.layout_free_reads.get(id(b))
                     and id(b) not in computed)

    def _finish(self, results: list[Buffer]) -> PrimFunc:
        # An output reached through a TupleGetItem or an alias (``gv = lv[1]`` of a multi-output
        # call) was allocated with its call; it is a parameter, not an allocation (left as both,
        # the kernel wrote a local buffer of the same name and the caller's output stayed unset).
        out_ids = {id(b) for b in results}
        self.allocs = [a for a in self.allocs if id(a) not in out_ids]
        buffers = self.params + results
        bare = {d for buf in buffers for d in buf.shape if isinstance(d, TirVar)}
        used: list[TirVar] = []
        for node in [*buffers, *self.allocs, *self.stmts]:
            for v in sorted(collect_vars(node), key=lambda v: v.name):
                if v.dtype != "handle" and v not in used and v in self.dims:
                    used.append(v)
        extra = [v for v in used if v not in bare]
        # The kernel gets its own copies of the caller's symbolic dims.
        fresh = {v: type(v)(v.name, v.dtype) for v in used}
        root = Block((), (), (), "root", seq(*self.stmts), None, tuple(self.allocs))
        body = BlockRealize((), tir_op.const(True, "bool"), root)
        handles = [TirVar(f"{b.name}_handle", "handle") for b in buffers]
        attrs: dict[str, Any] = {"global_symbol": self.name, "tir.noalias": True}
        layout_free = self._layout_free_params()
        if layout_free:
            # Parameter k of the fused function is buffer k (parameters come first).
            attrs["layout_free_buffers"] = layout_free
        attrs["op_pattern"] = self.pattern
        func = PrimFunc(tuple(handles) + tuple(extra), body,
                        FrozenDict(dict(zip(handles, buffers))), FrozenDict(attrs))
        self.extra_vars = extra
        func = substitute(func, fresh) if fresh else func
        # Compound dims of parameter buffers (a fused reshape's ``n * 12``) become plain vars, as
        # call_te's kernels have them: the kernel ABI binds shapes from plain dims only.
        # New definitions throughout (TVM's FuseTIR ends with RenewDefs): a kernel merged into
        # two groups would otherwise give both fused functions the same buffer objects.
        return renew_defs(_plain_param_dims(func))


def _function_dims(func: Function) -> set[TirVar]:
    """The symbolic dims of the fused function (from its parameters and bindings)."""
    dims: set[TirVar] = set()
    sinfos = [p.struct_info for p in func.params] + \
        [b.var.struct_info for blk in func.body.blocks for b in blk.bindings]
    for si in sinfos:
        for t in _tensor_sinfos(si):
            for d in t.values or ():
                dims |= collect_vars(d)
    return dims


def _tensor_sinfos(si: Any) -> list[TensorStructInfo]:
    if isinstance(si, TensorStructInfo):
        return [si]
    if isinstance(si, TupleStructInfo):
        return [t for f in si.fields for t in _tensor_sinfos(f)]
    return []


def _fields(p: Var) -> list[TensorStructInfo]:
    si = p.struct_info
    fields = _tensor_sinfos(si)
    if not fields or any(f.values is None or not f.dtype for f in fields):
        raise ValueError(f"FuseTIR: parameter {p.name_hint} must be a tensor (or tuple of "
                         f"tensors) with known shape and dtype, got {si}")
    return fields


# ---- rewriting callers ---------------------------------------------------------------------------

def _rewrite_caller(func: Function, fused: dict[str, tuple[GlobalVar, list[TirVar]]],
                    mod: IRModule) -> Function:
    def rewrite(b: Binding) -> list[Binding]:
        value = b.value
        if not (isinstance(value, Call) and isinstance(value.op, GlobalVar)
                and value.op.name_hint in fused):
            return [b]
        gv, extra = fused[value.op.name_hint]
        pre: list[Binding] = []
        args = _flatten_args(value.args, pre, isinstance(b.var, DataflowVar))
        out_sinfo = _tensor_sinfos(b.var.struct_info)
        tir_vars = ShapeExpr(tuple(_caller_dims(extra, value, mod))) if extra else None
        call = call_tir(gv, Tuple(tuple(args)), out_sinfo if len(out_sinfo) > 1
                        else out_sinfo[0], tir_vars)
        return pre + [VarBinding(b.var, call.replace(struct_info=b.var.struct_info,
                                                     span=value.span))]
    return with_body(func, map_bindings(func.body, rewrite))


def _caller_dims(dims: list[TirVar], call: Call, mod: IRModule) -> list[PrimExpr]:
    """The fused function's symbolic dims in terms of the caller's."""
    func: Function = mod[call.op]
    vmap: dict = {}
    for p, a in zip(func.params, call.args):
        bind_symbolic(p.struct_info, a.struct_info, vmap)
    return [substitute(v, vmap) if vmap else v for v in dims]


def _flatten_args(args: tuple, pre: list[Binding], dataflow: bool) -> list[Any]:
    """Tuple arguments become their fields (bound with TupleGetItem first)."""
    out = []
    for a in args:
        si = a.struct_info
        if isinstance(si, TupleStructInfo):
            for i, f in enumerate(si.fields):
                item = (DataflowVar if dataflow else Var)(
                    f"{getattr(a, 'name_hint', 't')}_{i}", f)
                pre.append(VarBinding(item, TupleGetItem(a, i, f)))
                out.append(item)
        else:
            out.append(a)
    return out


class FuseTIR(Pass):
    """The pass object: ``mod = FuseTIR()(mod)`` (see the module docstring)."""

    name = "FuseTIR"

    def transform_module(self, mod: IRModule, ctx: PassContext | None = None) -> IRModule:
        if not isinstance(mod, IRModule):
            raise TypeError(f"FuseTIR expects an IRModule, got {type(mod).__name__}")
        from workbench.ir.structural import structural_equal, structural_hash
        out = mod.copy()
        fused: dict[str, tuple[GlobalVar, list[TirVar]]] = {}
        built: dict[int, list[tuple[PrimFunc, GlobalVar]]] = {}
        computed = _computed_arguments(mod)
        for name, func in relax_functions(mod):
            if not is_primitive(func):
                continue
            fuser = _Fuser(mod, name, func, frozenset(computed.get(name, ())))
            prim = fuser.build()
            del out[name]
            # A group structurally equal to one already built (a model's repeated blocks)
            # calls that kernel: it is lowered, compiled and tuned once.
            probe = prim.replace(attrs=prim.attrs.without("global_symbol"))
            key = structural_hash(probe)
            same = next((gv for other, gv in built.get(key, ())
                         if structural_equal(probe, other)), None)
            if same is not None:
                fused[name] = (same, fuser.extra_vars)
                continue
            out[name] = prim
            gv = out.get_global_var(name)
            built.setdefault(key, []).append((probe, gv))
            fused[name] = (gv, fuser.extra_vars)
        if not fused:
            return out
        for name, func in relax_functions(out):
            out[name] = _rewrite_caller(func, fused, mod)
        _remove_unreferenced_prim_funcs(out, mod)
        return out


def _computed_arguments(mod: IRModule) -> dict[str, set[int]]:
    """Per Primitive function, the indices of the parameters that some call passes a Var
    bound to a call in its caller (a value computed at run time, not a constant or a
    parameter of the caller)."""
    out: dict[str, set[int]] = {}
    for _, func in relax_functions(mod):
        if is_primitive(func):
            continue
        calls = {id(b.var) for blk in func.body.blocks for b in blk.bindings
                 if isinstance(b, VarBinding) and isinstance(b.value, Call)}
        for blk in func.body.blocks:
            for b in blk.bindings:
                value = b.value
                if not (isinstance(value, Call) and isinstance(value.op, GlobalVar)):
                    continue
                for j, a in enumerate(value.args):
                    if isinstance(a, Var) and id(a) in calls:
                        out.setdefault(value.op.name_hint, set()).add(j)
    return out


def _remove_unreferenced_prim_funcs(out: IRModule, before: IRModule) -> None:
    """PrimFuncs only the fused functions called are gone now (TVM's FuseTIR drops them)."""
    referenced: set[str] = set()
    for _, func in relax_functions(out):
        referenced |= referenced_functions(func.body)
    for name, func in list(out.items()):
        if isinstance(func, PrimFunc) and name not in referenced and name in before and \
                isinstance(before[name], PrimFunc) and _called_only_by_primitives(name, before):
            del out[name]


def _called_only_by_primitives(name: str, mod: IRModule) -> bool:
    callers = [fname for fname, f in relax_functions(mod)
               if name in referenced_functions(f.body)]
    return bool(callers) and all(is_primitive(mod[c]) for c in callers)


__all__ = ["FuseTIR"]

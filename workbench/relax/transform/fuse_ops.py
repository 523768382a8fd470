"""``FuseOps``: group ``call_tir`` bindings into fused sub-functions (TVM's ``FuseOps``).

Contract: ``FuseOps()(mod)`` returns a new module. In every dataflow block of every Relax
function, the ``call_tir`` bindings (and TupleGetItems) are partitioned into groups by TVM's
post-dominator algorithm over the ``op_pattern`` attrs that ``AnnotateTIROpPattern`` put on
the PrimFuncs (a PrimFunc without one is opaque and never fuses). Each group of two or more
bindings becomes a private Relax function with the attr ``Primitive=1``, named
``fused_<kernel>_<kernel>...``, whose parameters are the values the group reads from outside
and whose result is what is used outside (a tuple when several values are); the group's
bindings are replaced by one call of it, whose ``span`` merges the members' spans (source
locations, ``workbench.relax.span``). ``FuseTIR`` then turns each such function into one
PrimFunc. Nothing else changes; ``FuseOps(fuse_opt_level=0)`` is the identity.

The rules (TVM's ``GraphPartitioner``; patterns ordered ElemWise < Broadcast < Injective <
CommReduce < OutEWiseFusable < Opaque): a node may fuse into its immediate post-dominator when

- phase 0, it is OutEWiseFusable (matmul, conv, softmax) and the path to the post-dominator
  is elementwise: every op on the way is at most Broadcast (an elementwise epilogue);
- phase 0, it is at most Broadcast and the post-dominator is at most Injective or a reduction,
  with every op on the way at most Injective (the sink may be a fused OutEWiseFusable group);
  a row normalisation (layer_norm, softmax: ``is_row_normalization``) counts as a reduction
  here, so a residual add before a layer norm is inlined into it (ORT's SkipLayerNorm);
- phase 1, it is Injective (or a tuple) and every op on the way is at most Injective.

The pattern on a path is the edges' (TVM's): an elementwise or broadcast kernel's edge from an
argument with fewer elements than its output is Broadcast, from any other one ElemWise
(``_edge_pattern``), so a convolution's epilogue reads the convolution's result at the output's
own indices.

Values used outside the block (non-dataflow vars) end a chain: nothing fuses *through* them.
"""
from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

from workbench.ir.module import GlobalVar, IRModule
from workbench.ir.transform import Pass, PassContext
from workbench.relax.expr import (
    Binding, Call, Constant, DataflowBlock, DataflowVar, Function, SeqExpr, Tuple,
    TupleGetItem, Var, VarBinding,
)
from workbench.relax.op.base import is_call_tir
from workbench.relax.span import Span
from workbench.relax.struct_info import TensorStructInfo, TupleStructInfo, static_shape
from workbench.relax.transform._util import (
    fresh_name, is_primitive, relax_functions, renew_symbolic_vars, used_vars,
)
from workbench.relax.transform.annotate_tir_op_pattern import OpPatternKind as K
from workbench.relax.transform.annotate_tir_op_pattern import is_row_normalization

MAX_FUSE_DEPTH = 256


# ---- the indexed forward graph of one dataflow block ---------------------------------------------

@dataclass
class _Node:
    index: int
    binding: Binding
    pattern: K
    extern_ref: bool
    outputs: list[tuple[int, K]] = field(default_factory=list)  # (consumer, edge pattern)
    row_norm: bool = False      # a call of a row normalisation kernel (layer_norm, softmax)


def _leaves(e: Any) -> list[Any]:
    if isinstance(e, Tuple):
        return [x for f in e.fields for x in _leaves(f)]
    return [e]


def _node_pattern(b: Binding, mod: IRModule) -> tuple[K, list[Any]]:
    """The binding's pattern and the argument expressions its edges come from."""
    value = b.value
    if isinstance(b, VarBinding) and is_call_tir(value):
        func = mod[value.args[0]]
        kind = K(func.attrs.get("op_pattern", int(K.kOpaque)))
        return kind, _leaves(value.args[1])
    if isinstance(b, VarBinding) and isinstance(value, TupleGetItem):
        return K.kInjective, [value.tuple_value]
    return K.kOpaque, used_vars(value)


def _build_graph(block: DataflowBlock, mod: IRModule, used_later: set[int]) -> list[_Node]:
    nodes: list[_Node] = []
    index_of: dict[int, int] = {}
    for i, b in enumerate(block.bindings):
        pattern, args = _node_pattern(b, mod)
        if isinstance(b.value, TupleGetItem):
            # Only items of a kernel's multi-output result fuse; an item of any other tuple
            # would make the whole tuple a parameter of the fused kernel.
            src = index_of.get(id(b.value.tuple_value))
            if src is None or not is_call_tir(block.bindings[src].value):
                pattern = K.kOpaque
        extern = not isinstance(b.var, DataflowVar) or id(b.var) in used_later
        node = _Node(i, b, pattern, extern)
        if pattern == K.kOutEWiseFusable and is_call_tir(b.value):
            node.row_norm = is_row_normalization(mod[b.value.args[0]])
        nodes.append(node)
        for a in args:
            src = index_of.get(id(a)) if isinstance(a, Var) else None
            if src is not None:
                nodes[src].outputs.append((i, _edge_pattern(pattern, a, b.var)))
        index_of[id(b.var)] = i
    return nodes


def _edge_pattern(pattern: K, arg: Var, out: Var) -> K:
    """The pattern of the edge from ``arg``'s producer to a kernel of ``pattern`` computing
    ``out`` (TVM's per-argument edge pattern): an elementwise or broadcast kernel reads an
    argument with fewer elements than its output broadcast, and any other one elementwise
    (its own shape, or a larger one a slice reads at the output's indices). Why it matters:
    the kernel's own pattern is ElemWise when *some* load is elementwise, so without this a
    squeeze-excite's ``x * sigmoid(conv(s))`` joined the 1x1 convolution over the pooled
    ``s``: the convolution's group then ran the multiply over the whole feature map inside a
    tile of one pixel, on one thread, with the sigmoid computed again for every pixel
    (EfficientNet-B0's excite kernels took 43-76 us each on Zen 4, 230-365 us in AVX2 code)."""
    a, o = _num_elements(arg), _num_elements(out)
    if pattern > K.kBroadcast or a is None or o is None:    # symbolic: the kernel's pattern
        return pattern
    return K.kBroadcast if a < o else K.kElemWise


def _num_elements(v: Var) -> int | None:
    sinfo = v.struct_info
    shape = static_shape(sinfo) if isinstance(sinfo, TensorStructInfo) else None
    return None if shape is None else math.prod(shape)


# ---- post-dominator tree -------------------------------------------------------------------------

@dataclass
class _DomNode:
    parent: int | None
    depth: int
    pattern: K


def _combine(a: K, b: K) -> K:
    return max(a, b)


def _post_dominators(nodes: list[_Node]) -> list[_DomNode]:
    tree: list[_DomNode | None] = [None] * len(nodes)

    def lca(a: int | None, b: int | None, pat: list[K]) -> int | None:
        while a != b:
            if a is None or b is None:
                return None
            da, db = tree[a], tree[b]
            if da.depth < db.depth:
                pat[0] = _combine(pat[0], db.pattern)
                b = db.parent
            elif db.depth < da.depth:
                pat[0] = _combine(pat[0], da.pattern)
                a = da.parent
            else:
                pat[0] = _combine(_combine(pat[0], da.pattern), db.pattern)
                a, b = da.parent, db.parent
        return a

    for node in reversed(nodes):
        if node.extern_ref or not node.outputs:
            tree[node.index] = _DomNode(None, 1, K.kOpaque if node.extern_ref else K.kElemWise)
            continue
        pat = [K.kElemWise]
        parent: int | None = node.outputs[0][0]
        pat[0] = _combine(pat[0], node.outputs[0][1])
        for consumer, edge in node.outputs[1:]:
            parent = lca(parent, consumer, pat)
            pat[0] = _combine(pat[0], edge)
        depth = tree[parent].depth + 1 if parent is not None else 1
        tree[node.index] = _DomNode(parent, depth, pat[0])
    return tree  # type: ignore[return-value]


# ---- the partitioner (union-find over groups) ---------------------------------------------------

class _Group:
    __slots__ = ("parent", "pattern", "num_nodes", "anchor")

    def __init__(self, pattern: K, anchor: bool):
        self.parent: _Group | None = None
        self.pattern = pattern
        self.num_nodes = 1
        self.anchor = anchor

    def root(self) -> "_Group":
        g = self
        while g.parent is not None:
            g = g.parent
        node = self
        while node.parent is not None and node.parent is not g:  # path compression
            node.parent, node = g, node.parent
        return g


class _Partitioner:
    def __init__(self, nodes: list[_Node], tree: list[_DomNode]):
        self.nodes, self.tree = nodes, tree
        self.groups = [_Group(n.pattern, n.pattern == K.kOutEWiseFusable) for n in nodes]

    def check_path(self, src: int, sink: int, cond) -> bool:
        visited: set[int] = set()

        def walk(i: int) -> bool:
            if i in visited:
                return True
            visited.add(i)
            if not cond(self.groups[i].root().pattern, i == sink):
                return False
            if i == sink:
                return True
            return all(walk(c) for c, _ in self.nodes[i].outputs)
        return all(walk(c) for c, _ in self.nodes[src].outputs)

    def merge(self, child: _Group, parent: _Group) -> None:
        child, parent = child.root(), parent.root()
        if child is parent:
            return
        parent.num_nodes += child.num_nodes
        child.parent = parent
        if child.anchor:
            parent.anchor = True
            parent.pattern = _combine(child.pattern, parent.pattern)

    def commit(self, src: int, sink: int) -> None:
        target = self.groups[sink]
        visited: set[int] = set()

        def walk(i: int) -> None:
            if i == sink or i in visited:
                return
            visited.add(i)
            self.merge(self.groups[i], target)
            for c, _ in self.nodes[i].outputs:
                walk(c)
        walk(src)

    def count_nodes(self, src: int, sink: int) -> int:
        visited: set[int] = set()

        def walk(i: int) -> int:
            if i == sink or i in visited:
                return 0
            visited.add(i)
            return self.groups[i].num_nodes + sum(walk(c) for c, _ in self.nodes[i].outputs)
        return self.groups[sink].root().num_nodes + walk(src)

    def run(self) -> list[_Group]:
        for phase in range(3):
            for i in range(len(self.nodes)):
                self._visit(i, phase)
        return self.groups

    def _visit(self, i: int, phase: int) -> None:
        group, dom = self.groups[i], self.tree[i]
        if group.pattern == K.kOpaque or dom.parent is None:
            return
        sink = dom.parent
        if self.count_nodes(i, sink) > MAX_FUSE_DEPTH:
            return
        if phase == 2:
            return  # tuples are never fusion roots here (call_tir results are not tuples)
        if group.root() is self.groups[sink].root():
            return
        if self.groups[sink].pattern == K.kTuple:
            return
        if group.pattern == K.kOutEWiseFusable:
            if phase == 0 and dom.pattern == K.kElemWise and \
                    self.check_path(i, sink, lambda k, is_sink: k <= K.kBroadcast):
                self.commit(i, sink)
        elif group.pattern <= K.kBroadcast:
            into_norm = dom.pattern == K.kOutEWiseFusable and self.nodes[sink].row_norm
            if phase == 0 and (dom.pattern <= K.kInjective or dom.pattern == K.kCommReduce or
                               into_norm):
                def cond(k: K, is_sink: bool) -> bool:
                    if not is_sink:
                        return k <= K.kInjective
                    return k <= K.kInjective or k in (K.kCommReduce, K.kOutEWiseFusable)
                if self.check_path(i, sink, cond):
                    self.commit(i, sink)
        elif group.pattern in (K.kInjective, K.kTuple):
            if phase == 1 and self.check_path(i, sink, lambda k, is_sink: k <= K.kInjective):
                self.commit(i, sink)


# ---- rewriting a block ---------------------------------------------------------------------------

def _group_members(groups: list[_Group]) -> dict[int, list[int]]:
    members: dict[int, list[int]] = {}
    for i, g in enumerate(groups):
        members.setdefault(id(g.root()), []).append(i)
    return members


def _callee_name(b: Binding) -> str | None:
    if is_call_tir(b.value):
        return b.value.args[0].name_hint
    return None


class _FunctionMaker:
    """Builds the Primitive function of one group and the binding that calls it."""

    def __init__(self, bindings: list[Binding], used_outside: set[int]):
        self.bindings = bindings
        self.used_outside = used_outside

    def make(self) -> tuple[Function, list[Any], list[Var]]:
        defined = {id(b.var) for b in self.bindings}
        args: list[Any] = []
        params: dict[int, Var] = {}
        for b in self.bindings:
            for v in _arg_leaves(b.value):
                key = id(v)
                if isinstance(v, (Var, Constant)) and key not in defined and key not in params:
                    name = v.name_hint if isinstance(v, Var) else f"param_{len(params)}"
                    params[key] = Var(name, v.struct_info)
                    args.append(v)
        remap: dict[int, Var] = dict(params)
        new_bindings: list[Binding] = []
        outputs = [b.var for b in self.bindings if id(b.var) in self.used_outside]
        for b in self.bindings:
            value = _substitute(b.value, remap)
            # Results leave the function's dataflow block, so they are plain Vars.
            cls = Var if id(b.var) in self.used_outside else DataflowVar
            var = cls(b.var.name_hint, b.var.struct_info)
            remap[id(b.var)] = var
            new_bindings.append(VarBinding(var, value))
        if len(outputs) == 1:
            ret = remap[id(outputs[0])]
        else:
            tup = Tuple(tuple(remap[id(o)] for o in outputs))
            ret = Var("gv", tup.struct_info)
            new_bindings.append(VarBinding(ret, tup))
        body = SeqExpr((DataflowBlock(tuple(new_bindings)),), ret, ret.struct_info)
        func = Function(tuple(params.values()), body, ret.struct_info, True,
                        {"Primitive": 1})
        return func, args, outputs


def _arg_leaves(value: Any) -> list[Any]:
    if is_call_tir(value):
        return _leaves(value.args[1])
    if isinstance(value, TupleGetItem):
        return [value.tuple_value]
    return used_vars(value)


def _substitute(value: Any, remap: dict[int, Var]) -> Any:
    def sub(e: Any) -> Any:
        if isinstance(e, (Var, Constant)):
            return remap.get(id(e), e)
        if isinstance(e, Tuple):
            fields = tuple(sub(f) for f in e.fields)
            return e if all(a is b for a, b in zip(fields, e.fields)) else \
                Tuple(fields, e.struct_info)
        return e
    if isinstance(value, Call):
        return value.replace(args=tuple(sub(a) for a in value.args))
    if isinstance(value, TupleGetItem):
        return value.replace(tuple_value=sub(value.tuple_value))
    return sub(value)


def _fuse_block(block: DataflowBlock, mod: IRModule, used_later: set[int],
                new_funcs: IRModule) -> DataflowBlock:
    nodes = _build_graph(block, mod, used_later)
    groups = _Partitioner(nodes, _post_dominators(nodes)).run()
    members = _group_members(groups)
    bindings = block.bindings
    items: list[tuple[int, list[Binding]]] = []  # (sort key, bindings replacing the group)
    done: set[int] = set()
    for i in range(len(bindings)):
        gid = id(groups[i].root())
        if gid in done:
            continue
        done.add(gid)
        idx = members[gid]
        group_bindings = [bindings[j] for j in idx]
        if len(idx) < 2 or not any(is_call_tir(x.value) for x in group_bindings):
            items += [(j, [bindings[j]]) for j in idx]
            continue
        inside = {id(x.var) for x in group_bindings}
        used_outside = _used_outside(bindings, inside, used_later)
        func, args, outputs = _FunctionMaker(group_bindings, used_outside).make()
        names = [n for n in (_callee_name(x) for x in group_bindings) if n]
        name = fresh_name(new_funcs, "fused_" + "_".join(names))
        # The callee gets symbolic vars of its own; the call's result keeps the caller's.
        new_funcs[name] = renew_symbolic_vars(func)
        gv = new_funcs.get_global_var(name)
        # The fused call implements every member's model operations (source locations).
        span = Span.merge(x.value.span for x in group_bindings if isinstance(x.value, Call))
        items.append((idx[-1], _call_bindings(gv, func, args, outputs, span)))
    items.sort(key=lambda kv: kv[0])
    return DataflowBlock(tuple(_check_order([b for _, bs in items for b in bs])))


def _used_outside(bindings: tuple[Binding, ...], inside: set[int], used_later: set[int]
                  ) -> set[int]:
    out = {k for k in inside if k in used_later}
    for b in bindings:
        if id(b.var) in inside:
            continue
        out |= {id(v) for v in used_vars(b.value) if id(v) in inside}
    for b in bindings:
        if id(b.var) in inside and not isinstance(b.var, DataflowVar):
            out.add(id(b.var))
    return out


def _call_bindings(gv: GlobalVar, func: Function, args: list[Any], outputs: list[Var],
                   span: Any = None) -> list[Binding]:
    call = Call(gv, tuple(args), {}, (), func.ret_struct_info, span=span)
    if len(outputs) == 1:
        return [VarBinding(outputs[0], call)]
    tup_var = DataflowVar(f"{outputs[0].name_hint}_tuple", func.ret_struct_info)
    out = [VarBinding(tup_var, call)]
    assert isinstance(func.ret_struct_info, TupleStructInfo)
    for k, o in enumerate(outputs):
        out.append(VarBinding(o, TupleGetItem(tup_var, k, o.struct_info)))
    return out


def _check_order(bindings: list[Binding]) -> list[Binding]:
    """Each fused call sits where its group's last binding was: every input is defined before
    (it fed some member) and, groups being closed under paths to their sink, every user of the
    result comes after. Checked here because a violation would be a silent miscompile."""
    defined = {id(b.var) for b in bindings}
    seen: set[int] = set()
    for b in bindings:
        for v in used_vars(b.value):
            if id(v) in defined and id(v) not in seen:
                raise RuntimeError(f"FuseOps: {v.name_hint} is used before its definition "
                                   "after fusion (internal error)")
        seen.add(id(b.var))
    return bindings


def _uses_after(func: Function, block_index: int) -> set[int]:
    seq = func.body
    out = {id(v) for v in used_vars(seq.body)}
    for blk in seq.blocks[block_index + 1:]:
        for b in blk.bindings:
            out |= {id(v) for v in used_vars(b.value)}
    return out


def _fuse_function(func: Function, mod: IRModule, new_funcs: IRModule) -> Function:
    seq = func.body
    if not isinstance(seq, SeqExpr):
        return func
    blocks = []
    for k, block in enumerate(seq.blocks):
        if isinstance(block, DataflowBlock):
            block = _fuse_block(block, mod, _uses_after(func, k), new_funcs)
        blocks.append(block)
    if all(a is b for a, b in zip(blocks, seq.blocks)):
        return func
    return func.replace(body=SeqExpr(tuple(blocks), seq.body, seq.struct_info))


class FuseOps(Pass):
    """The pass object: ``mod = FuseOps()(mod)`` (see the module docstring)."""

    name = "FuseOps"

    def __init__(self, fuse_opt_level: int = -1):
        self.fuse_opt_level = fuse_opt_level

    def transform_module(self, mod: IRModule, ctx: PassContext | None = None) -> IRModule:
        if not isinstance(mod, IRModule):
            raise TypeError(f"FuseOps expects an IRModule, got {type(mod).__name__}")
        out = mod.copy()
        if self.fuse_opt_level == 0:
            return out
        for name, func in relax_functions(mod):
            if is_primitive(func):
                continue
            out[name] = _fuse_function(func, mod, out)
        return out


__all__ = ["FuseOps"]

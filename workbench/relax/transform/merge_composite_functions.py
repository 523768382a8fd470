"""``MergeCompositeFunctions``: group calls of composite functions into one function per
backend region (TVM's pass).

Contract: ``MergeCompositeFunctions()(mod)`` takes a module partitioned by
``FuseOpsByPattern`` (without ``annotate_codegen``) and returns a new one where, in ``main``:

- a call of a composite function joins the region of an argument produced by a composite
  call of the same codegen (``Composite`` name prefix) unless another region it reads from
  depends on that region (merging would make a cycle); regions it can join are merged;
- each region becomes a public function ``fused_<composite names>_<codegen>`` with attrs
  ``Codegen`` and ``global_symbol``, whose body (no dataflow block) binds each composite
  function it calls as a local function and calls it: what ``RunCodegen`` hands to a backend.
  ``main`` calls it; the composite functions leave the module.

As in TVM only ``main`` is partitioned (it must exist).
"""
from __future__ import annotations

from typing import Any

from workbench.ir.module import GlobalVar, IRModule
from workbench.ir.node import rewrite_nodes
from workbench.ir.transform import Pass, PassContext
from workbench.relax.expr import (
    BindingBlock, Call, DataflowBlock, DataflowVar, Function, SeqExpr, Tuple, Var, VarBinding,
)
from workbench.relax.transform._util import referenced_functions, renew_symbolic_vars
from workbench.relax.transform.fuse_ops_by_pattern import _fuse_block, _Group


def _codegen_of(mod: IRModule, op: Any) -> str | None:
    if isinstance(op, GlobalVar) and op in mod and isinstance(mod[op], Function):
        composite = mod[op].attrs.get("Composite")
        if composite is not None:
            return str(composite).split(".")[0]
    return None


class _Regions:
    """Union-find over the bindings of one block, with each root's transitive dependencies."""

    def __init__(self, mod: IRModule):
        self.mod = mod
        self.groups: dict[Var, _Group] = {}
        self.deps: dict[_Group, set[_Group]] = {}

    def of(self, e: Any) -> _Group | None:
        g = self.groups.get(e) if isinstance(e, Var) else None
        return g.root() if g is not None else None

    def merge(self, src: _Group, dst: _Group) -> None:
        src, dst = src.root(), dst.root()
        if src is dst:
            return
        src.parent = dst
        dst.num_nodes += src.num_nodes
        self.deps.setdefault(dst, set()).update(self.deps.pop(src, set()))
        for ds in self.deps.values():
            if src in ds:
                ds.discard(src)
                ds.add(dst)
        self.deps[dst].discard(dst)

    def arg_groups(self, args: Any) -> list[_Group]:
        out = []
        for a in args:
            if isinstance(a, Tuple):
                out += self.arg_groups(a.fields)
            elif self.of(a) is not None:
                out.append(self.of(a))
        return out

    def add(self, b: VarBinding) -> None:
        value = b.value
        args = value.args if isinstance(value, Call) else \
            (value.fields if isinstance(value, Tuple) else
             [getattr(value, "tuple_value", value)])
        codegen = _codegen_of(self.mod, value.op) if isinstance(value, Call) else None
        mergeable: list[_Group] = []
        if codegen is not None:
            parent_deps = set().union(*(self.deps.get(g, set())
                                        for g in self.arg_groups(args)))
            mergeable = [g for g in self.arg_groups(args)
                         if g.attrs.get("Codegen") == codegen and g not in parent_deps]
        if mergeable:
            group = mergeable[0]
            group.num_nodes += 1
            for g in mergeable[1:]:
                self.merge(g, group)
            group = group.root()
        else:
            group = _Group()
            if codegen is not None:
                group.attrs["Codegen"] = codegen
        self.groups[b.var] = group
        deps = self.deps.setdefault(group, set())
        for g in self.arg_groups(args):
            if g is not group:
                deps.add(g)
                deps.update(self.deps.get(g, set()))


def _inline_composites(func: Function, mod: IRModule) -> Function:
    """The region's function without dataflow blocks, each composite global function it calls
    bound as a local function (a fresh copy) and called through that binding."""
    local: dict[str, Var] = {}
    bindings: list[VarBinding] = []
    for block in func.body.blocks:
        for b in block.bindings:
            value = b.value
            if isinstance(value, Call) and _codegen_of(mod, value.op) is not None:
                name = value.op.name_hint
                if name not in local:
                    copy = _fresh_copy(mod[value.op].without_attr("Primitive"))
                    local[name] = Var(name, copy.struct_info)
                    bindings.append(VarBinding(local[name], copy))
                value = value.replace(op=local[name])
            bindings.append(b.replace(value=value))
    plain = func.replace(body=SeqExpr((BindingBlock(tuple(bindings)),), func.body.body,
                                      func.body.struct_info))
    return rewrite_nodes(plain, lambda n: Var(n.name_hint, n.struct_info)
                         if type(n) is DataflowVar else None)


def _fresh_copy(func: Function) -> Function:
    copy = rewrite_nodes(func, lambda n: type(n)(n.name_hint, n.struct_info)
                         if isinstance(n, Var) else None)
    return renew_symbolic_vars(copy)


class MergeCompositeFunctions(Pass):
    """The pass object: ``mod = MergeCompositeFunctions()(mod)`` (see the module docstring)."""

    name = "MergeCompositeFunctions"

    def transform_module(self, mod: IRModule, ctx: PassContext | None = None) -> IRModule:
        if "main" not in mod or not isinstance(mod["main"], Function):
            raise ValueError("MergeCompositeFunctions partitions the Relax function 'main'; "
                             f"the module has {sorted(mod)}")
        out = mod.copy()
        main = mod["main"]
        if not isinstance(main.body, SeqExpr):
            return out
        blocks = []
        for block in main.body.blocks:
            if isinstance(block, DataflowBlock):
                regions = _Regions(mod)
                for b in block.bindings:
                    regions.add(b)
                block = _fuse_block(block, regions.groups, True, out)
            blocks.append(block)
        out["main"] = main.replace(body=SeqExpr(tuple(blocks), main.body.body,
                                                main.body.struct_info))
        return self._annotate(out, mod)

    @staticmethod
    def _annotate(out: IRModule, original: IRModule) -> IRModule:
        renamed: dict[str, GlobalVar] = {}
        for name, func in list(out.items()):
            if not (isinstance(func, Function) and "Codegen" in func.attrs):
                continue
            symbol = f"{name}_{func.attrs['Codegen']}"
            new = _inline_composites(func, original).without_attr("Primitive")
            del out[name]
            out[symbol] = new.with_attr("global_symbol", symbol)
            renamed[name] = out.get_global_var(symbol)
        main = out["main"]

        def rewrite(b: Any) -> Any:
            v = b.value
            if isinstance(v, Call) and isinstance(v.op, GlobalVar) and v.op.name_hint in renamed:
                return b.replace(value=v.replace(op=renamed[v.op.name_hint]))
            return b
        out["main"] = main.replace(body=main.body.replace(blocks=tuple(
            type(blk)(tuple(rewrite(b) for b in blk.bindings)) for blk in main.body.blocks)))
        used: set[str] = set()
        for _, func in out.items():
            used |= referenced_functions(func)
        for name, func in list(out.items()):
            if isinstance(func, Function) and "Composite" in func.attrs and name not in used:
                del out[name]
        return out


__all__ = ["MergeCompositeFunctions"]

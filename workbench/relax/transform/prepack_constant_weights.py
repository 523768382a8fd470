"""``PrepackConstantWeights``: pack constant weights of layout-rewritten kernels at compile time
(TVM's ``relax.transform.SplitLayoutRewritePreproc`` followed by constant folding of the split
packing functions, in one step).

A tuned kernel whose schedule went through the ``RewriteLayout`` postproc keeps a *preproc*
block (annotation ``meta_schedule.layout_rewrite_preproc``) that copies a layout-free weight
into a tiled layout on every call; the tuner measured the kernel without it (its builder runs
``tir.transform.RemoveWeightLayoutRewriteBlock``). When the weight is a constant -- a bound
parameter (``relax.build(..., params=...)``, ``compile_relax(..., params=...)``) -- packing it
once at compile time gives the graph the kernel that was measured.

Contract: ``PrepackConstantWeights()(mod)`` returns a new module (the input is not modified)
where every ``call_tir`` of a PrimFunc ``f`` such that

- ``RemoveWeightLayoutRewriteBlock`` strips at least one preproc block of ``f`` (it decides
  eligibility: a plain whole-buffer copy out of a parameter nothing else reads), and
- the argument of *every* parameter it strips is a Relax ``Constant`` (directly, or a Var
  bound to one) of the original shape and dtype,

calls the stripped PrimFunc instead, with each such constant replaced by a new Constant
holding the weight packed with numpy (``LayoutRewrite.pack``: packed shape, same dtype, its
struct info from the data). The stripped PrimFunc records the packing in its
``layout_rewrites`` attr. Other calls are left alone and keep packing at run time: weights that
are run-time inputs, and calls where only some stripped weights are constants (the stripping
is all or nothing per PrimFunc).

Names: when every reference to ``f`` is rewritten, the stripped function replaces ``f`` under
the same name; otherwise it is a new global ``f_prepacked`` (``f_prepacked1``, ...) and ``f``
stays for the remaining calls. A PrimFunc called with different constants gets each one
packed; a constant passed to the same kernel parameter twice is packed once (one new Constant
object). Other uses of an original constant are untouched (a binding ``c = const`` that
nothing reads any more is left to DeadCodeElimination).

The default pipeline runs this pass right after ``FuseTIR`` / ``MetaScheduleApplyDatabase``
and before ``DeadCodeElimination`` and ``CallTIRRewrite`` (it needs ``call_tir`` form). After
a call, ``prepacked`` lists ``(kernel name, parameter index, original shape, packed shape)``
for every packed constant, in the order of the calls.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from workbench.ir.module import GlobalVar, IRModule
from workbench.ir.transform import Pass, PassContext
from workbench.relax.expr import Call, Constant, Tuple, Var, VarBinding
from workbench.relax.expr_functor import ExprMutator, ExprVisitor
from workbench.relax.op.base import call_tir_parts, is_call_tir
from workbench.relax.struct_info import TensorStructInfo
from workbench.relax.transform._util import fresh_name, relax_functions
from workbench.tir.function import PrimFunc
from workbench.tir.functor import renew_defs
from workbench.tir.transform.remove_weight_layout_rewrite_block import (
    LAYOUT_REWRITES_ATTR, LayoutRewrite, layout_rewrites, remove_weight_layout_rewrite_block,
)

__all__ = ["PrepackConstantWeights"]


@dataclass
class _Stripped:
    """A PrimFunc that takes packed weights once stripped, and what it packs."""

    func: PrimFunc
    rewrites: list[LayoutRewrite]
    references: int = 0          # GlobalVar occurrences in Relax functions
    sites: list[int] = field(default_factory=list)  # id() of the call_tir calls to rewrite
    new_name: str = ""


def _stripped_funcs(mod: IRModule) -> dict[str, _Stripped]:
    out: dict[str, _Stripped] = {}
    for name, func in mod.items():
        if not isinstance(func, PrimFunc):
            continue
        stripped = remove_weight_layout_rewrite_block(func)
        if stripped is func:
            continue
        # Only the entries this stripping added: a function stripped earlier already takes
        # packed weights, and its callers already pass them.
        before = len(func.attrs.get(LAYOUT_REWRITES_ATTR, ()) or ())
        out[name] = _Stripped(stripped, layout_rewrites(stripped)[before:])
    return out


def _matches(const: Constant, rw: LayoutRewrite) -> bool:
    si = const.struct_info
    return isinstance(si, TensorStructInfo) and si.dtype == rw.dtype and \
        tuple(const.data.shape) == tuple(rw.shape)


class _Sites(ExprVisitor):
    """Finds the call_tir sites whose stripped weights are all constants; counts every
    reference to the stripped functions (a reference outside such a site keeps the original)."""

    def __init__(self, stripped: dict[str, _Stripped]) -> None:
        self.stripped = stripped
        self.constants: dict[int, Constant] = {}  # id(Var) -> the Constant bound to it

    def visit_binding(self, b: Any) -> None:
        if isinstance(b, VarBinding) and isinstance(b.value, Constant):
            self.constants[id(b.var)] = b.value
        super().visit_binding(b)

    def visit_GlobalVar_(self, gv: GlobalVar) -> None:
        entry = self.stripped.get(gv.name_hint)
        if entry is not None:
            entry.references += 1

    def visit_Call_(self, c: Call) -> None:
        if is_call_tir(c):
            entry = self.stripped.get(c.args[0].name_hint)
            if entry is not None and self._all_constant(c, entry):
                entry.sites.append(id(c))
        super().visit_Call_(c)

    def constant(self, arg: Any) -> Constant | None:
        if isinstance(arg, Constant):
            return arg
        return self.constants.get(id(arg)) if isinstance(arg, Var) else None

    def _all_constant(self, c: Call, entry: _Stripped) -> bool:
        _, inputs, _, outs = call_tir_parts(c)
        # Parameter i is input i only when every input is one tensor (one buffer each).
        if len(entry.func.buffers) != len(inputs) + len(outs) or \
                any(not isinstance(a.struct_info, TensorStructInfo) for a in inputs):
            return False
        for rw in entry.rewrites:
            const = self.constant(inputs[rw.param_index]) \
                if rw.param_index < len(inputs) else None  # an output buffer is never packed
            if const is None or not _matches(const, rw):
                return False
        return True


class _Rewriter(ExprMutator):
    def __init__(self, mod: IRModule, sites: _Sites, by_site: dict[int, _Stripped],
                 log: list[tuple[str, int, tuple[int, ...], tuple[int, ...]]]) -> None:
        super().__init__(mod)
        self.sites = sites
        self.by_site = by_site
        self.log = log
        # (id(original Constant), kernel, parameter index) -> packed Constant
        self.packed: dict[tuple[int, str, int], Constant] = {}

    def visit_Call_(self, c: Call) -> Any:
        entry = self.by_site.get(id(c))
        if entry is None:
            return super().visit_Call_(c)
        _, inputs, _, _ = call_tir_parts(c)
        fields = [self.visit_expr(a) for a in inputs]
        for rw in entry.rewrites:
            fields[rw.param_index] = self._pack(self.sites.constant(inputs[rw.param_index]),
                                                entry.new_name, rw)
        gv = self.builder_.get().get_global_var(entry.new_name)
        rest = tuple(self.visit_expr(a) for a in c.args[2:])
        return self.builder_.normalize(Call(c.op, (gv, Tuple(tuple(fields)), *rest), c.attrs,
                                            c.sinfo_args, span=c.span))

    def _pack(self, const: Constant, kernel: str, rw: LayoutRewrite) -> Constant:
        key = (id(const), kernel, rw.param_index)
        got = self.packed.get(key)
        if got is None:
            got = Constant(rw.pack(const.data.numpy()))
            self.packed[key] = got
            self.log.append((kernel, rw.param_index, tuple(rw.shape), tuple(got.data.shape)))
        return got


class PrepackConstantWeights(Pass):
    """The pass object: ``mod = PrepackConstantWeights()(mod)`` (see the module docstring)."""

    name = "PrepackConstantWeights"

    def __init__(self) -> None:
        self.prepacked: list[tuple[str, int, tuple[int, ...], tuple[int, ...]]] = []

    def transform_module(self, mod: IRModule, ctx: PassContext | None = None) -> IRModule:
        if not isinstance(mod, IRModule):
            raise TypeError(f"{self.name} expects an IRModule, got {type(mod).__name__}")
        self.prepacked = []
        out = mod.copy()
        stripped = _stripped_funcs(mod)
        if not stripped:
            return out
        sites = _Sites(stripped)
        # Every Relax function, Primitive ones included: a reference anywhere keeps the original.
        callers = list(relax_functions(mod))
        for _, func in callers:
            sites.visit_expr(func)
        by_site: dict[int, _Stripped] = {}
        for name, entry in stripped.items():
            if not entry.sites:
                continue
            if entry.references == len(entry.sites):
                entry.new_name = name
                out[name] = entry.func
            else:
                entry.new_name = fresh_name(out, f"{name}_prepacked")
                # Next to the original, the copy needs definitions of its own (the stripped
                # kernel still holds the original's parameter vars and buffers).
                out[entry.new_name] = renew_defs(entry.func).with_attr("global_symbol",
                                                                       entry.new_name)
            by_site.update(dict.fromkeys(entry.sites, entry))
        if not by_site:
            return out
        rewriter = _Rewriter(out, sites, by_site, self.prepacked)
        for name, func in callers:
            new = rewriter.visit_expr(func)
            if new is not func:
                out[name] = new
        return out

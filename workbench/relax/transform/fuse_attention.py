"""``FuseAttention``: the explicit attention chain -- ``matmul(softmax(mask(scale * matmul(Q,
K^T))), V)`` -- rewritten into one ``relax.nn.attention`` call, which legalizes to the fused
streaming kernel (:mod:`workbench.topi.nn.attention`) instead of materializing the
(B, N, S, T) scores four times.

Contract: ``FuseAttention()(mod)`` computes the same values. In every Relax function, a binding
``y = R.matmul(P, V)`` is rewritten when, looking back through the bindings that produce its
operands (static shapes, or symbolic ones whose dims are products of variables -- a dynamic
sequence length -- compared as such):

- ``P`` is ``R.nn.softmax(z, axis=-1)``, or PyTorch's safe softmax around it
  (``where(no key visible, 0, softmax(z))``, what ``torch.export`` makes of
  ``scaled_dot_product_attention``), up to reshapes that only regroup the leading dims;
- ``z`` is the product ``matmul(Q', KT')`` through scalar ``multiply`` / ``divide`` by
  constants (the scale), then ``add`` of bias tensors and ``where(mask, scores, -inf)`` masks
  (a fill of -inf or below -1e30), no reshape or scale above a bias;
- ``Q'``, ``KT'`` and ``V`` reach tensors of shape (.., S, H), (.., H, T), (.., T, H_v) through
  leading-dim reshapes and scalar scales (on ``Q'`` and ``KT'`` only), whose leading dims hold
  ``B * N`` elements, (B, N) being the leading dims of ``z`` ((1, B*N) for 3-d scores).

The new call takes BSNH operands: ``permute_dims`` of the (B, N, ., .) forms, composed with the
producers' own ``permute_dims`` (a head split's BSNH -> BNSH transpose cancels), and its
result goes back through ``permute_dims`` / ``reshape`` to ``y``'s shape; a later
``permute_dims`` / ``reshape`` of that result folds into it too. Masks become an additive
bias (0 / -inf), except a constant one that is exactly causal (GPT-2's ``masked_fill`` with
a lower-triangular buffer), which becomes ``causal_mask`` so the kernel skips hidden key
blocks. A row whose keys are all masked then gives zeros where the unfused chain gave NaN
(PyTorch's ``scaled_dot_product_attention`` gives zeros too). The old chain is left for
DeadCodeElimination. After a call, ``fused`` counts the rewritten chains.
"""
from __future__ import annotations

import math
from typing import Any

import numpy as np

from workbench.ir.module import IRModule
from workbench.ir.transform import Pass, PassContext
from workbench.relax.expr import Call, Constant, Expr, Var, VarBinding
from workbench.relax.expr_functor import ExprMutator
from workbench.relax.op import manipulate as M
from workbench.relax.op import search as Srch
from workbench.relax.op.nn.attention import attention
from workbench.relax.transform._dims import Dim, const, exprs, prod, shape_of
from workbench.relax.transform._util import is_primitive, relax_functions

__all__ = ["FuseAttention"]

#: A ``where`` fill at or below this is a mask (exp underflows to 0 whatever the score).
MASK_FILL = -1e30


def _op(e: Any) -> str:
    return getattr(getattr(e, "op", None), "name", "") if isinstance(e, Call) else ""


def _shape(e: Any) -> tuple[Dim, ...] | None:
    # Dims compare and multiply like ints, and a symbolic sequence length like itself.
    return shape_of(e)


def _scalar(e: Any) -> float | None:
    """The value of a one-element float constant."""
    if isinstance(e, Constant):
        a = e.data.numpy()
        if a.size == 1 and a.dtype.kind == "f":
            return float(a.reshape(()))
    return None


def _lead(shape: tuple[Dim, ...]) -> Dim:
    return prod(shape[:-2])


class _Chain:
    """What a matched attention chain is made of (original, unvisited expressions)."""

    def __init__(self) -> None:
        self.scale = 1.0
        self.below_view = False                      # a scale or reshape was passed
        self.biases: list[tuple[str, Any]] = []      # ("add", bias) / ("where", (cond, keep))
        self.q: Expr | None = None
        self.kt: Expr | None = None


class _Fuser(ExprMutator):
    def __init__(self, mod: IRModule) -> None:
        super().__init__(mod)
        self.values: dict[int, Expr] = {}
        # New vars that are a view the pass made: var id -> (op name, source var, axes)
        self.views: dict[int, tuple[str, Expr, Any]] = {}
        self.fused = 0

    # ---- bindings ------------------------------------------------------------------------------

    def visit_var_binding(self, b: VarBinding) -> None:
        self.values[id(b.var)] = b.value
        new = self.rewrite(b.value) if _op(b.value) == "relax.matmul" else None
        if new is None and _op(b.value) in ("relax.permute_dims", "relax.reshape"):
            new = self.fold_view(b.value)
        if new is None:
            super().visit_var_binding(b)
            return
        self.reemit_binding(b, new)
        var = self.var_remap_.get(id(b.var), b.var)
        if isinstance(new, Var):
            if id(new) in self.views:
                self.views[id(var)] = self.views[id(new)]
        elif _op(new) in ("relax.permute_dims", "relax.reshape"):
            self.views[id(var)] = (_op(new), new.args[0], new.attrs.get("axes"))

    def bound(self, e: Any) -> Expr | None:
        return self.values.get(id(e)) if isinstance(e, Var) else None

    # ---- matching ------------------------------------------------------------------------------

    def rewrite(self, call: Call) -> Expr | None:
        p, v = call.args
        out_shape = _shape(call)
        softmax = self.softmax_of(self.peel_views(p))
        if softmax is None or out_shape is None:
            return None
        z = softmax.args[0]
        zs = _shape(z)
        if zs is None or len(zs) not in (3, 4):
            return None
        b, n, s, t = zs if len(zs) == 4 else (const(1),) + zs
        chain = _Chain()
        if not self.logits(z, chain, zs):
            return None
        q, q_scale = self.peel(chain.q)
        kt, k_scale = self.peel(chain.kt)
        vv, v_scale = self.peel(v)
        shapes = [_shape(x) for x in (q, kt, vv)]
        if any(x is None for x in shapes) or v_scale != 1.0:
            return None
        (qs, ks, vs) = shapes
        h, hv = qs[-1], vs[-1]
        if qs[-2:] != (s, h) or ks[-2:] != (h, t) or vs[-2] != t or \
                any(_lead(x) != b * n for x in shapes) or out_shape[-2:] != (s, hv) or \
                _lead(out_shape) != b * n:
            return None
        for kind, item in chain.biases:
            bs = _shape(item if kind == "add" else item[0])
            if bs is None or len(bs) > 4 or any(
                    d not in (1, f) for d, f in zip(reversed(bs), reversed((b, n, s, t)))):
                return None
        causal = self.take_causal(chain.biases, s, t)
        bias = self.emit_bias(chain.biases, z)
        qb = self.to_bsnh(q, (b, n, s, h), [0, 2, 1, 3])
        kb = self.to_bsnh(kt, (b, n, h, t), [0, 3, 1, 2])
        vb = self.to_bsnh(vv, (b, n, t, hv), [0, 2, 1, 3])
        scale = chain.scale * q_scale * k_scale
        att = self.builder_.emit(attention(qb, kb, vb, bias, scale, causal), name_hint="attention")
        self.views[id(att)] = ("attention", att, None)
        out = self.builder_.emit(M.permute_dims(att, [0, 2, 1, 3]), name_hint="attention_bnsh")
        self.views[id(out)] = ("relax.permute_dims", att, [0, 2, 1, 3])
        self.fused += 1
        if out_shape == (b, n, s, hv):
            return out
        return M.reshape(out, exprs(out_shape))

    def peel_views(self, e: Expr) -> Expr:
        """``e`` through leading-dim reshapes."""
        while True:
            v = self.bound(e)
            if _op(v) == "relax.reshape" and _keeps_rows(v):
                e = v.args[0]
            else:
                return e

    def softmax_of(self, e: Expr) -> Call | None:
        v = self.bound(e)
        if _op(v) == "relax.nn.softmax":
            shape = _shape(v)
            axis = v.attrs.get("axis", -1)
            return v if shape is not None and axis in (-1, len(shape) - 1) else None
        if _op(v) == "relax.where":
            cond, zero, inner = v.args
            sm = self.softmax_of(inner)
            if sm is not None and self.is_zero(zero) and self.no_key_visible(cond, sm.args[0]):
                return sm
        return None

    def is_zero(self, e: Expr) -> bool:
        v = self.bound(e)
        if _op(v) == "relax.broadcast_to":
            e = v.args[0]
        return _scalar(e) == 0.0

    def no_key_visible(self, cond: Expr, z: Expr) -> bool:
        """``cond`` is ``not(max(int(not(z == -inf)), -1, keepdims) == 1)``: the rows of ``z``
        that are -inf throughout (torch's ``_safe_softmax``)."""
        steps = [("relax.logical_not", None), ("relax.equal", 1.0), ("relax.max", None),
                 ("relax.astype", None), ("relax.logical_not", None),
                 ("relax.equal", -math.inf)]
        e = cond
        for name, value in steps:
            v = self.bound(e)
            if _op(v) != name:
                return False
            if name == "relax.max" and not _last_axis_keepdims(v):
                return False
            if value is not None and _scalar_any(v.args[1]) != value:
                return False
            e = v.args[0]
        return e is z

    def logits(self, e: Expr, chain: _Chain, shape: tuple) -> bool:
        """Match ``e`` (of ``shape`` while biases are still to come) down to the Q K^T
        product, filling ``chain``. A bias may not sit under a scale or a reshape (the op adds
        it to the scaled scores, in their (B, N, S, T) shape)."""
        v = self.bound(e)
        name = _op(v)
        if name == "relax.matmul":
            chain.q, chain.kt = v.args
            return True
        if name == "relax.reshape" and _keeps_rows(v):
            chain.below_view = True
            return self.logits(v.args[0], chain, shape)
        if name in ("relax.multiply", "relax.divide"):
            x, c = v.args
            if name == "relax.multiply" and _scalar(x) is not None:
                x, c = c, x
            k = _scalar(c)
            if k is None or k == 0.0:
                return False
            chain.scale *= k if name == "relax.multiply" else 1.0 / k
            chain.below_view = True
            return self.logits(x, chain, shape)
        if chain.below_view:
            return False
        if name == "relax.add" and _shape(v) == shape:
            for scores, other in (v.args, reversed(v.args)):
                mark = len(chain.biases)
                chain.biases.append(("add", other))
                if self.logits(scores, chain, shape):
                    return True
                del chain.biases[mark:]
                chain.scale, chain.below_view, chain.q, chain.kt = 1.0, False, None, None
            return False
        if name == "relax.where" and _shape(v) == shape:
            cond, a, b = v.args
            for keep_if_true, scores, fill in ((True, a, b), (False, b, a)):
                value = _scalar(fill)
                if value is not None and value <= MASK_FILL:
                    chain.biases.append(("where", (cond, keep_if_true)))
                    return self.logits(scores, chain, shape)
        return False

    def peel(self, e: Expr) -> tuple[Expr, float]:
        """``e`` through leading-dim reshapes and scalar scales, to the deepest 4-d tensor on
        the way (else the deepest tensor), with the scale between."""
        scale, cur = 1.0, e
        best = (e, 1.0) if len(_shape(e) or ()) == 4 else None
        while True:
            v = self.bound(cur)
            name = _op(v)
            if name == "relax.reshape" and _keeps_rows(v):
                cur = v.args[0]
            elif name in ("relax.multiply", "relax.divide"):
                x, c = v.args
                if name == "relax.multiply" and _scalar(x) is not None:
                    x, c = c, x
                k = _scalar(c)
                if k is None or k == 0.0 or _shape(x) != _shape(v):
                    break
                scale *= k if name == "relax.multiply" else 1.0 / k
                cur = x
            else:
                break
            if len(_shape(cur) or ()) == 4:
                best = (cur, scale)
        return best if best is not None else (cur, scale)

    # ---- emitting -------------------------------------------------------------------------------

    def take_causal(self, biases: list[tuple[str, Any]], s: Dim, t: Dim) -> str | None:
        """A constant mask that is exactly a causal one (only its last two dims differ from
        1) leaves ``biases`` and becomes the op's ``causal_mask``, which skips the hidden key
        blocks instead of reading a mask."""
        for idx, (kind, item) in enumerate(biases):
            if kind == "add":
                value = item.data.numpy() if isinstance(item, Constant) else None
                keep = None if value is None else np.where(value == 0, True,
                                                          np.where(np.isneginf(value), False,
                                                                   None))
            else:
                cond, keep_if_true = item
                value = cond.data.numpy() if isinstance(cond, Constant) else None
                keep = None if value is None else (value if keep_if_true else ~value)
            mode = _causal_mode(keep, s, t)
            if mode is not None:
                del biases[idx]
                return mode
        return None

    def emit_bias(self, biases: list[tuple[str, Any]], z: Expr) -> Expr | None:
        dtype = z.struct_info.dtype
        total = None
        for kind, item in biases:
            if kind == "add":
                term = self.visit_expr(item)
            else:
                cond, keep_if_true = item
                inf = _const(-np.inf, dtype)
                zero = _const(0, dtype)
                pair = (zero, inf) if keep_if_true else (inf, zero)
                term = self.builder_.emit(Srch.where(self.visit_expr(cond), *pair),
                                          name_hint="attention_mask")
            total = term if total is None else self.builder_.emit(
                total + term, name_hint="attention_bias")
        return total

    def to_bsnh(self, e: Expr, bnxy: tuple[Dim, ...], axes: list[int]) -> Expr:
        """``permute_dims(reshape(e, bnxy), axes)``, the reshape left out when ``e`` has that
        shape and the transpose composed with ``e``'s own."""
        x = self.visit_expr(e)
        if _shape(e) != bnxy:
            x = self.builder_.emit(M.reshape(x, exprs(bnxy)), name_hint="attention_in")
            return self.builder_.emit(M.permute_dims(x, axes), name_hint="attention_in")
        # Compose through the producers' own transposes (a head split's BSNH -> BNSH, a
        # K^T's swap of the last two dims) while they are 4-d.
        while True:
            src = self.bound(e)
            if _op(src) != "relax.permute_dims" or len(_shape(src.args[0]) or ()) != 4:
                break
            inner = src.attrs.get("axes") or [3, 2, 1, 0]
            axes = [inner[a] for a in axes]
            e = src.args[0]
            x = self.visit_expr(e)
        if axes == [0, 1, 2, 3]:
            return x
        return self.builder_.emit(M.permute_dims(x, axes), name_hint="attention_in")

    def fold_view(self, call: Call) -> Expr | None:
        """A ``permute_dims`` / ``reshape`` of a view this pass made, composed into one (or the
        source itself when the two cancel)."""
        x = self.visit_expr(call.args[0])
        made = self.views.get(id(x)) if isinstance(x, Var) else None
        if made is None or made[0] == "attention":
            return None
        kind, src, axes = made
        want = _shape(call)
        if _op(call) == "relax.reshape":
            # A reshape folds only into a reshape: of a transpose it reorders elements.
            if kind != "relax.reshape":
                return None
            return src if _shape(src) == want else M.reshape(src, exprs(want))
        if kind != "relax.permute_dims":
            return None
        outer = call.attrs.get("axes") or list(range(len(want)))[::-1]
        composed = [axes[a] for a in outer]
        if composed == list(range(len(composed))):
            return src
        return M.permute_dims(src, composed)


def _causal_mode(keep: np.ndarray | None, s: Dim, t: Dim) -> str | None:
    """"TopLeft" / "BottomRight" when ``keep`` (visible keys, bool) is that causal mask."""
    if keep is None or keep.dtype == object or keep.shape[-2:] != (s, t) or \
            any(d != 1 for d in keep.shape[:-2]):
        return None
    s, t = int(s), int(t)   # a constant mask's shape matched: the dims are constants
    keep = keep.reshape(s, t).astype(bool)
    for mode, offset in (("TopLeft", 0), ("BottomRight", t - s)):
        if np.array_equal(keep, np.tri(s, t, offset, dtype=bool)):
            return mode
    return None


def _last_axis_keepdims(call: Call) -> bool:
    axes = list(call.attrs.get("axis") or [])
    return bool(call.attrs.get("keepdims")) and axes in ([-1], [len(_shape(call) or ()) - 1])


def _scalar_any(e: Any) -> float | None:
    """The value of a one-element constant of any dtype."""
    if isinstance(e, Constant):
        a = e.data.numpy()
        if a.size == 1:
            return float(a.reshape(()))
    return None


def _keeps_rows(reshape: Call) -> bool:
    """A reshape that only regroups leading dims (the last two are kept)."""
    a, b = _shape(reshape.args[0]), _shape(reshape)
    return a is not None and b is not None and len(a) >= 2 and len(b) >= 2 and a[-2:] == b[-2:]


def _const(value: float, dtype: str) -> Constant:
    from workbench.relax.expr import const
    return const(np.asarray(value, dtype=dtype))


class FuseAttention(Pass):
    """The pass object: ``mod = FuseAttention()(mod)`` (see the module docstring)."""

    name = "FuseAttention"

    def __init__(self) -> None:
        self.fused = 0

    def transform_module(self, mod: IRModule, ctx: PassContext | None = None) -> IRModule:
        if not isinstance(mod, IRModule):
            raise TypeError(f"{self.name} expects an IRModule, got {type(mod).__name__}")
        self.fused = 0
        out = mod.copy()
        for name, func in relax_functions(mod):
            if is_primitive(func):
                continue
            fuser = _Fuser(out)
            new = fuser.visit_expr(func)
            if fuser.fused:
                out[name] = new
                self.fused += fuser.fused
        return out

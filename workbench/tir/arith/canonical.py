"""The affine canonical form of integer index expressions.

An integer expression built from ``+ - *`` by constants, ``//`` and ``%`` by constants (floor or,
when the signs allow, trunc) is kept as a :class:`Sum`::

    sum(coeff * split) + const,   split = floordiv(floormod(index, upper), lower)

where ``index`` is an *atom* (a variable, a load, a ``min``, a product of two non-constants, or a
sum that could not be taken apart), ``lower >= 1`` and ``upper == 0`` means "no modulus". Writing
``x // 16`` as ``(x, lower=16)`` and ``x % 16`` as ``(x, upper=16)`` makes the clean-up after
split and fuse a matter of bookkeeping (the idea of TVM's CanonicalSimplifier):

- ``x // 16 * 16 + x % 16``: the two splits of ``x`` are adjacent digits and merge into ``x``;
- ``(i*8 + j) // 8`` with ``j`` in [0, 8): the divisible part leaves exactly (``i``), the rest
  has bounds inside one period and folds to a constant (0);
- ``(x // 4) // 8 -> x // 32`` and ``x % 16 % 4 -> x % 4`` compose the split's factors.

Every rewrite here is an identity of integer arithmetic with floor semantics, given the bounds
the analyzer knows for atoms. Terms are kept in a dict keyed by ``(atom key, lower, upper)`` and
printed in key order, so the output is deterministic.
"""
from __future__ import annotations

import math
from typing import TYPE_CHECKING, Callable

from workbench.ir import dtype as dt
from workbench.tir import expr as E
from workbench.tir.arith import const_bound as cb

if TYPE_CHECKING:  # pragma: no cover
    from workbench.tir.arith.analyzer import Analyzer

Key = tuple
TermKey = tuple  # (atom key, lower, upper)


class Split:
    """``floordiv(floormod(index, upper), lower)``; ``upper == 0`` means no modulus."""

    __slots__ = ("index", "ikey", "lower", "upper", "key")

    def __init__(self, index: E.PrimExpr, ikey: Key, lower: int, upper: int):
        self.index = index
        self.ikey = ikey
        self.lower = lower
        self.upper = upper
        self.key: TermKey = (ikey, lower, upper)

    def __repr__(self) -> str:
        return f"Split({self.index!r}, lower={self.lower}, upper={self.upper})"


class Sum:
    """``sum(coeff * split) + const`` of one integer dtype. Treated as immutable."""

    __slots__ = ("terms", "const", "dtype")

    def __init__(self, terms: dict[TermKey, tuple[Split, int]], const: int, dtype: str):
        self.terms = terms
        self.const = const
        self.dtype = dtype

    @property
    def is_const(self) -> bool:
        return not self.terms

    def linear_key(self) -> tuple[Key, int] | None:
        """``(key, scale)`` with ``terms == scale * normalized(key)``: the coefficients divided
        by their gcd, the first made positive. Facts are stored against this key, so
        ``2*i - 2*n < 0`` and ``n - i > 0`` are the same fact."""
        if not self.terms:
            return None
        items = sorted((k, c) for k, (_, c) in self.terms.items())
        g = 0
        for _, c in items:
            g = math.gcd(g, c)
        if items[0][1] < 0:
            g = -g
        return tuple((k, c // g) for k, c in items), g


def is_canonical_dtype(dtype: str) -> bool:
    """Scalar signed integers: the dtypes the affine form handles (unsigned wraps on subtract)."""
    t = dt.parse(dtype)
    return t.code == "int" and t.lanes == 1


def _const(v: int, dtype: str) -> Sum:
    return Sum({}, v, dtype)


def _floordiv_ends_equal(lo: int, hi: int, c: int) -> int | None:
    """The common value of ``floordiv(v, c)`` for every v in [lo, hi], if there is one."""
    if cb.is_inf(lo) or cb.is_inf(hi) or lo > hi:
        return None
    q = lo // c
    return q if hi // c == q else None


class Canonicalizer:
    """Turns expressions into :class:`Sum` s and back, using ``an`` for bounds and atoms."""

    def __init__(self, an: "Analyzer"):
        self.an = an
        self._table: dict[type, Callable[[E.PrimExpr], Sum]] = {
            E.IntImm: self._c_intimm, E.Add: self._c_add, E.Sub: self._c_sub,
            E.Mul: self._c_mul, E.FloorDiv: self._c_floordiv, E.FloorMod: self._c_floormod,
            E.Div: self._c_truncdiv, E.Mod: self._c_truncmod,
        }

    # ---- expression -> Sum ----------------------------------------------------------------

    def canon(self, e: E.PrimExpr) -> Sum:
        """The canonical form of a scalar signed-integer expression (memoised per context)."""
        memo = self.an._memo.canon
        s = memo.get(e)
        if s is None:
            h = self._table.get(type(e))
            s = h(e) if h is not None else self._atom(e)
            memo[e] = s
        return s

    def _atom(self, e: E.PrimExpr) -> Sum:
        se = self.an._simplify(e)
        if se is not e and (type(se) in self._table):
            return self.canon(se)
        return self.make_split(se, 1, 0)

    def _c_intimm(self, e: E.IntImm) -> Sum:
        return _const(e.value, e.dtype)

    def _c_add(self, e: E.Add) -> Sum:
        return self.add(self.canon(e.a), self.canon(e.b))

    def _c_sub(self, e: E.Sub) -> Sum:
        return self.add(self.canon(e.a), self.canon(e.b), -1)

    def _c_mul(self, e: E.Mul) -> Sum:
        a, b = self.canon(e.a), self.canon(e.b)
        if b.is_const:
            return self.scale(a, b.const)
        if a.is_const:
            return self.scale(b, a.const)
        # A product of two non-constants is an atom; sort the operands so x*y and y*x merge.
        ea, eb = self.to_expr(a), self.to_expr(b)
        if self.an._key(eb) < self.an._key(ea):
            ea, eb = eb, ea
        return self.make_split(E.Mul(ea, eb, e.dtype), 1, 0)

    def _divisor(self, e: E.BinaryOp) -> tuple[Sum, Sum]:
        return self.canon(e.a), self.canon(e.b)

    def _c_floordiv(self, e: E.FloorDiv) -> Sum:
        a, b = self._divisor(e)
        if b.is_const and b.const != 0:
            c = b.const
            return self.floordiv(a, c) if c > 0 else self.floordiv(self.scale(a, -1), -c)
        return self._opaque(E.FloorDiv, a, b, e.dtype)

    def _c_floormod(self, e: E.FloorMod) -> Sum:
        a, b = self._divisor(e)
        if b.is_const and b.const != 0:
            c = b.const
            if c > 0:
                return self.floormod(a, c)
            # x mod -c == -((-x) mod c)
            return self.scale(self.floormod(self.scale(a, -1), -c), -1)
        return self._opaque(E.FloorMod, a, b, e.dtype)

    def _c_truncdiv(self, e: E.Div) -> Sum:
        a, b = self._divisor(e)
        if b.is_const and b.const != 0:
            c, sign = abs(b.const), (1 if b.const > 0 else -1)
            lo, hi = self.bound(a)
            if lo >= 0:  # truncation and floor agree on non-negative dividends
                return self.scale(self.floordiv(a, c), sign)
            if hi <= 0:  # trunc(a / c) == -floor(-a / c)
                return self.scale(self.floordiv(self.scale(a, -1), c), -sign)
        return self._opaque(E.Div, a, b, e.dtype)

    def _c_truncmod(self, e: E.Mod) -> Sum:
        a, b = self._divisor(e)
        if b.is_const and b.const != 0:
            c = abs(b.const)  # the sign of a truncated remainder follows the dividend only
            lo, hi = self.bound(a)
            if lo >= 0:
                return self.floormod(a, c)
            if hi <= 0:
                return self.scale(self.floormod(self.scale(a, -1), c), -1)
        return self._opaque(E.Mod, a, b, e.dtype)

    def _opaque(self, cls: type, a: Sum, b: Sum, dtype: str) -> Sum:
        """A division we cannot take apart: fold constants, else keep it as an atom."""
        if a.is_const and b.is_const and b.const != 0:
            return _const(_FOLD_DIV[cls](a.const, b.const), dtype)
        e = cls(self.to_expr(a), self.to_expr(b), dtype)
        if cls in (E.FloorDiv, E.FloorMod) and not b.is_const:
            # (q * s + r) // s with 0 <= r < s: a symbolic length's row-major index
            from workbench.tir.arith.rewrite_rules import floor_by_symbolic_divisor
            got = floor_by_symbolic_divisor.fn(self.an, e)
            if got is not None:
                return self.canon(got)
        return self.make_split(e, 1, 0)

    # ---- Sum arithmetic -------------------------------------------------------------------

    def scale(self, s: Sum, c: int) -> Sum:
        if c == 1:
            return s
        if c == 0:
            return _const(0, s.dtype)
        return Sum({k: (sp, co * c) for k, (sp, co) in s.terms.items()}, s.const * c, s.dtype)

    def add(self, a: Sum, b: Sum, scale: int = 1) -> Sum:
        """``a + scale * b``, merging like terms and adjacent splits of one atom."""
        if not b.terms:
            return a if b.const == 0 else Sum(a.terms, a.const + scale * b.const, a.dtype)
        terms = dict(a.terms)
        shared_atom = False
        atoms = {sp.ikey for sp, _ in a.terms.values()} if a.terms else set()
        for k, (sp, co) in b.terms.items():
            old = terms.get(k)
            if old is not None:
                nc = old[1] + scale * co
                if nc:
                    terms[k] = (old[0], nc)
                else:
                    del terms[k]
            else:
                terms[k] = (sp, scale * co)
                if sp.ikey in atoms:
                    shared_atom = True
        const = a.const + scale * b.const
        if shared_atom:
            return self._merge(terms, const, a.dtype)
        return Sum(terms, const, a.dtype)

    def _merge(self, terms: dict, const: int, dtype: str) -> Sum:
        """Merge pairs of splits of the same atom that are adjacent digits (see module doc)."""
        while True:
            found = None
            items = list(terms.items())
            for i, (ka, (sa, ca)) in enumerate(items):
                for kb, (sb, cb_) in items[i + 1:]:
                    if sa.ikey != sb.ikey:
                        continue
                    r = _try_merge(sa, ca, sb, cb_) or _try_merge(sb, cb_, sa, ca)
                    if r is not None:
                        found = (ka, kb, sa, r)
                        break
                if found:
                    break
            if found is None:
                return Sum(terms, const, dtype)
            ka, kb, sa, (lower, upper, coeff) = found
            del terms[ka], terms[kb]
            merged = self.scale(self.make_split(sa.index, lower, upper), coeff)
            const += merged.const
            for k, (sp, co) in merged.terms.items():
                old = terms.get(k)
                nc = co + (old[1] if old else 0)
                if nc:
                    terms[k] = (sp, nc)
                elif old:
                    del terms[k]

    def atom_sum(self, e: E.PrimExpr) -> Sum:
        """``1 * e`` as a Sum, without consulting bounds (so binding ``e`` later stays cheap)."""
        sp = Split(e, self.an._key(e), 1, 0)
        return Sum({sp.key: (sp, 1)}, 0, e.dtype)

    def make_split(self, index: E.PrimExpr, lower: int, upper: int) -> Sum:
        """The Sum for ``floordiv(floormod(index, upper), lower)``, simplified by index bounds."""
        dtype = index.dtype
        lo, hi = self.an._bound(index)
        if upper:
            if lo >= 0 and hi < upper:
                upper = 0  # the modulus never wraps
            elif upper <= lower:
                return _const(0, dtype)  # 0 <= index % upper < upper <= lower
        if upper:
            lo, hi = cb.iv_floormod((lo, hi), (upper, upper))
        if lower > 1:
            q = _floordiv_ends_equal(lo, hi, lower)
            if q is not None:
                return _const(q, dtype)
        elif lo == hi and not cb.is_inf(lo):
            return _const(lo, dtype)
        if lower == 1 and upper == 0 and _is_printed_sum(index):
            return self.canon(index)  # a wrapped sum that became whole again: reopen it
        sp = Split(index, self.an._key(index), lower, upper)
        return Sum({sp.key: (sp, 1)}, 0, dtype)

    # ---- division by a positive constant ----------------------------------------------------

    def floordiv(self, s: Sum, c: int) -> Sum:
        """``floordiv(s, c)`` for ``c > 0``: the terms divisible by ``c`` leave the division."""
        if c == 1:
            return s
        head: dict = {}
        rest: dict = {}
        for k, (sp, co) in s.terms.items():
            if co % c == 0:
                head[k] = (sp, co // c)
            else:
                rest[k] = (sp, co)
        q, r = divmod(s.const, c)
        if not rest:
            return Sum(head, q, s.dtype)
        tail = self._floordiv_rest(Sum(rest, r, s.dtype), c)
        return self.add(Sum(head, q, s.dtype), tail) if head or q else tail

    def _floordiv_rest(self, r: Sum, c: int) -> Sum:
        lo, hi = self.bound(r)
        q = _floordiv_ends_equal(lo, hi, c)
        if q is not None:
            return _const(q, r.dtype)
        g = _gcd_all(r, c)
        if g > 1:  # floor(g*a / (g*b)) == floor(a / b)
            return self.floordiv(_exact_div(r, g), c // g)
        for g2, head, tail in self._digit_splits(r, c):
            # r == g2*head + tail with tail in [k*g2, (k+1)*g2), so r // c == (head + k) // (c/g2)
            return self.floordiv(Sum(head, tail[0], r.dtype), c // g2)
        only = _single_split(r)
        if only is not None:  # (x % u // l) // c == x % u // (l*c)
            return self.make_split(only.index, only.lower * c, only.upper)
        e = self.to_expr(r)
        return self.make_split(e, c, 0)

    def floormod(self, s: Sum, c: int) -> Sum:
        """``floormod(s, c)`` for ``c > 0``."""
        if c == 1:
            return _const(0, s.dtype)
        terms: dict = {}
        for k, (sp, co) in s.terms.items():
            co2 = co - c * int(co / c)  # (co mod c, toward zero) * x == co * x  (mod c)
            if co2:
                terms[k] = (sp, co2)
        r = Sum(terms, s.const % c, s.dtype)
        if not terms:
            return _const(r.const, s.dtype)
        lo, hi = self.bound(r)
        q = _floordiv_ends_equal(lo, hi, c)
        if q is not None:  # r stays inside one period
            return Sum(r.terms, r.const - q * c, r.dtype)
        g = _gcd_all(r, c)
        if g > 1:  # (g*a) mod (g*b) == g * (a mod b)
            return self.scale(self.floormod(_exact_div(r, g), c // g), g)
        for g2, head, tail in self._digit_splits(r, c):
            # r == g2*(head + k) + low with low in [0, g2)
            k = tail[0]
            low = Sum(tail[1], r.const - k * g2, r.dtype)
            high = self.scale(self.floormod(Sum(head, k, r.dtype), c // g2), g2)
            return self.add(high, low)
        only = _single_split(r)
        if only is not None and (only.upper == 0 or only.upper % (only.lower * c) == 0):
            # (x % u // l) % c == x % (l*c) // l when l*c divides u
            return self.make_split(only.index, only.lower, only.lower * c)
        e = self.to_expr(r)
        return self.make_split(e, 1, c)

    def _digit_splits(self, r: Sum, c: int):
        """Ways to write ``r == g*head + tail`` with ``g | c`` and ``tail`` inside one period of
        ``g``; yields ``(g, head terms, (k, tail terms))`` with tail in ``[k*g, (k+1)*g)``.
        This is what takes ``(i*32 + j*4 + k) // 32`` apart when ``j*4 + k < 32``."""
        cands = sorted({math.gcd(abs(co), c) for _, co in r.terms.values()}, reverse=True)
        for g in cands:
            if g <= 1 or g >= c:
                continue
            head = {k: (sp, co // g) for k, (sp, co) in r.terms.items() if co % g == 0}
            if not head:
                continue
            tail_terms = {k: v for k, v in r.terms.items() if k not in head}
            lo, hi = self.bound(Sum(tail_terms, r.const, r.dtype))
            k = _floordiv_ends_equal(lo, hi, g)
            if k is not None:
                yield g, head, (k, tail_terms)
                return

    # ---- bounds ----------------------------------------------------------------------------

    def split_bound(self, sp: Split) -> cb.Interval:
        b = self.an._bound(sp.index)
        if sp.upper:
            b = cb.iv_floormod(b, (sp.upper, sp.upper))
        if sp.lower > 1:
            b = cb.floordiv_end(b[0], sp.lower), cb.floordiv_end(b[1], sp.lower)
        return b

    def bound(self, s: Sum) -> cb.Interval:
        """Bounds of ``s`` from its atoms' bounds, tightened by facts on its linear part."""
        lo = hi = 0
        for sp, co in s.terms.values():
            b = cb.iv_scale(self.split_bound(sp), co)
            lo, hi = cb.add_end(lo, b[0]), cb.add_end(hi, b[1])
        if s.terms and self.an._has_facts():
            lk = s.linear_key()
            fact = self.an._fact_interval(lk[0]) if lk is not None else None
            if fact is not None:
                f = cb.iv_scale(fact, lk[1])
                lo, hi = max(lo, f[0]), min(hi, f[1])
        return cb.add_end(lo, s.const), cb.add_end(hi, s.const)

    # ---- Sum -> expression ------------------------------------------------------------------

    def to_expr(self, s: Sum) -> E.PrimExpr:
        """Print ``s``: positive terms, then negative ones, each by decreasing |coefficient|
        (row-major index order: ``i * 512 + j``), ties by atom key with the higher digit of a
        split first; the constant last."""
        dtype = s.dtype
        if not s.terms:
            return E.IntImm(dtype, s.const)
        items = sorted(s.terms.items(), key=_print_order)
        out: E.PrimExpr | None = None
        for _, (sp, co) in items:
            atom = _split_expr(sp)
            if out is None:
                out = atom if co == 1 else E.Mul(atom, E.IntImm(dtype, co), dtype)
            elif co > 0:
                out = E.Add(out, atom if co == 1 else E.Mul(atom, E.IntImm(dtype, co), dtype),
                            dtype)
            else:
                out = E.Sub(out, atom if co == -1 else E.Mul(atom, E.IntImm(dtype, -co), dtype),
                            dtype)
        if s.const > 0:
            out = E.Add(out, E.IntImm(dtype, s.const), dtype)
        elif s.const < 0:
            out = E.Sub(out, E.IntImm(dtype, -s.const), dtype)
        # The printed expression canonicalises back to this very Sum; remember that.
        self.an._memo.canon[out] = s
        return out


def _print_order(kv: tuple) -> tuple:
    (ikey, lower, upper), (_, co) = kv
    return co < 0, -abs(co), ikey, -lower, upper


def _split_expr(sp: Split) -> E.PrimExpr:
    x, lo, up, dtype = sp.index, sp.lower, sp.upper, sp.index.dtype
    if not up:
        return x if lo == 1 else E.FloorDiv(x, E.IntImm(dtype, lo), dtype)
    if lo == 1:
        return E.FloorMod(x, E.IntImm(dtype, up), dtype)
    if up % lo == 0:  # the way people write it: x // l % (u / l)
        return E.FloorMod(E.FloorDiv(x, E.IntImm(dtype, lo), dtype),
                          E.IntImm(dtype, up // lo), dtype)
    return E.FloorDiv(E.FloorMod(x, E.IntImm(dtype, up), dtype), E.IntImm(dtype, lo), dtype)


def _try_merge(a: Split, ca: int, b: Split, cb_: int) -> tuple[int, int, int] | None:
    """Merge ``ca*a + cb*b`` (same atom) into ``ca * split(lower, upper)``, or ``None``.

    Stack: ``x%u//l * s + x%U//u * (s*u/l) == x%U//l * s`` when ``l | u`` and ``u | U``.
    Difference: ``x%u//l * s - x%u//L * (s*L/l) == x%L//l * s`` when ``l | L`` and ``L | u``.
    """
    if (a.upper and b.lower == a.upper and a.upper % a.lower == 0
            and (b.upper == 0 or b.upper % a.upper == 0)
            and cb_ == ca * (a.upper // a.lower)):
        return a.lower, b.upper, ca
    if (a.upper == b.upper and a.lower < b.lower and b.lower % a.lower == 0
            and (a.upper == 0 or a.upper % b.lower == 0)
            and cb_ == -ca * (b.lower // a.lower)):
        return a.lower, b.lower, ca
    return None


def _is_printed_sum(e: E.PrimExpr) -> bool:
    """Is ``e`` a sum or a scaled term as :meth:`Canonicalizer.to_expr` prints them (and not an
    opaque atom such as ``x * y`` or ``x // y``, which would canonicalise to itself)?"""
    return isinstance(e, (E.Add, E.Sub)) or (isinstance(e, E.Mul) and isinstance(e.b, E.IntImm))


def _single_split(s: Sum) -> Split | None:
    if len(s.terms) == 1 and s.const == 0:
        (sp, co), = s.terms.values()
        if co == 1:
            return sp
    return None


def _gcd_all(s: Sum, c: int) -> int:
    g = math.gcd(c, s.const)
    for _, co in s.terms.values():
        g = math.gcd(g, co)
        if g == 1:
            break
    return g


def _exact_div(s: Sum, g: int) -> Sum:
    return Sum({k: (sp, co // g) for k, (sp, co) in s.terms.items()}, s.const // g, s.dtype)


def _truncdiv(a: int, b: int) -> int:
    q = abs(a) // abs(b)
    return q if (a >= 0) == (b > 0) else -q


def _truncmod(a: int, b: int) -> int:
    return a - b * _truncdiv(a, b)


_FOLD_DIV: dict[type, Callable[[int, int], int]] = {
    E.FloorDiv: lambda a, b: a // b, E.FloorMod: lambda a, b: a % b,
    E.Div: _truncdiv, E.Mod: _truncmod,
}

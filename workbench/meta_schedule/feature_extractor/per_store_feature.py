"""PerStoreFeature (part 1: a reduced but real per-store feature vector).

For every ``BufferStore`` whose value is not a literal constant, one row keyed by the stored
buffer (a later store to the same buffer overwrites the row; rows keep first-store order), as
TVM's extractor does. Block variables are replaced by their loop bindings first, so indices
are in terms of loops. All scalars go through ``slog(x) = log2(|x| + 1)``.

Columns (``N_FEATURES`` = 76):

- computation (11): float add/sub, mul, div/mod, cmp/min/max, math calls; int add/sub, mul,
  div/mod, cmp/min/max; bool/select ops -- each the count in the stored value (index math
  inside loads included) times the product of the enclosing loop extents;
- loop kinds (9): for vectorized, unrolled (kind or auto-unroll pragma) and parallel loops:
  count, product of extents, innermost extent;
- buffer accesses (5 x 10): the stored buffer and each loaded buffer, sorted by lines then
  bytes (descending): is_read, is_write, is_read_write, bytes, unique bytes, cache lines,
  unique lines, innermost stride, reuse count, bytes per reuse;
- arithmetic intensity (1): float ops over unique bytes of all accesses;
- allocation (2): bytes of the stored buffer, whether it is a function parameter;
- loop nest (3): product of extents, number of loops, enclosing auto-unroll max step.

Part 2 replaces this with TVM's full 164-column layout (reference section 8.4) under the
same class name and interface.
"""
from __future__ import annotations

from typing import TYPE_CHECKING, Any

import numpy as np

from workbench.ir.node import field_names
from workbench.meta_schedule.feature_extractor.feature_extractor import FeatureExtractor
from workbench.tir import expr as E
from workbench.tir.arith import evaluate
from workbench.tir.buffer import Buffer
from workbench.tir.function import PrimFunc
from workbench.tir.functor import substitute
from workbench.tir.schedule.state import child_stmts
from workbench.tir.stmt import BlockRealize, BufferStore, For, ForKind

if TYPE_CHECKING:  # pragma: no cover
    from workbench.meta_schedule.search_strategy import MeasureCandidate
    from workbench.meta_schedule.tune_context import TuneContext

N_COMPUTE = 11
N_LOOP_KIND = 9
BUFFERS_PER_STORE = 5
N_PER_BUFFER = 10
N_FEATURES = N_COMPUTE + N_LOOP_KIND + BUFFERS_PER_STORE * N_PER_BUFFER + 1 + 2 + 3
CACHE_LINE = 64


def slog(x: float) -> float:
    return float(np.log2(abs(x) + 1.0))


def _bytes_of(dtype: str) -> int:
    digits = "".join(c for c in dtype.split("x")[0] if c.isdigit())
    bits = int(digits) if digits else 8
    lanes = int(dtype.split("x")[1]) if "x" in dtype else 1
    return max(1, bits // 8) * lanes


def _const(e: Any) -> int | None:
    return int(e.value) if isinstance(e, E.IntImm) else None


_ADD = (E.Add, E.Sub)
_MUL = (E.Mul,)
_DIV = (E.Div, E.Mod, E.FloorDiv, E.FloorMod)
_CMP = (E.Min, E.Max, E.CmpOp) if hasattr(E, "CmpOp") else (E.Min, E.Max)
_BOOL = tuple(getattr(E, n) for n in ("And", "Or", "Not") if hasattr(E, n))


def _op_counts(value: E.PrimExpr) -> tuple[np.ndarray, list[E.BufferLoad]]:
    """Arithmetic counts of one stored value (see the module docstring) and its loads."""
    counts = np.zeros(N_COMPUTE, dtype="float64")
    loads: list[E.BufferLoad] = []
    stack: list[Any] = [value]
    while stack:
        node = stack.pop()
        if not isinstance(node, E.PrimExpr):
            continue
        is_float = str(getattr(node, "dtype", "")).startswith(("float", "bfloat"))
        base = 0 if is_float else 5
        if isinstance(node, E.BufferLoad):
            loads.append(node)
        elif isinstance(node, _ADD):
            counts[base + 0] += 1
        elif isinstance(node, _MUL):
            counts[base + 1] += 1
        elif isinstance(node, _DIV):
            counts[base + 2] += 1
        elif isinstance(node, _CMP):
            counts[(0 if _operand_float(node) else 5) + 3] += 1
        elif isinstance(node, E.Select) or isinstance(node, _BOOL):
            counts[10] += 1
        elif isinstance(node, E.Call):
            if node.op in ("if_then_else", "tir.if_then_else"):
                counts[10] += 1
            elif is_float:
                counts[4] += 1
            else:
                counts[9] += 1
        for name in field_names(type(node)):
            v = getattr(node, name)
            if isinstance(v, E.PrimExpr):
                stack.append(v)
            elif isinstance(v, tuple):
                stack.extend(x for x in v if isinstance(x, E.PrimExpr))
    return counts, loads


def _operand_float(node: Any) -> bool:
    a = getattr(node, "a", None)
    return a is not None and str(getattr(a, "dtype", "")).startswith(("float", "bfloat"))


def _vars(exprs: Any) -> set[E.Var]:
    found: set[E.Var] = set()
    stack = list(exprs)
    while stack:
        node = stack.pop()
        if isinstance(node, E.Var):
            found.add(node)
            continue
        if not isinstance(node, E.PrimExpr):
            continue
        for name in field_names(type(node)):
            v = getattr(node, name)
            if isinstance(v, E.PrimExpr):
                stack.append(v)
            elif isinstance(v, tuple):
                stack.extend(x for x in v if isinstance(x, E.PrimExpr))
    return found


class _Walker:
    """Walks a block-form PrimFunc collecting one row per stored buffer."""

    def __init__(self, func: PrimFunc) -> None:
        self.params = set(func.buffer_map.values())
        self.loops: list[For] = []
        self.env: dict[E.Var, E.PrimExpr] = {}
        self.rows: dict[Buffer, np.ndarray] = {}
        self.unroll_steps: list[int] = []

    def walk(self, stmt: Any) -> None:
        if isinstance(stmt, For):
            self.loops.append(stmt)
            step = stmt.annotations.get("pragma_auto_unroll_max_step")
            if step is not None:
                self.unroll_steps.append(int(step))
            self.walk(stmt.body)
            if step is not None:
                self.unroll_steps.pop()
            self.loops.pop()
            return
        if isinstance(stmt, BlockRealize):
            saved = self.env
            self.env = dict(saved)
            for iv, v in zip(stmt.block.iter_vars, stmt.iter_values):
                self.env[iv.var] = substitute(v, saved) if saved else v
            if stmt.block.init is not None:
                self.walk(stmt.block.init)
            self.walk(stmt.block.body)
            self.env = saved
            return
        if isinstance(stmt, BufferStore):
            if not isinstance(stmt.value, (E.IntImm, E.FloatImm)):
                self.rows[stmt.buffer] = self._row(stmt)
            return
        for child in child_stmts(stmt):
            self.walk(child)

    # -- one row -------------------------------------------------------------------------------
    def _row(self, store: BufferStore) -> np.ndarray:
        loops = self.loops
        extents = [_const(lp.extent) or 1 for lp in loops]
        loop_prod = float(np.prod(extents)) if extents else 1.0
        counts, loads = _op_counts(store.value)
        compute = [slog(c * loop_prod) for c in counts]

        kinds = []
        for kind in (ForKind.VECTORIZED, ForKind.UNROLLED, ForKind.PARALLEL):
            sel = [e for lp, e in zip(loops, extents) if lp.kind == kind or (
                kind == ForKind.UNROLLED and "pragma_auto_unroll_max_step" in lp.annotations)]
            kinds += [slog(len(sel)), slog(float(np.prod(sel)) if sel else 0.0),
                      slog(sel[-1] if sel else 0)]

        accesses = [(store.buffer, store.indices, "w")]
        for ld in loads:
            kind = "rw" if ld.buffer is store.buffer else "r"
            if kind == "rw":
                accesses[0] = (store.buffer, store.indices, "rw")
            else:
                accesses.append((ld.buffer, ld.indices, "r"))
        per_buffer = [self._access(buf, idx, kind, loops, extents, loop_prod)
                      for buf, idx, kind in accesses]
        per_buffer.sort(key=lambda f: (-f[1][5], -f[1][3]))
        unique_total = sum(f[0] for f in per_buffer)
        buf_feats: list[float] = []
        for _, feats in per_buffer[:BUFFERS_PER_STORE]:
            buf_feats += feats
        buf_feats += [0.0] * (BUFFERS_PER_STORE * N_PER_BUFFER - len(buf_feats))

        float_ops = float(np.sum(counts[:5])) * loop_prod
        intensity = [slog(float_ops / unique_total) if unique_total else 0.0]
        numel = 1
        for s in store.buffer.shape:
            numel *= _const(s) or 1
        alloc = [slog(numel * _bytes_of(store.buffer.dtype)),
                 1.0 if store.buffer in self.params else 0.0]
        nest = [slog(loop_prod), slog(len(loops)),
                slog(self.unroll_steps[-1] if self.unroll_steps else 0)]
        row = compute + kinds + buf_feats + intensity + alloc + nest
        return np.asarray(row, dtype="float32")

    def _access(self, buf: Buffer, indices: Any, kind: str, loops: list[For],
                extents: list[int], loop_prod: float) -> tuple[float, list[float]]:
        idx = [substitute(i, self.env) if self.env else i for i in indices]
        used = _vars(idx)
        nbytes = _bytes_of(buf.dtype)
        shape = [_const(s) or 1 for s in buf.shape]
        numel_cap = float(np.prod(shape)) if shape else 1.0
        unique = 1.0
        reuse = 1.0
        for lp, e in zip(loops, extents):
            if lp.loop_var in used:
                unique *= e
            else:
                reuse *= e
        unique = min(unique, numel_cap)
        stride, inner_pos = 0, -1
        for pos in range(len(loops) - 1, -1, -1):
            if loops[pos].loop_var in used:
                inner_pos = pos
                stride = self._stride(idx, shape, loops, pos)
                break
        innermost_stride = stride if inner_pos == len(loops) - 1 else 0
        prod_non_strided = float(np.prod(extents[inner_pos + 1:])) if inner_pos >= 0 else 1.0
        total_bytes = nbytes * loop_prod
        unique_bytes = unique * nbytes
        lines = max(1.0, loop_prod / max(prod_non_strided, 1.0) *
                    min(1.0, abs(stride) * nbytes / CACHE_LINE if stride else 1.0))
        contiguous = nbytes * (extents[inner_pos] if inner_pos >= 0 and abs(stride) == 1 else 1)
        unique_lines = max(1.0, unique_bytes / min(CACHE_LINE, contiguous))
        feats = [1.0 if kind == "r" else 0.0, 1.0 if kind == "w" else 0.0,
                 1.0 if kind == "rw" else 0.0, slog(total_bytes), slog(unique_bytes),
                 slog(lines), slog(unique_lines), slog(innermost_stride), slog(reuse),
                 slog(total_bytes / reuse)]
        return unique_bytes, feats

    @staticmethod
    def _stride(idx: list, shape: list[int], loops: list[For], pos: int) -> int:
        env = {lp.loop_var: _const(lp.min) or 0 for lp in loops}

        def flat(e: dict) -> int:
            total = 0
            for i, s in zip(idx, shape):
                total = total * s + int(evaluate(i, e))
            return total

        try:
            base = flat(env)
            env[loops[pos].loop_var] += 1
            return flat(env) - base
        except Exception:  # noqa: BLE001 - data-dependent index: treat as far apart
            return CACHE_LINE


class PerStoreFeature(FeatureExtractor):
    """See the module docstring. Arguments mirror TVM's (``buffers_per_store`` is fixed at 5
    in part 1; ``extract_workload`` adds nothing yet)."""

    def __init__(self, buffers_per_store: int = 5, arith_intensity_curve_num_samples: int = 10,
                 cache_line_bytes: int = 64, extract_workload: bool = False) -> None:
        self.buffers_per_store = buffers_per_store
        self.arith_intensity_curve_num_samples = arith_intensity_curve_num_samples
        self.cache_line_bytes = cache_line_bytes
        self.extract_workload = extract_workload

    @property
    def feature_vector_length(self) -> int:
        return N_FEATURES

    def extract_from(self, context: "TuneContext",
                     candidates: list["MeasureCandidate"]) -> list[np.ndarray]:
        out = []
        for cand in candidates:
            mod = cand.sch.mod
            rows: list[np.ndarray] = []
            for _, func in mod.items():
                if isinstance(func, PrimFunc):
                    w = _Walker(func)
                    w.walk(func.body)
                    rows.extend(w.rows.values())
            out.append(np.stack(rows) if rows else np.zeros((0, N_FEATURES), "float32"))
        return out

"""The loop nest around a statement, as the per-store feature walk sees it (TVM's ``LoopNest``).

:class:`LoopNest` is a stack of :class:`LoopFrame`s (outer -> inner) kept up to date by the
collector's ``visit_For``. Each frame records what the feature groups need of its loop: the
constant extent (or ``None``), the kind, the ``pragma_auto_unroll_max_step`` value and a
number unique within one walk. The number, not the ``For`` object, identifies the loop in the
shared "bytes touched under this loop" table: immutable IR may share one ``For`` object between
two places, and those are different loops for reuse analysis.

Also here: ``slog`` (the transform every feature goes through) and ``storage_bytes``.
"""
from __future__ import annotations

import math
from dataclasses import dataclass, field
from functools import lru_cache

from workbench.ir import dtype as dt
from workbench.tir.analysis import const_extent
from workbench.tir.expr import IntImm, Var
from workbench.tir.stmt import For, ForKind

AUTO_UNROLL_KEY = "pragma_auto_unroll_max_step"

# Thread tags that have their own GPU slot in group 1; every "vthread*" tag shares one.
THREAD_TAGS = ("blockIdx.x", "blockIdx.y", "blockIdx.z",
               "threadIdx.x", "threadIdx.y", "threadIdx.z", "vthread")


def slog(x: float) -> float:
    """``log2(|x| + 1)``: every feature goes through it (keeps 0 at 0, compresses products)."""
    return math.log2(abs(x) + 1.0)


@lru_cache(maxsize=None)
def storage_bytes(dtype: str) -> int:
    """Bytes one element of ``dtype`` occupies (TVM's ``DataType::StorageBytes``)."""
    t = dt.parse(dtype)
    return (t.bits * t.lanes + 7) // 8


@dataclass(slots=True)
class LoopFrame:
    """One enclosing loop: what the feature groups read of it."""

    loop: For
    uid: int
    extent: int | None          # constant extent, or None when symbolic
    min_value: int | None       # constant min, or None when symbolic
    kind: str
    thread_tag: str             # "" unless kind is thread_binding
    auto_unroll: int            # pragma_auto_unroll_max_step, or -1 when absent
    outer_prod: int             # LoopNest.prod outside this loop (restored on pop)

    @property
    def var(self) -> Var:
        return self.loop.loop_var


def _thread_tag(loop: For) -> str:
    tb = loop.thread_binding
    if tb is None:
        return ""
    tag = getattr(tb, "thread_tag", tb if isinstance(tb, str) else "")
    return "vthread" if tag.startswith("vthread") else tag


def _auto_unroll(loop: For) -> int:
    step = loop.annotations.get(AUTO_UNROLL_KEY) if loop.annotations else None
    if isinstance(step, IntImm):
        return step.value
    return int(step) if isinstance(step, int) else -1


@dataclass
class LoopNest:
    """The loops around the current statement, outer -> inner, with running products.

    ``prod`` is the product of the constant extents (symbolic extents count as 1, as in TVM).
    ``by_kind`` maps ``parallel``/``vectorized``/``unroll`` and each thread tag to the frames
    of that kind, outer -> inner.
    """

    frames: list[LoopFrame] = field(default_factory=list)
    prod: int = 1
    auto_unroll: list[int] = field(default_factory=list)
    by_kind: dict[str, list[LoopFrame]] = field(default_factory=dict)
    _next_uid: int = 0

    def push(self, loop: For) -> LoopFrame:
        mn = loop.min
        frame = LoopFrame(loop, self._next_uid, const_extent(loop),
                          mn.value if isinstance(mn, IntImm) else None,
                          loop.kind, _thread_tag(loop), _auto_unroll(loop), self.prod)
        self._next_uid += 1
        self.frames.append(frame)
        if frame.extent is not None:
            self.prod *= frame.extent
        if frame.auto_unroll > 0:
            self.auto_unroll.append(frame.auto_unroll)
        key = self._kind_key(frame)
        if key:
            self.by_kind.setdefault(key, []).append(frame)
        return frame

    def pop(self) -> None:
        frame = self.frames.pop()
        self.prod = frame.outer_prod
        if frame.auto_unroll > 0:
            self.auto_unroll.pop()
        key = self._kind_key(frame)
        if key:
            self.by_kind[key].pop()

    def of_kind(self, key: str) -> list[LoopFrame]:
        """Frames of a loop kind (``ForKind.PARALLEL`` ...) or thread tag, outer -> inner."""
        return self.by_kind.get(key, [])

    @staticmethod
    def _kind_key(frame: LoopFrame) -> str:
        if frame.kind in (ForKind.PARALLEL, ForKind.VECTORIZED, ForKind.UNROLLED):
            return frame.kind
        if frame.kind == ForKind.THREAD_BINDING:
            return frame.thread_tag
        return ""


__all__ = ["AUTO_UNROLL_KEY", "THREAD_TAGS", "LoopFrame", "LoopNest", "const_extent", "slog",
           "storage_bytes"]

"""Annotations the compiler reads, and keeping them true when primitives change blocks.

Most annotation keys are free-form (``annotate`` stores any value), but some are read by the
lowering or by the tuner's postprocessors, and a bad value there would fail the build much
later, far from its cause. :func:`check_annotation` refuses such values up front.

``buffer_dim_align`` (written by ``storage_align``) names buffers by their position among the
block's *write* regions, so it goes stale when a primitive changes what a block writes:
:func:`carry_dim_align` re-targets the entries of an old block onto a new one by buffer, and
drops those whose buffer the new block no longer writes, or that are not allocated in the
function (an alignment pads a buffer's allocation; a function parameter has none, and padding
its strides would write the output in the wrong places).
"""
from __future__ import annotations

from typing import Any, Callable, Iterable

from workbench.ir.node import FrozenDict
from workbench.tir.buffer import Buffer
from workbench.tir.schedule.error import ScheduleError
from workbench.tir.stmt import Block

DIM_ALIGN_KEY = "buffer_dim_align"


def freeze_value(value: Any) -> Any:
    """Lists become tuples (recursively): an annotation replayed from a JSON trace must equal
    the one the schedule made."""
    if isinstance(value, (list, tuple)):
        return tuple(freeze_value(v) for v in value)
    return value


def _non_negative_int(value: Any) -> str | None:
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        return f"needs a non-negative int, got {value!r}"
    return None


def _flag(value: Any) -> str | None:
    if not isinstance(value, int) or value not in (0, 1):
        return f"needs 0 or 1 (or a bool), got {value!r}"
    return None


# Keys the lowering (unroll_loop) or the tuner's postprocessors interpret, with their rule.
_VALUE_RULES: dict[str, Callable[[Any], str | None]] = {
    "pragma_auto_unroll_max_step": _non_negative_int,
    "pragma_unroll_explicit": _flag,
    "meta_schedule.parallel": _non_negative_int,
    "meta_schedule.vectorize": _non_negative_int,
    "meta_schedule.unroll_explicit": _non_negative_int,
    "meta_schedule.unroll_implicit": _non_negative_int,
}


def check_annotation(subject: str, key: str, value: Any, block: Block | None,
                     allocated: Callable[[Buffer], bool]) -> None:
    """Raise ScheduleError (primitive ``annotate``) if ``value`` is not valid for a key the
    compiler reads. ``block`` is the annotated block (None for a loop); ``allocated(buf)``
    says whether a buffer is allocated by a block of the function."""
    rule = _VALUE_RULES.get(key)
    problem = rule(value) if rule is not None else None
    if key == DIM_ALIGN_KEY and block is not None:
        problem = dim_align_problem(block, value, allocated)
    if problem is not None:
        raise ScheduleError("annotate", subject, f"annotation {key!r} is read by the compiler "
                            f"and {problem}")


def dim_align_problem(block: Block, value: Any, allocated: Callable[[Buffer], bool]
                      ) -> str | None:
    """Why ``value`` is not a valid ``buffer_dim_align`` for ``block``, or None."""
    if not isinstance(value, tuple):
        return f"needs a tuple of (buffer_index, axis, factor, offset) entries, got {value!r}"
    for entry in value:
        if not (isinstance(entry, tuple) and len(entry) == 4 and
                all(isinstance(x, int) and not isinstance(x, bool) for x in entry)):
            return f"needs (buffer_index, axis, factor, offset) int entries, got {entry!r}"
        k, axis, factor, offset = entry
        if not 0 <= k < len(block.writes):
            return f"entry {entry} names write buffer {k}, but the block writes " \
                   f"{len(block.writes)} buffer(s)"
        buf = block.writes[k].buffer
        if not 0 <= axis < len(buf.shape):
            return f"entry {entry} names axis {axis} of the {len(buf.shape)}-d buffer {buf.name!r}"
        if factor < 1 or offset < 0:
            return f"entry {entry} needs factor >= 1 and offset >= 0"
        if not allocated(buf):
            return f"entry {entry} names {buf.name!r}, which no block allocates (a function " \
                   "parameter cannot be padded)"
    return None


def carry_dim_align(old: Block, new: Block, keep: Callable[[Buffer], bool],
                    extra: Iterable[tuple[Buffer, int, int, int]] = ()) -> Block:
    """``new`` with the ``buffer_dim_align`` entries of ``old`` re-targeted by buffer: an entry
    for ``old.writes[k].buffer`` moves to that buffer's position in ``new.writes``; it is
    dropped when ``new`` does not write the buffer or ``keep(buffer)`` is false. ``extra``
    entries ``(buffer, axis, factor, offset)`` (from a block folded into ``new``) are added
    the same way. Returns ``new`` itself when nothing changes."""
    entries = [(old.writes[k].buffer, axis, factor, offset)
               for k, axis, factor, offset in old.annotations.get(DIM_ALIGN_KEY, ())
               if 0 <= k < len(old.writes)]
    entries += list(extra)
    if not entries and DIM_ALIGN_KEY not in new.annotations:
        return new
    position = {w.buffer: k for k, w in enumerate(new.writes)}
    out: list[tuple[int, int, int, int]] = []
    for buf, axis, factor, offset in entries:
        k = position.get(buf)
        if k is None or not keep(buf) or not 0 <= axis < len(buf.shape):
            continue
        entry = (k, axis, factor, offset)
        out = [e for e in out if e[:2] != entry[:2]] + [entry]
    annotations = new.annotations.without(DIM_ALIGN_KEY) if DIM_ALIGN_KEY in new.annotations \
        else new.annotations
    if out:
        annotations = FrozenDict({**annotations, DIM_ALIGN_KEY: tuple(out)})
    if annotations == new.annotations:
        return new
    return new.replace(annotations=annotations)


def allocated_buffers(blocks: Iterable[Block]) -> set[Buffer]:
    """The buffers the given blocks allocate."""
    return {buf for b in blocks for buf in b.alloc_buffers}


def dim_align_entries(block: Block) -> list[tuple[Buffer, int, int, int]]:
    """The block's alignment entries with their buffers: ``(buffer, axis, factor, offset)``."""
    return [(block.writes[k].buffer, axis, factor, offset)
            for k, axis, factor, offset in block.annotations.get(DIM_ALIGN_KEY, ())
            if 0 <= k < len(block.writes)]


__all__ = ["DIM_ALIGN_KEY", "freeze_value", "check_annotation", "dim_align_problem",
           "carry_dim_align", "dim_align_entries", "allocated_buffers"]

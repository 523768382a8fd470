"""Non-maximum suppression over every class (TVM's ``all_class_non_max_suppression``, ONNX's
``NonMaxSuppression`` rule, onnxruntime's arithmetic) as one hand-built TIR kernel.

For each image ``b`` and class ``c``: the candidates are the boxes whose score passes the
threshold (``score > score_threshold``; a threshold of -inf passes every box), taken in index
order and merge-sorted (stable) by descending score, so ties keep the lower box index first.
Visiting them in that order, a box is selected while fewer than
``max_output_boxes_per_class`` boxes of the class are, when its IoU with every box already
selected for the class is at most ``iou_threshold``. The selections are written one after
another, image by image and class by class, as rows ``(b, c, box)`` of the padded output
``(B * C * K, 3)`` (``K``: a bound on the boxes any class can keep), and their number into
``count`` ``(1,)`` (the rows after them are zeros); the caller slices the first ``count``
rows.

IoU follows onnxruntime's ``SuppressByIOU`` step by step, so a pair at the threshold is decided
the same way: corners in either order (``center_point_box=0``: ``[y1, x1, y2, x2]`` with each
pair ordered by min / max; ``1``: ``[x_center, y_center, width, height]``, half sizes
``w / 2``); no overlap, an empty intersection or a box of zero (or negative) area never
suppresses.

Why hand-built rather than ``te.compute`` stages: greedy selection is a recurrence (whether a
box is kept depends on which earlier boxes were kept), which a fixed set of te stages cannot
state, and a sort as te stages (a rank per element) costs ``O(N^2)`` per class. The kernel is
one opaque, serial block: per class ``O(N log N)`` for the sort and one IoU test per
(candidate visited, box kept before it); the padded output and scratch are ``O(N)``.
"""
from __future__ import annotations

from typing import Callable

from workbench.tir import op
from workbench.tir.buffer import Buffer, BufferRegion, decl_buffer
from workbench.tir.expr import PrimExpr, Var
from workbench.tir.function import PrimFunc, prim_func
from workbench.tir.stmt import Block, BlockRealize, BufferStore, For, ForKind, IfThenElse, \
    LetStmt, SeqStmt, Stmt

__all__ = ["all_class_non_max_suppression", "BLOCK_NAME"]

#: The name of the kernel's (only) block.
BLOCK_NAME = "all_class_nms"
_F32, _I32, _I64 = "float32", "int32", "int64"


def all_class_non_max_suppression(batch: int, num_classes: int, num_boxes: int,
                                  max_keep: int, center_point_box: int = 0) -> PrimFunc:
    """The PrimFunc ``(boxes, scores, max_output_boxes_per_class, iou_threshold,
    score_threshold, selected, count)``: ``boxes`` (B, N, 4) float32, ``scores`` (B, C, N)
    float32, the three thresholds as (1,) tensors (int64, float32, float32); ``selected`` (B * C * max_keep, 3)
    int64 (rows past the selections zero) and ``count`` (1,) int64 are written. ``max_keep`` (``1 <= max_keep <= N``) bounds
    the boxes a class keeps whatever ``max_output_boxes_per_class`` says at run time."""
    dims = (batch, num_classes, num_boxes, max_keep)
    if not all(isinstance(d, int) and d > 0 for d in dims):
        raise ValueError(f"all_class_non_max_suppression: batch, classes, boxes and max_keep "
                         f"must be positive ints, got {dims}")
    if max_keep > num_boxes:
        raise ValueError(f"all_class_non_max_suppression: max_keep ({max_keep}) exceeds the "
                         f"number of boxes ({num_boxes})")
    if center_point_box not in (0, 1):
        raise ValueError(f"all_class_non_max_suppression: center_point_box must be 0 or 1, "
                         f"got {center_point_box!r}")
    boxes = decl_buffer((batch, num_boxes, 4), _F32, "boxes")
    scores = decl_buffer((batch, num_classes, num_boxes), _F32, "scores")
    max_out = decl_buffer((1,), _I64, "max_output_boxes_per_class")
    iou_thr = decl_buffer((1,), _F32, "iou_threshold")
    score_thr = decl_buffer((1,), _F32, "score_threshold")
    selected = decl_buffer((batch * num_classes * max_keep, 3), _I64, "selected_indices")
    count = decl_buffer((1,), _I64, "num_selected")
    inputs = [boxes, scores, max_out, iou_thr, score_thr]
    outputs = [selected, count]
    block = _block(dims, center_point_box, inputs, outputs)
    root = Block((), tuple(BufferRegion.full(b) for b in inputs),
                 tuple(BufferRegion.full(b) for b in outputs), "root",
                 BlockRealize((), op.const(True), block))
    return prim_func(inputs + outputs, BlockRealize((), op.const(True), root))


def _corners(boxes: Buffer, b: PrimExpr, i: PrimExpr, center: int) -> tuple[PrimExpr, ...]:
    """``(x_min, x_max, y_min, y_max)`` of box ``i`` of image ``b``, as onnxruntime forms
    them."""
    v = [boxes[b, i, _i(k)] for k in range(4)]
    if center == 0:   # [y1, x1, y2, x2], either corner first
        return op.min(v[1], v[3]), op.max(v[1], v[3]), op.min(v[0], v[2]), op.max(v[0], v[2])
    two = op.const(2.0, _F32)
    hw, hh = op.div(v[2], two), op.div(v[3], two)
    return op.sub(v[0], hw), op.add(v[0], hw), op.sub(v[1], hh), op.add(v[1], hh)


def _suppresses(boxes: Buffer, b: PrimExpr, i: PrimExpr, j: PrimExpr, center: int,
                threshold: PrimExpr) -> PrimExpr:
    """Whether boxes ``i`` and ``j`` overlap by more than ``threshold`` (onnxruntime's
    ``SuppressByIOU``: every early ``return false`` is a conjunct)."""
    ax0, ax1, ay0, ay1 = _corners(boxes, b, i, center)
    bx0, bx1, by0, by1 = _corners(boxes, b, j, center)
    ix0, ix1 = op.max(ax0, bx0), op.min(ax1, bx1)
    iy0, iy1 = op.max(ay0, by0), op.min(ay1, by1)
    zero = op.const(0.0, _F32)
    inter = op.mul(op.sub(ix1, ix0), op.sub(iy1, iy0))
    area_a = op.mul(op.sub(ax1, ax0), op.sub(ay1, ay0))
    area_b = op.mul(op.sub(bx1, bx0), op.sub(by1, by0))
    union = op.sub(op.add(area_a, area_b), inter)
    conds = [op.gt(ix1, ix0), op.gt(iy1, iy0), op.gt(inter, zero), op.gt(area_a, zero),
             op.gt(area_b, zero), op.gt(union, zero), op.gt(op.div(inter, union), threshold)]
    out = conds[0]
    for c in conds[1:]:
        out = op.logical_and(out, c)
    return out


def _block(dims: tuple[int, int, int, int], center: int, inputs: list[Buffer],
           outputs: list[Buffer]) -> Block:
    """Per image and class: the candidates (boxes whose score passes) in index order, a
    stable merge sort of them by descending score, then the greedy selection."""
    batch, classes, n, keep = dims
    boxes, scores, max_out, iou_thr, score_thr = inputs
    selected, count = outputs
    # cand[0] / cand[1]: a class's candidates (box indices), sorted back and forth between
    # the two rows; kept: the boxes the class selected so far.
    cand = decl_buffer((2, n), _I32, "candidates")
    kept = decl_buffer((keep,), _I32, "kept")
    # state: rows written so far, this class's selections, the box under test survives,
    # candidates, and the merge's two read positions.
    state = decl_buffer((6,), _I32, "state")
    total, nsel, alive, m, left, right = ((_i(k),) for k in range(6))
    limit = op.cast(_I32, op.min(op.max(max_out[_i(0)], op.const(0, _I64)),
                                 op.const(keep, _I64)))
    threshold = score_thr[_i(0)]
    neg_inf = op.neg(op.infinity(_F32))

    def put(slot: tuple, value: PrimExpr) -> Stmt:
        return BufferStore(state, value, slot)

    def bump(slot: tuple) -> Stmt:
        return put(slot, op.add(state[slot], _i(1)))

    def gather(b: Var, c: Var) -> Stmt:
        passes = lambda j: op.logical_or(op.gt(scores[b, c, j], threshold),  # noqa: E731
                                         op.eq(threshold, neg_inf))
        return _seq(put(m, _i(0)), _for("j", n, lambda j: IfThenElse(passes(j), _seq(
            BufferStore(cand, j, (_i(0), state[m])), bump(m)))))

    def merge_pass(b: Var, c: Var, width: int, src: int) -> Stmt:
        """Sorted runs of ``width`` in ``cand[src]`` -> runs of ``2 width`` in the other
        row; ties take the left run first (stable)."""
        s, d = _i(src), _i(1 - src)

        def key(pos: PrimExpr) -> PrimExpr:
            return scores[b, c, cand[s, pos]]

        def run(blk: Var) -> Stmt:
            lo = op.mul(blk, _i(2 * width))
            mid = op.min(op.add(lo, _i(width)), state[m])
            hi = op.min(op.add(lo, _i(2 * width)), state[m])
            out = lambda t: op.add(lo, t)  # noqa: E731
            take = lambda t, slot: _seq(  # noqa: E731
                BufferStore(cand, cand[s, state[slot]], (d, out(t))), bump(slot))
            # Statements, not a select: a position past its run must not be read.
            step = lambda t: IfThenElse(op.lt(out(t), hi), IfThenElse(  # noqa: E731
                op.ge(state[right], hi), take(t, left), IfThenElse(
                    op.ge(state[left], mid), take(t, right), IfThenElse(
                        op.gt(key(state[right]), key(state[left])), take(t, right),
                        take(t, left)))))
            return IfThenElse(op.lt(lo, state[m]), _seq(
                put(left, lo), put(right, mid), _for("t", min(2 * width, n), step)))
        return _for("blk", -(-n // (2 * width)), run)

    def select(b: Var, c: Var, row: int) -> Stmt:
        def visit(j: Var) -> Stmt:
            box = cand[_i(row), j]
            nk, t = Var("num_kept", _I32), Var("t", _I32)
            # Only the boxes kept so far: a loop to the class's count, not to ``keep``.
            test = LetStmt(nk, state[nsel], For(t, _i(0), nk, ForKind.SERIAL, IfThenElse(
                _suppresses(boxes, b, kept[t], box, center, iou_thr[_i(0)]),
                put(alive, _i(0)))))
            at = op.add(state[total], state[nsel])
            take = _seq(
                BufferStore(kept, box, (state[nsel],)),
                BufferStore(selected, op.cast(_I64, b), (at, _i(0))),
                BufferStore(selected, op.cast(_I64, c), (at, _i(1))),
                BufferStore(selected, op.cast(_I64, box), (at, _i(2))),
                bump(nsel))
            return IfThenElse(op.logical_and(op.lt(j, state[m]), op.lt(state[nsel], limit)),
                              _seq(put(alive, _i(1)), test,
                                   IfThenElse(op.eq(state[alive], _i(1)), take)))
        return _for("j", n, visit)

    def per_class(b: Var, c: Var) -> Stmt:
        stmts, width, row = [gather(b, c)], 1, 0
        while width < n:
            stmts.append(merge_pass(b, c, width, row))
            width, row = 2 * width, 1 - row
        return _seq(*stmts, put(nsel, _i(0)), select(b, c, row),
                    put(total, op.add(state[total], state[nsel])))

    # Rows past the selections are zeros: the output is then a function of the inputs alone.
    clear = _for("r", batch * classes * keep, lambda r: IfThenElse(
        op.ge(r, state[total]), _for("k", 3, lambda k: BufferStore(
            selected, op.const(0, _I64), (r, k)))))
    body = _seq(put(total, _i(0)),
                _for("b", batch, lambda b: _for("c", classes, lambda c: per_class(b, c))),
                BufferStore(count, op.cast(_I64, state[total]), (_i(0),)), clear)
    return Block((), tuple(BufferRegion.full(b) for b in inputs),
                 tuple(BufferRegion.full(b) for b in outputs), BLOCK_NAME, body,
                 alloc_buffers=(cand, kept, state))


def _i(v: int) -> PrimExpr:
    return op.const(v, _I32)


def _seq(*stmts: Stmt) -> Stmt:
    return SeqStmt(tuple(stmts)) if len(stmts) > 1 else stmts[0]


def _for(name: str, extent: int, body: Callable[[Var], Stmt]) -> Stmt:
    lv = Var(name, _I32)
    return For(lv, _i(0), _i(extent), ForKind.SERIAL, body(lv))

"""Non-maximum suppression over every class (TVM's ``all_class_non_max_suppression``, ONNX's
``NonMaxSuppression`` rule, onnxruntime's arithmetic) as one hand-built TIR kernel.

For each image ``b`` and class ``c``: the candidates are the boxes whose score passes the
threshold (``score > score_threshold``; a threshold of -inf passes every box), put in a
binary heap ordered by descending score, ties by ascending box index (onnxruntime's order).
Popped in that order, a candidate is selected when its IoU with every box already selected
for the class is at most ``iou_threshold``, until ``max_output_boxes_per_class`` boxes are
selected or no candidate is left. The selections are written one after another, image by
image and class by class, as rows ``(b, c, box)`` of the padded output ``(B * C * K, 3)``
(``K``: a bound on the boxes any class can keep), and their number into ``count`` ``(1,)``
(the rows after them are zeros); the caller slices the first ``count`` rows.

IoU follows onnxruntime's ``SuppressByIOU`` step by step, so a pair at the threshold is decided
the same way: corners in either order (``center_point_box=0``: ``[y1, x1, y2, x2]`` with each
pair ordered by min / max; ``1``: ``[x_center, y_center, width, height]``, half sizes
``w / 2``); no overlap, an empty intersection or a box of zero (or negative) area never
suppresses.

Why hand-built rather than ``te.compute`` stages: greedy selection is a recurrence (whether a
box is kept depends on which earlier boxes were kept), which a fixed set of te stages cannot
state, and a sort as te stages (a rank per element) costs ``O(N^2)`` per class. The kernel is
one opaque, serial block: per class ``O(N)`` to build the heap, ``O(log N)`` per candidate
popped, and IoU tests of a candidate against the kept boxes until one suppresses it -- the
work onnxruntime's priority queue does. (A full merge sort of the candidates instead was
3-4x slower at YOLO's 80 x 10647 boxes: most candidates are never popped.)
"""
from __future__ import annotations

from typing import Callable

from workbench.tir import op
from workbench.tir.buffer import Buffer, BufferRegion, decl_buffer
from workbench.tir.expr import PrimExpr, Var
from workbench.tir.function import PrimFunc, prim_func
from workbench.tir.stmt import Block, BlockRealize, BufferStore, For, ForKind, IfThenElse, \
    LetStmt, SeqStmt, Stmt, While

__all__ = ["all_class_non_max_suppression", "BLOCK_NAME"]

#: The name of the kernel's (only) block.
BLOCK_NAME = "all_class_nms"
_F32, _I32, _I64 = "float32", "int32", "int64"


def all_class_non_max_suppression(batch: int, num_classes: int, num_boxes: int,
                                  max_keep: int, center_point_box: int = 0) -> PrimFunc:
    """The PrimFunc ``(boxes, scores, max_output_boxes_per_class, iou_threshold,
    score_threshold, selected, count)``: ``boxes`` (B, N, 4) float32, ``scores`` (B, C, N)
    float32, the three thresholds as (1,) tensors (int64, float32, float32); ``selected``
    (B * C * max_keep, 3) int64 (rows past the selections zero) and ``count`` (1,) int64 are
    written. ``max_keep`` (``1 <= max_keep <= N``) bounds the boxes a class keeps whatever
    ``max_output_boxes_per_class`` says at run time."""
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
    """Per image and class: a heap of the candidates (boxes whose score passes), popped in
    order -- by descending score, ties by ascending box index -- into the greedy selection
    until the class has its boxes or no candidate is left."""
    batch, classes, n, keep = dims
    boxes, scores, max_out, iou_thr, score_thr = inputs
    selected, count = outputs
    # The heap's scores and box indices side by side (the comparisons read no box data);
    # kept: the boxes the class selected so far.
    h_score = decl_buffer((n,), _F32, "heap_scores")
    h_box = decl_buffer((n,), _I32, "heap_boxes")
    kept = decl_buffer((keep,), _I32, "kept")
    # state: rows written so far, this class's selections, the box under test survives, the
    # heap's size, a sift's position / child / "go on" flag, the kept box tested against, and
    # the box popped.
    state = decl_buffer((9,), _I32, "state")
    total, nsel, alive, size, at, child, go, pos, box = ((_i(k),) for k in range(9))
    limit = op.cast(_I32, op.min(op.max(max_out[_i(0)], op.const(0, _I64)),
                                 op.const(keep, _I64)))
    threshold = score_thr[_i(0)]
    neg_inf = op.neg(op.infinity(_F32))

    def put(slot: tuple, value: PrimExpr) -> Stmt:
        return BufferStore(state, value, slot)

    def bump(slot: tuple, by: int = 1) -> Stmt:
        return put(slot, op.add(state[slot], _i(by)))

    def before(a: PrimExpr, b: PrimExpr) -> PrimExpr:
        """Heap entry ``a`` pops before ``b``: a higher score, or the same and a lower box."""
        return op.logical_or(op.gt(h_score[a], h_score[b]), op.logical_and(
            op.eq(h_score[a], h_score[b]), op.lt(h_box[a], h_box[b])))

    def sift_down(start: PrimExpr) -> Stmt:
        """Move the entry at ``start`` down to its place in the heap of ``state[size]``."""
        here, kid = state[at], state[child]
        swap = put(at, kid)
        for buf in (h_box, h_score):      # h_score's swap first, then h_box's, then the put
            swap = _swap(buf, here, kid, swap)
        # Statements, not selects: an entry past the heap must not be compared.
        return _seq(put(at, start), put(go, _i(1)), While(op.eq(state[go], _i(1)), _seq(
            put(child, op.add(op.mul(here, _i(2)), _i(1))),
            IfThenElse(op.lt(op.add(kid, _i(1)), state[size]), IfThenElse(
                before(op.add(kid, _i(1)), kid), bump(child))),
            IfThenElse(op.lt(kid, state[size]),
                       IfThenElse(before(kid, here), swap, put(go, _i(0))),
                       put(go, _i(0))))))

    def build(b: Var, c: Var) -> Stmt:
        passes = lambda j: op.logical_or(op.gt(scores[b, c, j], threshold),  # noqa: E731
                                         op.eq(threshold, neg_inf))
        gather = _for("j", n, lambda j: IfThenElse(passes(j), _seq(
            BufferStore(h_score, scores[b, c, j], (state[size],)),
            BufferStore(h_box, j, (state[size],)), bump(size))))
        # Heapify: sift down every entry with a child, the last first.
        last = n // 2 - 1
        heapify = _for("k", n // 2, lambda k: IfThenElse(
            op.lt(op.add(op.mul(op.sub(_i(last), k), _i(2)), _i(1)), state[size]),
            sift_down(op.sub(_i(last), k))))
        return _seq(put(size, _i(0)), gather, heapify)

    def select(b: Var, c: Var) -> Stmt:
        top = state[box]
        # Against the boxes kept so far, until one suppresses it.
        test = _seq(put(pos, _i(0)), While(
            op.logical_and(op.lt(state[pos], state[nsel]), op.eq(state[alive], _i(1))),
            _seq(IfThenElse(_suppresses(boxes, b, kept[state[pos]], top, center,
                                        iou_thr[_i(0)]), put(alive, _i(0))), bump(pos))))
        row = op.add(state[total], state[nsel])
        take = _seq(
            BufferStore(kept, top, (state[nsel],)),
            BufferStore(selected, op.cast(_I64, b), (row, _i(0))),
            BufferStore(selected, op.cast(_I64, c), (row, _i(1))),
            BufferStore(selected, op.cast(_I64, top), (row, _i(2))),
            bump(nsel))
        last = op.sub(state[size], _i(1))
        pop = _seq(put(box, h_box[_i(0)]),
                   BufferStore(h_score, h_score[last], (_i(0),)),
                   BufferStore(h_box, h_box[last], (_i(0),)),
                   bump(size, -1), sift_down(_i(0)))
        return While(op.logical_and(op.gt(state[size], _i(0)), op.lt(state[nsel], limit)),
                     _seq(pop, put(alive, _i(1)), test,
                          IfThenElse(op.eq(state[alive], _i(1)), take)))

    def per_class(b: Var, c: Var) -> Stmt:
        return _seq(build(b, c), put(nsel, _i(0)), select(b, c),
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
                 alloc_buffers=(h_score, h_box, kept, state))


def _swap(buf: Buffer, i: PrimExpr, j: PrimExpr, then: Stmt) -> Stmt:
    """Exchange ``buf[i]`` and ``buf[j]`` (a let holds the first), then run ``then`` inside the
    let's body: a let followed by siblings prints like one whose body holds them (TVMScript
    scopes a let to the end of its block), so the text would not read back the same."""
    tmp = Var(f"{buf.name}_tmp", buf.dtype)
    return LetStmt(tmp, buf[i], _seq(BufferStore(buf, buf[j], (i,)),
                                     BufferStore(buf, tmp, (j,)), then))


def _i(v: int) -> PrimExpr:
    return op.const(v, _I32)


def _seq(*stmts: Stmt) -> Stmt:
    return SeqStmt(tuple(stmts)) if len(stmts) > 1 else stmts[0]


def _for(name: str, extent: int, body: Callable[[Var], Stmt]) -> Stmt:
    lv = Var(name, _I32)
    return For(lv, _i(0), _i(extent), ForKind.SERIAL, body(lv))

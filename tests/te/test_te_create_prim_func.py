"""Structure of the block-form PrimFuncs made by te.create_prim_func (docs/internals.md)."""
from __future__ import annotations

import pytest

from workbench import te, tir
from workbench.tir.stmt import BlockRealize, ForKind, IterType, LetStmt

from te_text import fmt, regions, stages

S, R = IterType.DATA_PAR, IterType.COMM_REDUCE


def _block(func, stage=0):
    loops, realize = stages(func)[stage]
    assert isinstance(realize, BlockRealize)
    return loops, realize, realize.block


def _matmul(n=8, m=6, k_=4, dtype="float32"):
    A = te.placeholder((n, k_), dtype, name="A")
    B = te.placeholder((k_, m), dtype, name="B")
    k = te.reduce_axis((0, k_), name="k")
    C = te.compute((n, m), lambda i, j: te.sum(A[i, k] * B[k, j], axis=k), name="C")
    return A, B, C


def test_elementwise_structure():
    A = te.placeholder((4, 5), name="A")
    B = te.compute((4, 5), lambda i, j: A[i, j] * 2.0 + 1.0, name="B")
    f = te.create_prim_func([A, B])
    assert [f.buffer_map[p].name for p in f.params] == ["A", "B"]
    assert f.attrs["global_symbol"] == "main" and f.attrs["tir.noalias"] is True
    root = f.body
    assert isinstance(root, BlockRealize) and root.iter_values == ()
    assert root.block.name_hint == "root" and root.block.alloc_buffers == ()
    assert root.block.iter_vars == () and root.block.reads == () and root.block.writes == ()
    loops, realize, blk = _block(f)
    assert loops == [("i", "0", "4"), ("j", "0", "5")]
    assert blk.name_hint == "B"
    assert [iv.var.name for iv in blk.iter_vars] == ["v_i", "v_j"]
    assert [iv.iter_type for iv in blk.iter_vars] == [S, S]
    assert [fmt(iv.dom) for iv in blk.iter_vars] == ["0:+4", "0:+5"]
    assert [fmt(v) for v in realize.iter_values] == ["i", "j"]
    assert fmt(realize.predicate) == "True"
    assert fmt(blk.body) == "B[v_i, v_j] = ((A[v_i, v_j] * float32(2)) + float32(1))"
    assert regions(blk.reads) == ["A[v_i:+1, v_j:+1]"]
    assert regions(blk.writes) == ["B[v_i:+1, v_j:+1]"]
    assert blk.init is None
    # Block variables are fresh: not the te axis vars, not the loop vars.
    assert blk.iter_vars[0].var is not B.op.axis[0].var
    assert blk.iter_vars[0].var is not realize.iter_values[0]


def test_loops_are_serial_and_buffers_are_the_tensors_buffers():
    A = te.placeholder((3,), name="A")
    B = te.compute((3,), lambda i: A[i] + 1.0, name="B")
    f = te.create_prim_func([A, B])
    assert f.body.block.body.kind == ForKind.SERIAL
    assert f.buffer_map[f.params[0]] is A.buffer and f.buffer_map[f.params[1]] is B.buffer


def test_broadcast_reads_the_smaller_tensor_by_one_axis():
    A = te.placeholder((5,), name="A")
    B = te.placeholder((4, 5), name="B")
    C = te.compute((4, 5), lambda i, j: A[j] + B[i, j], name="C")
    _, _, blk = _block(te.create_prim_func([A, B, C]))
    assert regions(blk.reads) == ["A[v_j:+1]", "B[v_i:+1, v_j:+1]"]


def test_matmul_reduction_block():
    A, B, C = _matmul()
    f = te.create_prim_func([A, B, C])
    loops, realize, blk = _block(f)
    assert loops == [("i", "0", "8"), ("j", "0", "6"), ("k", "0", "4")]
    assert [iv.iter_type for iv in blk.iter_vars] == [S, S, R]
    assert [iv.var.name for iv in blk.iter_vars] == ["v_i", "v_j", "v_k"]
    assert fmt(blk.init) == "C[v_i, v_j] = float32(0)"
    assert fmt(blk.body) == "C[v_i, v_j] = (C[v_i, v_j] + (A[v_i, v_k] * B[v_k, v_j]))"
    # The accumulated buffer is written, not listed among the reads (TVM's convention).
    assert regions(blk.reads) == ["A[v_i:+1, v_k:+1]", "B[v_k:+1, v_j:+1]"]
    assert regions(blk.writes) == ["C[v_i:+1, v_j:+1]"]
    assert C.op.reduce_axis[0].var.name == "k"


def test_min_max_identities():
    A = te.placeholder((4, 5), name="A")
    k = te.reduce_axis((0, 5), name="k")
    Mx = te.compute((4,), lambda i: te.max(A[i, k], axis=k), name="Mx")
    Mn = te.compute((4,), lambda i: te.min(A[i, k], axis=k), name="Mn")
    f = te.create_prim_func([A, Mx, Mn])
    b0, b1 = _block(f, 0)[2], _block(f, 1)[2]
    assert fmt(b0.init) == "Mx[v_i] = float32(-3.40282e+38)"
    assert fmt(b0.body) == "Mx[v_i] = max(Mx[v_i], A[v_i, v_k])"
    assert fmt(b1.init) == "Mn[v_i] = float32(3.40282e+38)"


def test_two_stage_pipeline_allocates_the_intermediate_at_root():
    A = te.placeholder((4, 4), name="A")
    B = te.compute((4, 4), lambda i, j: A[i, j] + 1.0, name="B")
    C = te.compute((4, 4), lambda i, j: B[i, j] * 2.0, name="C")
    f = te.create_prim_func([A, C])
    assert [b.name for b in f.body.block.alloc_buffers] == ["B"]
    assert [f.buffer_map[p].name for p in f.params] == ["A", "C"]
    names = [s[1].block.name_hint for s in stages(f)]
    assert names == ["B", "C"]
    assert regions(_block(f, 1)[2].reads) == ["B[v_i:+1, v_j:+1]"]


def test_stage_order_follows_dependencies_not_creation():
    A = te.placeholder((4,), name="A")
    X = te.compute((4,), lambda i: A[i] + 1.0, name="X")
    Y = te.compute((4,), lambda i: A[i] * 2.0, name="Y")
    Z = te.compute((4,), lambda i: Y[i] + X[i], name="Z")
    f = te.create_prim_func([A, Z])
    assert [s[1].block.name_hint for s in stages(f)] == ["Y", "X", "Z"]
    assert [b.name for b in f.body.block.alloc_buffers] == ["Y", "X"]


def test_intermediate_listed_as_argument_is_a_parameter_not_an_allocation():
    A = te.placeholder((4,), name="A")
    B = te.compute((4,), lambda i: A[i] + 1.0, name="B")
    C = te.compute((4,), lambda i: B[i] * 2.0, name="C")
    f = te.create_prim_func([A, B, C])
    assert f.body.block.alloc_buffers == ()
    assert len(f.params) == 3


def test_duplicate_op_names_get_unique_block_names():
    A = te.placeholder((4,), name="A")
    B = te.compute((4,), lambda i: A[i] + 1.0, name="T")
    C = te.compute((4,), lambda i: B[i] + 1.0, name="T")
    f = te.create_prim_func([A, C])
    assert [s[1].block.name_hint for s in stages(f)] == ["T", "T_1"]


def test_padding_with_if_then_else_and_conv2d():
    n, h, w, kh = 1, 5, 5, 3
    A = te.placeholder((n, h, w), name="A")
    W = te.placeholder((kh, kh), name="W")
    P = te.compute(
        (n, h + 2, w + 2),
        lambda b, y, x: te.if_then_else(
            te.all(y >= 1, y < h + 1, x >= 1, x < w + 1), A[b, y - 1, x - 1], 0.0),
        name="pad")
    ry = te.reduce_axis((0, kh), name="ry")
    rx = te.reduce_axis((0, kh), name="rx")
    O = te.compute((n, h, w), lambda b, y, x: te.sum(P[b, y + ry, x + rx] * W[ry, rx],
                                                     axis=[ry, rx]), name="conv")
    f = te.create_prim_func([A, W, O])
    _, _, pad = _block(f, 0)
    assert "if_then_else(" in fmt(pad.body)
    assert regions(pad.reads) == ["A[v_b:+1, (v_y - 1):+1, (v_x - 1):+1]"]
    loops, _, conv = _block(f, 1)
    assert [l[0] for l in loops] == ["b", "y", "x", "ry", "rx"]
    assert [iv.iter_type for iv in conv.iter_vars] == [S, S, S, R, R]
    assert regions(conv.reads) == ["pad[v_b:+1, (v_y + v_ry):+1, (v_x + v_rx):+1]",
                                   "W[v_ry:+1, v_rx:+1]"]
    assert [b.name for b in f.body.block.alloc_buffers] == ["pad"]


def test_region_of_several_accesses_is_their_span_or_bounding_box():
    A = te.placeholder((10,), name="A")
    st = te.compute((8,), lambda i: A[i] + A[i + 1] + A[i + 2], name="st")
    _, _, blk = _block(te.create_prim_func([A, st]))
    assert regions(blk.reads) == ["A[v_i:+3]"]
    # Different strides: the bounding box over v_i in [0, 4).
    B = te.compute((4,), lambda i: A[i] + A[i * 2 + 1], name="B")
    _, _, blk = _block(te.create_prim_func([A, B]))
    assert regions(blk.reads) == ["A[0:+8]"]
    # A data-dependent index reads the whole dimension.
    idx = te.placeholder((4,), "int32", name="idx")
    G = te.compute((4,), lambda i: A[idx[i]], name="G")
    _, _, blk = _block(te.create_prim_func([A, idx, G]))
    assert regions(blk.reads) == ["A[0:+10]", "idx[v_i:+1]"]


def test_bound_helper_floordiv_floormod_and_symbolic():
    from workbench.te.regions import bound
    v, n = tir.Var("v"), tir.SizeVar("n")
    dom = {v: (tir.const(0), n - 1)}
    lo, hi = bound(v // 4 - 1, dom)
    assert (fmt(lo), fmt(hi)) == ("-1", "(((n - 1) // 4) - 1)")
    lo, hi = bound((v % 4) * -2, dom)
    assert (fmt(lo), fmt(hi)) == ("-6", "0")
    assert bound(v * v, dom) is None


def _argmax():
    def fcombine(x, y):
        lhs = te.select(x[1] >= y[1], x[0], y[0])
        rhs = te.select(x[1] >= y[1], x[1], y[1])
        return lhs, rhs

    def fidentity(t0, t1):
        return te.const(-1, t0), te.min_value(t1)

    return te.comm_reducer(fcombine, fidentity, name="argmax")


def test_argmax_writes_two_buffers_in_one_block():
    argmax = _argmax()
    A = te.placeholder((4, 6), name="A")
    k = te.reduce_axis((0, 6), name="k")
    idx, val = te.compute((4,), lambda i: argmax((k.var, A[i, k]), axis=k), name="T")
    assert (idx.name, val.name, idx.dtype, val.dtype) == ("T_v0", "T_v1", "int32", "float32")
    assert idx.op is val.op and (idx.value_index, val.value_index) == (0, 1)
    f = te.create_prim_func([A, idx, val])
    stage_list = stages(f)
    assert len(stage_list) == 1
    _, _, blk = _block(f)
    assert blk.name_hint == "T"
    assert regions(blk.writes) == ["T_v0[v_i:+1]", "T_v1[v_i:+1]"]
    assert regions(blk.reads) == ["A[v_i:+1, v_k:+1]"]
    assert fmt(blk.init) == "T_v0[v_i] = -1; T_v1[v_i] = float32(-3.40282e+38)"
    assert isinstance(blk.body, LetStmt)
    assert fmt(blk.body) == (
        "let v_T_v0 = select((T_v1[v_i] >= A[v_i, v_k]), T_v0[v_i], v_k); "
        "let v_T_v1 = select((T_v1[v_i] >= A[v_i, v_k]), T_v1[v_i], A[v_i, v_k]); "
        "T_v0[v_i] = v_T_v0; T_v1[v_i] = v_T_v1")


def test_symbolic_shapes_become_buffer_shapes_and_loop_extents():
    n, m = te.var("n"), te.size_var("m")
    A = te.placeholder((n, m), name="A")
    k = te.reduce_axis((0, m), name="k")
    B = te.compute((n,), lambda i: te.sum(A[i, k], axis=k), name="B")
    f = te.create_prim_func([A, B])
    a, b = (f.buffer_map[p] for p in f.params)
    assert a.shape[0] is n and a.shape[1] is m and b.shape[0] is n
    loops, _, blk = _block(f)
    assert loops == [("i", "0", "n"), ("k", "0", "m")]
    assert [fmt(iv.dom) for iv in blk.iter_vars] == ["0:+n", "0:+m"]


def test_reduction_with_where_guards_the_source():
    A = te.placeholder((4, 8), name="A")
    k = te.reduce_axis((0, 8), name="k")
    B = te.compute((4,), lambda i: te.sum(A[i, k], axis=k, where=k < i + 3), name="B")
    _, _, blk = _block(te.create_prim_func([A, B]))
    assert fmt(blk.body) == \
        "B[v_i] = (B[v_i] + if_then_else((v_k < (v_i + 3)), A[v_i, v_k], float32(0)))"
    assert fmt(blk.init) == "B[v_i] = float32(0)"


def test_reduce_init_values_replace_the_identity():
    A = te.placeholder((4, 8), name="A")
    I0 = te.placeholder((4,), name="I0")
    k = te.reduce_axis((0, 8), name="k")
    B = te.compute((4,), lambda i: te.sum(A[i, k], axis=k, init=I0[i]), name="B")
    _, _, blk = _block(te.create_prim_func([A, I0, B]))
    assert fmt(blk.init) == "B[v_i] = I0[v_i]"
    assert regions(blk.reads) == ["A[v_i:+1, v_k:+1]", "I0[v_i:+1]"]


def test_reduce_axis_with_nonzero_min():
    A = te.placeholder((4, 8), name="A")
    k = te.reduce_axis((2, 7), name="k")
    assert fmt(k.dom) == "2:+5"
    B = te.compute((4,), lambda i: te.sum(A[i, k], axis=k), name="B")
    loops, _, blk = _block(te.create_prim_func([A, B]))
    assert loops == [("i", "0", "4"), ("k", "2", "5")]
    assert fmt(blk.iter_vars[1].dom) == "2:+5"


def test_multi_output_elementwise_gives_one_block_per_output():
    A = te.placeholder((4,), name="A")
    X, Y = te.compute((4,), lambda i: (A[i] + 1.0, A[i] * 2.0), name="xy")
    f = te.create_prim_func([A, X, Y])
    loops, realize = stages(f)[0]
    assert loops == [("i", "0", "4")]
    blocks = [r.block for r in realize.seq]
    assert [b.name_hint for b in blocks] == ["xy_v0", "xy_v1"]
    assert blocks[0].iter_vars[0].var is not blocks[1].iter_vars[0].var
    assert fmt(blocks[1].body) == "xy_v1[v_i] = (A[v_i] * float32(2))"


def test_scalar_output_gets_a_unit_block_var():
    A = te.placeholder((5,), name="A")
    k = te.reduce_axis((0, 5), name="k")
    S_ = te.compute((), lambda: te.sum(A[k], axis=k), name="S")
    loops, realize, blk = _block(te.create_prim_func([A, S_]))
    assert loops == [("k", "0", "5")]
    assert [iv.var.name for iv in blk.iter_vars] == ["v_k"]
    assert fmt(blk.body) == "S[] = (S[] + A[v_k])"
    B = te.compute((), lambda: A[0] * 2.0, name="B")
    loops, realize, blk = _block(te.create_prim_func([A, B]))
    assert loops == [] and [iv.var.name for iv in blk.iter_vars] == ["vi"]
    assert [fmt(v) for v in realize.iter_values] == ["0"]


def test_attrs_become_annotations_and_layout_free_inputs_move_to_func_attrs():
    A, B, _ = _matmul()
    k = te.reduce_axis((0, 4), name="k")
    C = te.compute((8, 6), lambda i, j: te.sum(A[i, k] * B[k, j], axis=k), name="C",
                   tag="matmul", attrs={"schedule_rule": "mm", "layout_free_placeholders": [B]})
    assert C.op.tag == "matmul" and C.op.attrs["schedule_rule"] == "mm"
    f = te.create_prim_func([A, B, C])
    _, _, blk = _block(f)
    assert dict(blk.annotations) == {"schedule_rule": "mm"}
    assert f.attrs["layout_free_buffers"] == (1,)


def test_scalar_var_parameters():
    alpha = te.var("alpha", "float32")
    A = te.placeholder((4,), name="A")
    B = te.compute((4,), lambda i: A[i] * alpha, name="B")
    f = te.create_prim_func([A, alpha, B])
    assert f.params[1] is alpha and alpha not in f.buffer_map


def test_index_dtype_override_int64():
    n = te.var("n")
    A = te.placeholder((n, 4), name="A")
    B = te.compute((n, 4), lambda i, j: A[i, 3 - j] + 1.0, name="B")
    f = te.create_prim_func([A, B], index_dtype_override="int64")
    a = f.buffer_map[f.params[0]]
    assert [s.dtype for s in a.shape] == ["int64", "int64"]
    assert a.shape[0].name == "n" and a.shape[0] is not n
    loops, realize, blk = _block(f)
    assert all(iv.var.dtype == "int64" for iv in blk.iter_vars)
    assert all(v.dtype == "int64" for v in realize.iter_values)
    load = blk.body.value.a
    assert [i.dtype for i in load.indices] == ["int64", "int64"]
    assert fmt(load.indices[1]) == "(int64(3) - v_j)"


def test_single_tensor_argument_is_accepted():
    A = te.placeholder((4,), name="A")
    f = te.create_prim_func(A)
    assert len(f.params) == 1 and f.body.block.body is not None


# ---- errors --------------------------------------------------------------------------------

def test_missing_placeholder_parameter_is_named():
    A = te.placeholder((4,), name="Ain")
    W = te.placeholder((4,), name="Win")
    B = te.compute((4,), lambda i: A[i] * W[i], name="B")
    with pytest.raises(ValueError, match="'Win'"):
        te.create_prim_func([A, B])


def test_bad_arguments():
    A = te.placeholder((4,), name="A")
    with pytest.raises(TypeError, match="argument 1"):
        te.create_prim_func([A, "B"])
    with pytest.raises(ValueError, match="twice"):
        te.create_prim_func([A, A])
    with pytest.raises(TypeError, match="index_dtype_override"):
        te.create_prim_func([A], index_dtype_override="float32")


def test_axis_domain_depending_on_another_axis_is_rejected_clearly():
    A = te.placeholder((4, 4), name="A")
    from workbench.tir.buffer import Range

    def f(i):
        k = te.reduce_axis(Range(te.const(0), i + 1), name="k")
        return te.sum(A[i, k], axis=k)

    B = te.compute((4,), f, name="tri")
    with pytest.raises(NotImplementedError, match="'k'"):
        te.create_prim_func([A, B])


def test_undefined_variables_are_reported():
    A = te.placeholder((4, 4), name="A")
    k = te.reduce_axis((0, 4), name="k")
    k2 = te.reduce_axis((0, 4), name="k2")
    B = te.compute((4,), lambda i: te.sum(A[i, k], axis=k2), name="B")
    with pytest.raises(ValueError, match="'k' \\(in block 'B'\\)"):
        te.create_prim_func([A, B])
    alpha = te.var("alpha", "float32")
    C = te.compute((4,), lambda i: A[i, 0] * alpha, name="C")
    with pytest.raises(ValueError, match="'alpha'"):
        te.create_prim_func([A, C])
    n = te.var("n")
    D = te.compute((n,), lambda i: A[0, 0] + 1.0, name="D")
    E = te.compute((4,), lambda i: D[i] * 2.0, name="E")
    with pytest.raises(ValueError, match="'n'"):
        te.create_prim_func([A, E])

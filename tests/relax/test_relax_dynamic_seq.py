"""Dynamic sequence length (issue 22): a transformer encoder with a symbolic sequence dim --
from ``torch.export`` with ``Dim("seq", max=...)``, from an ONNX model with a ``seq`` dim, or
from an ``nn.spec`` with a named dim -- compiles once and runs at any length up to its
bound. Checked against PyTorch / numpy at several lengths with one executable (nothing is
compiled while it runs); its kernels are the fused, vectorized ones (the lowered TIR is
inspected); memory is planned for the upper bound (``tir_var_upper_bound``)."""
from __future__ import annotations

import numpy as np
import pytest

import workbench as wb
from workbench import relax
from workbench.codegen.compiler import LLVMCompiler
from workbench.relax import op as R
from workbench.relax.expr import Call, SeqExpr, ShapeExpr
from workbench.relax.op.nn.attention import _numpy_attention
from workbench.relax.pipeline import Pipeline, get_default_pipeline
from workbench.relax.transform.lowered_ops import MEMORY_ALLOC_STORAGE, is_op
from workbench.tir import expr as E
from workbench.tir.expr import SizeVar
from workbench.tir.function import PrimFunc
from workbench.tir.functor import post_order_visit
from workbench.tir.stmt import For, IfThenElse

TARGET = "llvm -num-cores=2"
D_MODEL, HEADS, MAX_LEN = 32, 2, 24
LENGTHS = (1, 5, 17, 24)    # a partial row tile, whole tiles plus a tail, the bound


@pytest.fixture(autouse=True)
def _no_compiling_while_running(request):  # noqa: ANN001, ANN202
    """``request.node.running()`` is a context in which compiling anything fails the test."""
    import contextlib

    @contextlib.contextmanager
    def running():
        real = LLVMCompiler.compile

        def refuse(self, ll):  # noqa: ANN001, ANN202
            raise AssertionError("an executable compiled code while it ran")
        LLVMCompiler.compile = refuse
        try:
            yield
        finally:
            LLVMCompiler.compile = real
    request.node.running = running


def _encoder():  # noqa: ANN202
    import torch
    nn = torch.nn
    torch.manual_seed(0)
    layer = nn.TransformerEncoderLayer(D_MODEL, HEADS, dim_feedforward=2 * D_MODEL,
                                       dropout=0.0, batch_first=True)
    return nn.TransformerEncoder(layer, 2, enable_nested_tensor=False).eval()


def _run_lengths(request, exe, model) -> None:  # noqa: ANN001
    import torch
    vm = relax.VirtualMachine(exe, wb.cpu())
    torch.manual_seed(1)
    with request.node.running():
        for n in LENGTHS:
            x = torch.randn(1, n, D_MODEL)
            out = vm["main"](wb.nd.array(x.numpy()))
            got = (out[0] if isinstance(out, (list, tuple)) else out).numpy()
            with torch.no_grad():
                want = model(x).numpy()
            assert got.shape == want.shape
            np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-4, err_msg=f"seq {n}")


def _check_kernels(exe) -> None:  # noqa: ANN001
    """The encoder's kernels are the static build's: fused attention, products with their
    bias / activation / residual epilogues; each lowered kernel is vectorized throughout."""
    names = exe.kernel_names
    assert "attention" in names
    assert any(n.startswith("fused_matmul") and n.endswith("relu") for n in names), names
    assert not any("softmax" in n for n in names), names
    for name in names:
        if name.startswith("shape_func"):
            continue
        lowered = wb.lower(exe.lowered_mod[name])[name]
        assert not lowered.attrs.get("vectorize_fallbacks"), (name, lowered.attrs)
        if "matmul" in name or name == "attention":
            assert _vector_stores(lowered) > 0, name


def _vector_stores(func: PrimFunc) -> int:
    found = []
    post_order_visit(func.body, lambda n: found.append(n) if type(n).__name__ == "BufferStore"
                     and isinstance(n.indices[0], E.Ramp) and n.indices[0].lanes >= 8
                     else None)
    return len(found)


def _torch_export(model, max_len):  # noqa: ANN001, ANN202
    import torch
    fastpath = torch.backends.mha.get_fastpath_enabled()
    torch.backends.mha.set_fastpath_enabled(False)
    try:
        return torch.export.export(model, (torch.randn(1, 8, D_MODEL),), dynamic_shapes=(
            {1: torch.export.Dim("seq", max=max_len)},))
    finally:
        torch.backends.mha.set_fastpath_enabled(fastpath)


# ---- the importers -------------------------------------------------------------------------------

def test_torch_export_compiles_once_for_every_length(request):
    pytest.importorskip("torch")
    from workbench.relax.frontend.torch import from_exported_program
    model = _encoder()
    mod = from_exported_program(_torch_export(model, MAX_LEN))
    # the bound comes from the Dim's max
    assert list(dict(mod["main"].attrs["tir_var_upper_bound"]).values()) == [MAX_LEN]
    exe = relax.build(mod, TARGET)
    _check_kernels(exe)
    _run_lengths(request, exe, model)


def test_onnx_model_with_a_seq_dim_compiles_once_for_every_length(request):
    pytest.importorskip("onnxscript")
    import torch
    from workbench.relax.frontend.onnx import from_onnx
    model = _encoder()
    torch.backends.mha.set_fastpath_enabled(False)
    try:
        program = torch.onnx.export(model, (torch.randn(1, 8, D_MODEL),), dynamo=True,
                                    dynamic_shapes=({1: torch.export.Dim("seq")},),
                                    input_names=["x"], verbose=False)
    finally:
        torch.backends.mha.set_fastpath_enabled(True)
    mod = from_onnx(program.model_proto)
    (seq,) = {d.name for d in mod["main"].params[0].struct_info.values
              if isinstance(d, E.Var)}
    # ONNX has no maximum: TVM's function attribute gives it
    mod["main"] = mod["main"].with_attr("tir_var_upper_bound", {seq: MAX_LEN})
    exe = relax.build(mod, TARGET)
    _check_kernels(exe)
    _run_lengths(request, exe, model)


def test_onnx_static_dims_of_a_dynamic_shape_are_numbers():
    """``Sqrt(Cast(Shape(x)[2]))`` of a (1, seq, 16) input is sqrt(16) (the legacy exporter's
    attention scale): the static dims of a symbolic shape value are plain numbers."""
    onnx = pytest.importorskip("onnx")
    from onnx import TensorProto, helper
    from workbench.relax.frontend.onnx import from_onnx
    nodes = [helper.make_node("Shape", ["x"], ["s"]),
             helper.make_node("Constant", [], ["i"], value=helper.make_tensor(
                 "i", TensorProto.INT64, [], [2])),
             helper.make_node("Gather", ["s", "i"], ["d"]),
             helper.make_node("Cast", ["d"], ["f"], to=TensorProto.FLOAT),
             helper.make_node("Sqrt", ["f"], ["r"]),
             helper.make_node("Div", ["x", "r"], ["y"])]
    graph = helper.make_graph(
        nodes, "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, "seq", 16])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, "seq", 16])])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    onnx.checker.check_model(model)
    exe = relax.build(from_onnx(model), TARGET)
    vm = relax.VirtualMachine(exe, wb.cpu())
    x = np.random.default_rng(0).standard_normal((1, 5, 16)).astype("float32")
    np.testing.assert_allclose(vm["main"](wb.nd.array(x)).numpy(), x / 4.0, rtol=1e-6)


def test_nn_spec_with_a_named_dim_compiles_once(request):
    from workbench.relax.frontend import nn

    class Block(nn.Module):
        def __init__(self) -> None:
            self.ln = nn.LayerNorm(D_MODEL)
            self.qkv = nn.Linear(D_MODEL, 3 * D_MODEL)
            self.fc = nn.Linear(D_MODEL, D_MODEL)

        def forward(self, x: nn.Tensor) -> nn.Tensor:
            h = self.ln(x)
            q, k, v = nn.op.split(self.qkv(h), 3, axis=-1)
            hd = D_MODEL // HEADS
            q, k, v = (nn.op.reshape(t, [1, x.shape[1], HEADS, hd]) for t in (q, k, v))
            a = nn.op.scaled_dot_product_attention(q, k, v)
            return x + self.fc(nn.op.reshape(a, [1, x.shape[1], D_MODEL]))

    model = Block()
    mod, named = model.export_tvm({"forward": {"x": nn.spec.Tensor((1, "seq", D_MODEL),
                                                                    "float32")}})
    mod["forward"] = mod["forward"].with_attr("tir_var_upper_bound", {"seq": MAX_LEN})
    rng = np.random.default_rng(2)
    params = [rng.standard_normal([int(d) for d in p.shape]).astype("float32") * 0.2
              for _, p in named]
    exe = relax.build(mod, TARGET)
    assert "attention" in exe.kernel_names
    vm = relax.VirtualMachine(exe, wb.cpu())
    g, b, wqkv, bqkv, wfc, bfc = params
    with request.node.running():
        for n in LENGTHS:
            x = rng.standard_normal((1, n, D_MODEL)).astype("float32")
            got = vm["forward"](wb.nd.array(x), *[wb.nd.array(p) for p in params]).numpy()
            mu, var = x.mean(-1, keepdims=True), x.var(-1, keepdims=True)
            h = (x - mu) / np.sqrt(var + 1e-5) * g + b
            q, k, v = np.split(h @ wqkv.T + bqkv, 3, axis=-1)
            q, k, v = (t.reshape(1, n, HEADS, -1) for t in (q, k, v))
            a = _numpy_attention(q, k, v).reshape(1, n, D_MODEL)
            np.testing.assert_allclose(got, x + a @ wfc.T + bfc, rtol=1e-4, atol=1e-4)


# ---- the pieces ----------------------------------------------------------------------------------

def _attention_module(causal, bias):  # noqa: ANN001, ANN202
    s, t = SizeVar("s", "int64"), SizeVar("t", "int64")
    bb = relax.BlockBuilder()
    q = relax.Var("q", relax.TensorStructInfo((1, s, 2, 16), "float32"))
    k = relax.Var("k", relax.TensorStructInfo((1, t, 2, 16), "float32"))
    v = relax.Var("v", relax.TensorStructInfo((1, t, 2, 8), "float32"))
    params = [q, k, v]
    if bias:
        params.append(relax.Var("m", relax.TensorStructInfo((1, 1, 1, t), "float32")))
    with bb.function("main", params):
        with bb.dataflow():
            out = bb.emit_output(R.nn.attention(q, k, v, params[3] if bias else None, None,
                                                causal))
        bb.emit_func_output(out)
    return bb.get()


@pytest.mark.parametrize("causal,bias", [(None, True), ("TopLeft", False),
                                         ("BottomRight", True)])
def test_fused_attention_over_two_symbolic_lengths(request, causal, bias):
    """Query blocks of 64 rows (the last one short), whole 64-key blocks and 16-key tail
    blocks, against float64 numpy; one build for every (S, T)."""
    exe = relax.build(_attention_module(causal, bias), TARGET)
    assert "attention" in exe.kernel_names
    lowered = wb.lower(exe.lowered_mod["attention"])["attention"]
    assert not lowered.attrs.get("vectorize_fallbacks")
    # whole key blocks read keys and values as contiguous vectors (a ramp of an int32 index
    # cast to the int64 of the symbolic shape stays a ramp), only the clamped tail gathers
    gathers = []
    post_order_visit(lowered.body, lambda n: gathers.append(n) if isinstance(n, E.BufferLoad)
                     and n.dtype.endswith("x64") and not isinstance(n.indices[0], E.Ramp)
                     else None)
    assert not gathers, gathers[:1]
    vm = relax.VirtualMachine(exe, wb.cpu())
    rng = np.random.default_rng(4)
    with request.node.running():
        for s, t in ((1, 1), (5, 17), (70, 64), (130, 100)):
            args = [rng.standard_normal(shape).astype("float32")
                    for shape in ((1, s, 2, 16), (1, t, 2, 16), (1, t, 2, 8))]
            if bias:
                mask = np.zeros((1, 1, 1, t), "float32")
                mask[..., t // 2:] = -np.inf if t > 1 else 0.0
                args.append(mask)
            got = vm["main"](*[wb.nd.array(a) for a in args]).numpy()
            want = _numpy_attention(*args[:3], args[3] if bias else None, None, causal)
            np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-5,
                                       err_msg=f"S={s} T={t}")


def _planned(mod):  # noqa: ANN001, ANN202
    """``mod`` through the default pipeline up to and including StaticPlanBlockMemory."""
    passes = []
    for p in get_default_pipeline(TARGET).passes:
        passes.append(p)
        if p.name == "StaticPlanBlockMemory":
            break
    return Pipeline(passes)(mod)


def _storages(func) -> tuple[int, int]:  # noqa: ANN001
    """(storages of constant size, storages of symbolic size) allocated by ``func``."""
    const = symbolic = 0
    for block in func.body.blocks:
        for b in block.bindings:
            if isinstance(b.value, Call) and is_op(b.value, MEMORY_ALLOC_STORAGE):
                size = b.value.args[0]
                static = isinstance(size, ShapeExpr) and all(
                    isinstance(d, E.IntImm) for d in size.values)
                const += static
                symbolic += not static
    return const, symbolic


def test_memory_is_planned_for_the_upper_bound():
    pytest.importorskip("torch")
    from workbench.relax.frontend.torch import from_exported_program
    mod = from_exported_program(_torch_export(_encoder(), MAX_LEN))
    assert isinstance(mod["main"].body, SeqExpr)
    const, symbolic = _storages(_planned(mod)["main"])
    assert symbolic == 0 and const >= 2, (const, symbolic)
    unbounded = mod.copy()
    unbounded["main"] = mod["main"].with_attr("tir_var_upper_bound", {})
    const_u, symbolic_u = _storages(_planned(unbounded)["main"])
    assert symbolic_u > 0, (const_u, symbolic_u)   # without a bound: sized on every call


def test_upper_bound_must_be_a_non_negative_int():
    from workbench.relax.transform.static_plan_block_memory import StaticPlanBlockMemory
    pytest.importorskip("torch")
    from workbench.relax.frontend.torch import from_exported_program
    mod = from_exported_program(_torch_export(_encoder(), MAX_LEN))
    name = next(iter(dict(mod["main"].attrs["tir_var_upper_bound"])))
    mod["main"] = mod["main"].with_attr("tir_var_upper_bound", {name: -3})
    with pytest.raises(ValueError, match=rf"tir_var_upper_bound\['{name}'\] must be a "
                                         "non-negative int, got -3"):
        _planned(mod)
    assert StaticPlanBlockMemory.name == "StaticPlanBlockMemory"


def test_whole_tiles_run_without_bounds_checks(request):
    """A product over a symbolic number of rows: a whole register tile's reduction loop has
    no ``if`` in it (UnswitchTilePredicates); every partial tile size is right."""
    n = SizeVar("n", "int64")
    bb = relax.BlockBuilder()
    x = relax.Var("x", relax.TensorStructInfo((n, 64), "float32"))
    w = np.random.default_rng(5).standard_normal((64, 48)).astype("float32")
    with bb.function("main", [x]):
        with bb.dataflow():
            out = bb.emit_output(R.nn.relu(R.matmul(x, relax.const(w))))
        bb.emit_func_output(out)
    exe = relax.build(bb.get(), TARGET)
    (kernel,) = [k for k in exe.kernel_names if "matmul" in k]
    lowered = wb.lower(exe.lowered_mod[kernel])[kernel]
    loops: list[For] = []
    post_order_visit(lowered.body, lambda s: loops.append(s) if isinstance(s, For) and
                     s.kind == "parallel" else None)
    assert loops and isinstance(loops[0].body, IfThenElse), "the tile's checks were not hoisted"
    whole_tile = loops[0].body.then_case
    checks: list = []
    post_order_visit(whole_tile, lambda s: checks.append(s) if isinstance(s, IfThenElse)
                     else None)
    assert not checks
    vm = relax.VirtualMachine(exe, wb.cpu())
    rng = np.random.default_rng(6)
    with request.node.running():
        for rows in range(1, 19):            # every number of rows in a partial tile
            a = rng.standard_normal((rows, 64)).astype("float32")
            got = vm["main"](wb.nd.array(a)).numpy()
            np.testing.assert_allclose(got, np.maximum(a @ w, 0), rtol=1e-4, atol=1e-4)


def test_a_length_above_the_bound_is_refused_by_name():
    """Memory is planned for ``tir_var_upper_bound``: a longer input is refused at entry
    with the dim's name and bound, not by an allocation failure deep inside."""
    n = SizeVar("seq", "int64")
    bb = relax.BlockBuilder()
    x = relax.Var("x", relax.TensorStructInfo((n, 8), "float32"))
    with bb.function("main", [x]):
        with bb.dataflow():
            y = bb.emit(R.exp(x))
            out = bb.emit_output(R.add(y, y))
        bb.emit_func_output(out)
    mod = bb.get()
    mod["main"] = mod["main"].with_attr("tir_var_upper_bound", {"seq": 16})
    vm = relax.VirtualMachine(relax.build(mod, TARGET), wb.cpu())
    a = np.ones((16, 8), "float32")
    np.testing.assert_allclose(vm["main"](wb.nd.array(a)).numpy(), 2 * np.exp(a), rtol=1e-6)
    with pytest.raises(ValueError, match=r"fn=main.*the dimension seq is 17, above its upper "
                                         r"bound 16"):
        vm["main"](wb.nd.array(np.ones((17, 8), "float32")))


def test_a_parallel_loop_over_symbolic_inner_work_runs_serially_when_small(request):
    """The keys' transpose to ``[heads, dim, seq]``: its parallel loop has a constant extent
    (heads x dim) over a symbolic inner loop (seq), so its work is unknown when scheduling;
    lowered, it is guarded by ``heads * dim * seq >= MIN_PARALLEL_WORK`` (a static build runs
    it serially at a short length), with the same results either way."""
    n = SizeVar("n", "int64")
    bb = relax.BlockBuilder()
    x = relax.Var("x", relax.TensorStructInfo((1, n, 2, 64), "float32"))
    with bb.function("main", [x]):
        with bb.dataflow():
            out = bb.emit_output(R.permute_dims(x, [0, 2, 3, 1]))
        bb.emit_func_output(out)
    exe = relax.build(bb.get(), TARGET)
    (kernel,) = [k for k in exe.kernel_names if not k.startswith("shape_func")]
    lowered = wb.lower(exe.lowered_mod[kernel])[kernel]
    parallel: list[For] = []
    guards: list[IfThenElse] = []
    post_order_visit(lowered.body, lambda s: parallel.append(s) if isinstance(s, For) and
                     s.kind == "parallel" else None)
    post_order_visit(lowered.body, lambda s: guards.append(s) if isinstance(s, IfThenElse)
                     and isinstance(s.then_case, For) and s.then_case.kind == "parallel"
                     else None)
    assert parallel and isinstance(parallel[0].extent, E.IntImm), "expected a constant extent"
    assert len(guards) == len(parallel) and all(
        isinstance(g.else_case, For) and g.else_case.kind == "serial" for g in guards)
    vm = relax.VirtualMachine(exe, wb.cpu())
    rng = np.random.default_rng(8)
    with request.node.running():
        for rows in (1, 3, 200):             # 2 * 64 * 200 elements: the parallel branch
            a = rng.standard_normal((1, rows, 2, 64)).astype("float32")
            np.testing.assert_allclose(vm["main"](wb.nd.array(a)).numpy(),
                                       a.transpose(0, 2, 3, 1))


def test_a_small_symbolic_parallel_loop_runs_serially(request):
    """A row kernel over a symbolic number of rows is scheduled parallel (its work is unknown
    when scheduling); lowered, it runs serially when rows x work per row is small
    (ParallelWhenWorthIt), in parallel otherwise, with the same results."""
    n = SizeVar("n", "int64")
    bb = relax.BlockBuilder()
    x = relax.Var("x", relax.TensorStructInfo((n, 64), "float32"))
    with bb.function("main", [x]):
        with bb.dataflow():
            out = bb.emit_output(R.nn.softmax(x, axis=-1))
        bb.emit_func_output(out)
    exe = relax.build(bb.get(), TARGET)
    (kernel,) = [k for k in exe.kernel_names if not k.startswith("shape_func")]
    lowered = wb.lower(exe.lowered_mod[kernel])[kernel]
    guards: list[IfThenElse] = []
    post_order_visit(lowered.body, lambda s: guards.append(s) if isinstance(s, IfThenElse)
                     and isinstance(s.then_case, For) and s.then_case.kind == "parallel"
                     else None)
    assert guards and isinstance(guards[0].else_case, For) and \
        guards[0].else_case.kind == "serial"
    vm = relax.VirtualMachine(exe, wb.cpu())
    rng = np.random.default_rng(7)
    with request.node.running():
        for rows in (1, 3, 1000):
            a = rng.standard_normal((rows, 64)).astype("float32")
            e = np.exp(a - a.max(-1, keepdims=True))
            np.testing.assert_allclose(vm["main"](wb.nd.array(a)).numpy(),
                                       e / e.sum(-1, keepdims=True), rtol=1e-5, atol=1e-6)

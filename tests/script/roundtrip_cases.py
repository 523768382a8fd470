"""IR the rest of the test suite builds, for the TVMScript round trip (print -> parse -> equal).

Each case is a zero-argument function returning a PrimFunc or an IRModule; ``CASES`` maps a
readable id to it. Models come from the shared relax helpers; torch and onnx cases are made
only when those packages are installed.
"""
from __future__ import annotations

import importlib.util
import sys
import numpy as np
from pathlib import Path
from typing import Any, Callable

import workbench as wb
from workbench import relax, te, tir, topi

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "relax"))
from relax_cases import OP_CASES, case_module  # noqa: E402
from relax_compile_models import make_cnn, make_mlp, make_transformer  # noqa: E402


# ---- te kernels -------------------------------------------------------------------------------

def matmul_symbolic() -> tir.PrimFunc:
    n = te.var("n")
    A = te.placeholder((n, 64), name="A")
    B = te.placeholder((64, 32), name="B")
    k = te.reduce_axis((0, 64), name="k")
    C = te.compute((n, 32), lambda i, j: te.sum(A[i, k] * B[k, j], axis=k), name="C")
    return te.create_prim_func([A, B, C])


def matmul_static(m: int = 64, n: int = 64, k: int = 64) -> tir.PrimFunc:
    A = te.placeholder((m, k), name="A")
    B = te.placeholder((k, n), name="B")
    r = te.reduce_axis((0, k), name="r")
    C = te.compute((m, n), lambda i, j: te.sum(A[i, r] * B[r, j], axis=r), name="C")
    return te.create_prim_func([A, B, C])


def matmul_relu_int64() -> tir.PrimFunc:
    A = te.placeholder((32, 16), name="A")
    B = te.placeholder((16, 8), name="B")
    k = te.reduce_axis((0, 16), name="k")
    C = te.compute((32, 8), lambda i, j: te.sum(A[i, k] * B[k, j], axis=k), name="C")
    D = te.compute((32, 8), lambda i, j: te.max(C[i, j], 0.0), name="D")
    return te.create_prim_func([A, B, D], index_dtype_override="int64")


def conv2d_nchw() -> tir.PrimFunc:
    data = te.placeholder((1, 3, 16, 16), name="data")
    kernel = te.placeholder((8, 3, 3, 3), name="kernel")
    out = topi.nn.conv2d_nchw(data, kernel, 1, 1, 1)
    return te.create_prim_func([data, kernel, out])


def reduction_sum_symbolic() -> tir.PrimFunc:
    n, m = te.var("n"), te.var("m")
    A = te.placeholder((n, m), name="A")
    k = te.reduce_axis((0, m), name="k")
    B = te.compute((n,), lambda i: te.sum(A[i, k], axis=k), name="B")
    return te.create_prim_func([A, B])


def elementwise_symbolic() -> tir.PrimFunc:
    n = te.var("n")
    A = te.placeholder((n, 4), name="A")
    B = te.compute((n, 4), lambda i, j: te.exp(A[i, j]) * 0.5 + tir.if_then_else(
        i > 1, A[i, j], -A[i, j]), name="B")
    C = te.compute((n, 4), lambda i, j: B[i, j].astype("float16"), name="C")
    return te.create_prim_func([A, C])


def softmax() -> tir.PrimFunc:
    A = te.placeholder((4, 16), name="A")
    return te.create_prim_func([A, topi.nn.softmax(A)])


def pool() -> tir.PrimFunc:
    A = te.placeholder((1, 4, 8, 8), name="A")
    return te.create_prim_func([A, topi.nn.pool2d(A, (2, 2), (2, 2), (1, 1), (0, 0, 0, 0),
                                                  "max")])


# ---- schedules --------------------------------------------------------------------------------

def _sched(fn: Callable[[tir.Schedule], None], func: Callable[[], tir.PrimFunc] = matmul_static
           ) -> Callable[[], Any]:
    def make() -> Any:
        sch = tir.Schedule(func())
        fn(sch)
        return sch.mod
    make.__name__ = fn.__name__
    return make


def split_reorder(sch: tir.Schedule) -> None:
    i, j, k = sch.get_loops(sch.get_block("C"))
    io, ii = sch.split(i, [None, 8])
    jo, ji = sch.split(j, [None, 16])
    sch.reorder(io, jo, k, ii, ji)


def parallel_vectorize(sch: tir.Schedule) -> None:
    i, j, k = sch.get_loops(sch.get_block("C"))
    jo, ji = sch.split(j, [None, 8])
    sch.reorder(i, jo, k, ji)
    sch.parallel(i)
    sch.vectorize(ji)
    sch.unroll(k)


def cache_read_compute_at(sch: tir.Schedule) -> None:
    block = sch.get_block("C")
    i, j, k = sch.get_loops(block)
    io, ii = sch.split(i, [None, 16])
    cached = sch.cache_read(block, 0, "global")
    sch.compute_at(cached, io)


def cache_write_decompose(sch: tir.Schedule) -> None:
    block = sch.get_block("C")
    cw = sch.cache_write(block, 0, "global")
    i, j, k = sch.get_loops(block)
    sch.reverse_compute_at(cw, i)
    sch.decompose_reduction(block, k)


def fuse_split(sch: tir.Schedule) -> None:
    i, j, k = sch.get_loops(sch.get_block("C"))
    f = sch.fuse(i, j)
    sch.split(f, [None, 32])


def split_uneven_annotate(sch: tir.Schedule) -> None:
    i, j, k = sch.get_loops(sch.get_block("C"))
    sch.split(i, [None, 5])                       # 64 = 13 * 5 - 1: a T.where predicate
    sch.annotate(j, "pragma_auto_unroll_max_step", 16)
    sch.annotate(sch.get_block("C"), "meta_schedule.tiling_structure", "SSRSRS")


def rfactor_blockize(sch: tir.Schedule) -> None:
    i, j, k = sch.get_loops(sch.get_block("C"))
    ko, ki = sch.split(k, [None, 4])
    sch.rfactor(ki, 0)
    i2, j2, ko2 = sch.get_loops(sch.get_block("C"))[:3]
    sch.blockize(ko2)


def storage_align_layout(sch: tir.Schedule) -> None:
    block = sch.get_block("C")
    cached = sch.cache_write(block, 0, "global")
    sch.storage_align(block, 0, 0, 16, 1)
    sch.transform_layout(cached, ("write", 0), lambda a, b: (b, a))


def _lowered(func: Callable[[], Any]) -> Callable[[], Any]:
    def make() -> Any:
        return wb.lower(func())
    make.__name__ = "lowered_" + func.__name__
    return make


# ---- relax models -----------------------------------------------------------------------------

def _legalized(mod: Any) -> Any:
    return relax.transform.LegalizeOps()(mod)


def _fused(mod: Any) -> Any:
    mod = relax.transform.AnnotateTIROpPattern()(_legalized(mod))
    return relax.transform.FuseTIR()(relax.transform.FuseOps()(mod))


def _fuse_ops_only(mod: Any) -> Any:
    """Fused Relax functions before FuseTIR: each must have symbolic vars of its own (they
    shared the caller's, and the text gives each function its own)."""
    mod = relax.transform.AnnotateTIROpPattern()(_legalized(mod))
    return relax.transform.FuseOps()(mod)


def _vm_form(mod: Any) -> Any:
    """The module at the end of the default Relax pipeline (VM form: no dataflow blocks,
    explicit allocations and shape checks), its kernels lowered as the build does (unrolled,
    unswitched and parallel-or-serial loops copy bodies: each copy defines its own vars)."""
    return wb.lower(relax.get_default_pipeline("llvm")(mod))


def nonfinite_constants() -> Any:
    """-inf, inf and nan constants (their repr is no Python name: printed as float("inf"))."""

    bb = relax.BlockBuilder()
    x = relax.Var("x", relax.TensorStructInfo((2,), "float32"))
    with bb.function("main", [x]):
        y = bb.emit(relax.op.add(x, relax.const(float("-inf"), "float32")))
        z = bb.emit(relax.op.add(y, relax.const(np.array([np.nan, np.inf], "float32"))))
        bb.emit_func_output(z)
    return bb.get()


def layout_rewrite_attr() -> tir.PrimFunc:
    """An IndexMap in a function attribute (RemoveWeightLayoutRewriteBlock records them):
    printed as T.index_map(lambda ...)."""
    from workbench.tir.schedule.index_map import IndexMap
    imap = IndexMap.from_func(lambda i, j: (j // 16, i, j % 16), index_dtype="int64")
    return matmul_static().with_attr("layout_rewrites", ((1, (64, 64), imap),))


def call_tir_inplace_single_index() -> Any:
    """``inplace_indices=0`` (one index, printed as an int) with a constant argument: the
    parser found no constructor for R.call_tir_inplace and stored the int unnormalised."""
    bb = relax.BlockBuilder()
    x = relax.Var("x", relax.TensorStructInfo((2,), "float32"))
    write = te.create_prim_func([te.placeholder((2,), name="a"),
                                 te.compute((2,), lambda i: te.const(1.0, "float32"), name="b")])
    with bb.function("main", [x]):
        gv = bb.add_func(write, "write")
        y = bb.emit(relax.op.call_tir_inplace(
            gv, (x, relax.const(np.array([1], "int64"))), 0,
            relax.TensorStructInfo((2,), "float32")))
        bb.emit_func_output(y)
    return bb.get()


def shuffle_of_vector_loads() -> tir.PrimFunc:
    """A vector load inside T.Shuffle's list (the generic int8 dot intrinsic's form): the
    parser turned sliced reads into loads only as direct call arguments."""
    from workbench.script import from_source
    return from_source(
        "@T.prim_func\n"
        "def f(B: T.Buffer((16, 4), \"int8\"), C: T.Buffer((16,), \"int32\")):\n"
        "    C[0:16] = T.Cast(\"int32x16\", T.Shuffle([B[0, 0:64]], [0, 4, 8, 12, 16, 20, 24, "
        "28, 32, 36, 40, 44, 48, 52, 56, 60]))\n")


def kernel_in_two_groups() -> Any:
    """One padded conv2d kernel fused into two groups: FuseTIR gave both fused functions the
    kernel's very buffers (pad_temp), one object in two functions."""
    bb = relax.BlockBuilder()
    x = relax.Var("x", relax.TensorStructInfo((1, 4, 8, 8), "float32"))
    w = relax.Var("w", relax.TensorStructInfo((4, 4, 3, 3), "float32"))
    with bb.function("main", [x, w]):
        with bb.dataflow():
            a = bb.emit(relax.op.nn.relu(relax.op.nn.conv2d(x, w, padding=1)))
            b = bb.emit(relax.op.nn.conv2d(a, w, padding=1))
            out = bb.emit_output(relax.op.add(b, relax.const(1.0, "float32")))
        bb.emit_func_output(out)
    return _fused(bb.get())


def size_var_param() -> tir.PrimFunc:
    """A SizeVar scalar parameter (call_te passes unbound dims so): it printed as ``n: T.int64``
    and read back as a plain Var."""
    f = elementwise_symbolic()
    return f.replace(params=f.params + (tir.SizeVar("t", "int64"),))


def torch_small(keep_params_as_input: bool = False) -> Any:
    """A small torch model; with ``keep_params_as_input`` its weights ride in the function's
    ``params`` attr as NDArrays (printed as ``metadata["runtime.NDArray"][k]``)."""
    import torch
    from workbench.relax.frontend.torch import from_exported_program

    class Net(torch.nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.fc = torch.nn.Linear(8, 4)

        def forward(self, x):
            return torch.softmax(torch.relu(self.fc(x)) * 2.0, dim=-1)

    ep = torch.export.export(Net().eval(), (torch.randn(2, 8),))
    return from_exported_program(ep, keep_params_as_input=keep_params_as_input)


def onnx_small() -> Any:

    from onnx import TensorProto, helper, numpy_helper
    from workbench.relax.frontend.onnx import from_onnx
    w = numpy_helper.from_array(np.ones((4, 3), "float32"), "w")
    nodes = [helper.make_node("MatMul", ["x", "w"], ["y"]),
             helper.make_node("Relu", ["y"], ["z"]),
             helper.make_node("ReduceSum", ["z"], ["s"], keepdims=1)]
    graph = helper.make_graph(nodes, "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT,
                                                                         [2, 4])],
                              [helper.make_tensor_value_info("s", TensorProto.FLOAT, None)],
                              [w])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    return from_onnx(model)


def _has(name: str) -> bool:
    return importlib.util.find_spec(name) is not None


CASES: dict[str, Callable[[], Any]] = {}
for _f in (matmul_symbolic, matmul_static, matmul_relu_int64, conv2d_nchw,
           reduction_sum_symbolic, elementwise_symbolic, softmax, pool):
    CASES[_f.__name__] = _f
    CASES["lowered_" + _f.__name__] = _lowered(_f)
for _s in (split_reorder, parallel_vectorize, cache_read_compute_at, cache_write_decompose,
           fuse_split, split_uneven_annotate, rfactor_blockize, storage_align_layout):
    CASES["sched_" + _s.__name__] = _sched(_s)
    CASES["lowered_sched_" + _s.__name__] = _lowered(_sched(_s))
for _m in (make_mlp, make_cnn, make_transformer):
    _name = _m.__name__[len("make_"):]
    CASES["relax_" + _name] = (lambda m=_m: m()[0])
    CASES["relax_legalized_" + _name] = (lambda m=_m: _legalized(m()[0]))
    CASES["relax_fused_" + _name] = (lambda m=_m: _fused(m()[0]))
    CASES["relax_fuse_ops_only_" + _name] = (lambda m=_m: _fuse_ops_only(m()[0]))
    CASES["relax_vm_form_" + _name] = (lambda m=_m: _vm_form(m()[0]))
CASES["relax_nonfinite_constants"] = nonfinite_constants
CASES["layout_rewrite_attr"] = layout_rewrite_attr
CASES["shuffle_of_vector_loads"] = shuffle_of_vector_loads
CASES["relax_kernel_in_two_groups"] = kernel_in_two_groups
CASES["size_var_param"] = size_var_param
CASES["relax_call_tir_inplace_single_index"] = call_tir_inplace_single_index
# One module per op case of the relax tests (every op family the printer writes), as built
# and after legalization.
for _op in OP_CASES:
    CASES["op_" + _op] = (lambda o=_op: case_module(o)[0])
    CASES["op_legalized_" + _op] = (lambda o=_op: _legalized(case_module(o)[0]))
if _has("torch"):
    CASES["torch_small"] = torch_small
    CASES["torch_small_fused"] = lambda: _fused(torch_small())
    CASES["torch_small_params_attr"] = lambda: torch_small(keep_params_as_input=True)
if _has("onnx"):
    CASES["onnx_small"] = onnx_small
    CASES["onnx_small_legalized"] = lambda: _legalized(onnx_small())

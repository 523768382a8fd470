"""Kernels and hand-built VM programs shared by the relax_vm tests.

``build_kernels()`` compiles, with te, the kernels of a two-layer MLP on float32[4, 16]:
``matmul(A[4,16], B[16,16], C[4,16])``, ``add_bias(A[4,16], b[16], C[4,16])`` and
``relu(A[4,16], B[4,16])``.

``mlp_program(lib)`` is what a compiler with memory planning would emit for
``relu(relu(x @ w1 + b) @ w2)`` with the bias ``b`` a constant: input checks naming each
parameter, two storages reused across the four intermediate tensors, DPS kernel calls.
"""
from __future__ import annotations

import numpy as np

import workbench as wb
from workbench import te
from workbench.ir import IRModule
from workbench.runtime.relax_vm import DataType, ExecBuilder, Executable

N, D = 4, 16
F32 = DataType("float32")


def _matmul():
    A = te.placeholder((N, D), name="A")
    B = te.placeholder((D, D), name="B")
    r = te.reduce_axis((0, D), name="r")
    C = te.compute((N, D), lambda i, j: te.sum(A[i, r] * B[r, j], axis=r), name="C")
    return te.create_prim_func([A, B, C]).with_attr("global_symbol", "matmul")


def _add_bias():
    A = te.placeholder((N, D), name="A")
    b = te.placeholder((D,), name="b")
    C = te.compute((N, D), lambda i, j: A[i, j] + b[j], name="C")
    return te.create_prim_func([A, b, C]).with_attr("global_symbol", "add_bias")


def _relu():
    A = te.placeholder((N, D), name="A")
    B = te.compute((N, D), lambda i, j: te.max(A[i, j], 0.0), name="B")
    return te.create_prim_func([A, B]).with_attr("global_symbol", "relu")


def build_kernels() -> wb.runtime.Module:
    return wb.build(IRModule({"matmul": _matmul(), "add_bias": _add_bias(), "relu": _relu()}))


def err_ctx(param: str, index: int, shape: tuple[int, int]) -> str:
    return (f"ErrorContext(fn=main, loc=param[{index}], param={param}, "
            f"annotation=R.Tensor(({shape[0]}, {shape[1]}), dtype=\"float32\"))")


def mlp_program(lib: wb.runtime.Module | None, bias: np.ndarray) -> Executable:
    """main(x[4,16], w1[16,16], w2[16,16]) = relu(relu(x @ w1 + bias) @ w2)."""
    ib = ExecBuilder()
    shapes = {"x": (N, D), "w1": (D, D), "w2": (D, D)}
    with ib.function("main", num_inputs=3, param_names=["x", "w1", "w2"]):
        for i, name in enumerate(shapes):
            ctx = ib.convert_constant(err_ctx(name, i, shapes[name]))
            ib.emit_call("vm.builtin.check_tensor_info", args=[ib.r(i), ib.imm(2), F32, ctx])
            d0, d1 = shapes[name]
            ib.emit_call("vm.builtin.match_shape", args=[
                ib.r(i), ib.void_arg(), ib.imm(2), ib.imm(0), ib.imm(d0), ib.imm(0), ib.imm(d1),
                ctx])
        nbytes = N * D * 4
        for reg in (10, 11):
            ib.emit_call("vm.builtin.alloc_storage", args=[
                ib.vm_state(), (nbytes,), ib.imm(0), DataType("uint8"),
                ib.convert_constant("global")], dst=ib.r(reg))
        bias_c = ib.convert_constant(wb.nd.array(bias))
        steps = [("matmul", [ib.r(0), ib.r(1)], 10, 20),   # t20 = x @ w1        (storage A)
                 ("add_bias", [ib.r(20), bias_c], 11, 21),  # t21 = t20 + b       (storage B)
                 ("relu", [ib.r(21)], 10, 22),              # t22 = relu(t21)     (A, t20 dead)
                 ("matmul", [ib.r(22), ib.r(2)], 11, 23),   # t23 = t22 @ w2      (B, t21 dead)
                 ("relu", [ib.r(23)], 10, 24)]              # t24 = relu(t23)     (A, t22 dead)
        for kernel, inputs, storage, out in steps:
            ib.emit_call("vm.builtin.alloc_tensor", args=[ib.r(storage), ib.imm(0), (N, D), F32],
                         dst=ib.r(out))
            ib.emit_call(kernel, args=[*inputs, ib.r(out)])
        ib.emit_ret(ib.r(24))
    exe = ib.get()
    if lib is not None:
        exe.import_module(lib)
    return exe


def mlp_reference(x: np.ndarray, w1: np.ndarray, w2: np.ndarray,
                  bias: np.ndarray) -> np.ndarray:
    h = np.maximum(x @ w1 + bias, 0)
    return np.maximum(h @ w2, 0)


def mlp_inputs(seed: int = 0) -> tuple[np.ndarray, ...]:
    rng = np.random.default_rng(seed)
    x, w1, w2 = (rng.standard_normal(s).astype("float32") for s in ((N, D), (D, D), (D, D)))
    bias = rng.standard_normal(D).astype("float32")
    return x, w1, w2, bias

"""End to end: nn-frontend models compiled with ``relax.build`` / ``workbench.compile`` run on
the VM and match independent numpy references, with fusion on and off, with a symbolic batch
dimension at two batch sizes from one compile."""
from __future__ import annotations

import numpy as np
import pytest

import workbench as wb
from workbench import relax
from workbench.runtime.relax_vm import Executable, VMFuncKind
from workbench.runtime.relax_vm.bytecode import Call

from relax_compile_models import MODELS, input_for

_CACHE: dict = {}


def compiled(kind: str, fuse: bool, batch: object = "n", plan_memory: bool = True):
    key = (kind, fuse, batch, plan_memory)
    if key not in _CACHE:
        mod, names, params, ref = MODELS[kind][0](batch)
        exe = relax.build(mod, "llvm", fuse=fuse, plan_memory=plan_memory)
        _CACHE[key] = (exe, names, params, ref)
    return _CACHE[key]


def run(exe: Executable, kind: str, batch: int, params: list[np.ndarray]) -> tuple:
    vm = relax.VirtualMachine(exe, wb.cpu())
    x = input_for(kind, batch)
    out = vm["forward"](wb.nd.array(x), *[wb.nd.array(p) for p in params])
    return x, out.numpy()


def kernel_calls(exe: Executable, func: str = "forward") -> int:
    """Kernel launches in one call of ``func``: Call instructions whose callee is a compiled
    kernel (not a builtin; shape functions excluded)."""
    info = exe.function_info(func)
    kernels = {n for n in exe.kernel_names if not n.startswith("shape_func")}
    return sum(isinstance(i, Call) and exe.func_table[i.func_idx].name in kernels
               for i in exe.instructions(info))


@pytest.mark.parametrize("fuse", [True, False], ids=["fused", "unfused"])
@pytest.mark.parametrize("kind", ["mlp", "transformer"])
def test_relax_compile_symbolic_batch_matches_numpy(kind: str, fuse: bool) -> None:
    exe, _, params, ref = compiled(kind, fuse)
    for batch in (2, 5):  # one compile, two batch sizes
        x, out = run(exe, kind, batch, params)
        assert out.shape[0] == batch
        np.testing.assert_allclose(out, ref(x, params), rtol=1e-4, atol=1e-5)


@pytest.mark.parametrize("fuse", [True, False], ids=["fused", "unfused"])
def test_relax_compile_cnn_matches_numpy(fuse: bool) -> None:
    # topi's conv2d/pooling need static shapes, so the CNN is compiled per batch size.
    for batch in (1, 3):
        exe, _, params, ref = compiled("cnn", fuse, batch)
        x, out = run(exe, "cnn", batch, params)
        np.testing.assert_allclose(out, ref(x, params), rtol=1e-4, atol=1e-5)


def test_relax_compile_fusion_reduces_kernels() -> None:
    for kind in ("mlp", "transformer"):
        fused, _, _, _ = compiled(kind, True)
        unfused, _, _, _ = compiled(kind, False)
        assert kernel_calls(fused) < kernel_calls(unfused), kind
        assert any(n.startswith("fused_") for n in fused.kernel_names)
        assert not any(n.startswith("fused_") for n in unfused.kernel_names)
    exe, _, _, _ = compiled("cnn", True, 1)
    assert "fused_conv2d_add_batch_norm_relu" in exe.kernel_names
    # stats() lists every global: the fused kernels are there, the unfused pieces are not.
    stats = exe.stats()
    assert "fused_conv2d_add_batch_norm_relu" in stats and "batch_norm," not in stats
    mlp, _, _, _ = compiled("mlp", True)
    assert {"fused_matmul_add_relu", "fused_matmul1_add1"} <= set(mlp.kernel_names)


def test_relax_compile_fused_kernels_have_attrs() -> None:
    exe, _, _, _ = compiled("transformer", True)
    for name, func in exe.lowered_mod.items():
        if name.startswith("fused_"):
            assert func.attrs["global_symbol"] == name
            assert func.attrs["tir.noalias"] is True
            assert "op_pattern" in func.attrs
    packed = [f.name for f in exe.func_table if f.kind == VMFuncKind.PACKED_FUNC]
    assert set(exe.kernel_names) <= set(packed)


def test_relax_compile_memory_planning_reduces_peak() -> None:
    from workbench.relax.transform import memory_usage
    for kind, batch in (("mlp", 4), ("cnn", 3), ("transformer", 4)):
        planned, _, params, ref = compiled(kind, True, batch)
        unplanned, _, _, _ = compiled(kind, True, batch, plan_memory=False)
        p = planned.memory_usage["forward"]
        u = unplanned.memory_usage["forward"]
        assert p.unplanned_bytes == u.unplanned_bytes == u.planned_bytes, kind
        assert p.planned_bytes < u.planned_bytes, kind
        # Both still compute the right thing.
        for exe in (planned, unplanned):
            x, out = run(exe, kind, batch, params)
            np.testing.assert_allclose(out, ref(x, params), rtol=1e-4, atol=1e-5)
    # Symbolic sizes: storages of equal symbolic size are shared, counted at a given n.
    sym, _, _, _ = compiled("transformer", True)
    u = memory_usage(sym.lowered_mod, {"n": 4})["forward"]
    assert u.planned_bytes < u.unplanned_bytes and u.dynamic_allocations == 0


def test_relax_compile_planned_bytes_match_runtime_allocations() -> None:
    """The planned peak is what the VM really allocates: sum alloc_storage sizes at run time."""
    exe, _, params, _ = compiled("cnn", True, 3)
    vm = relax.VirtualMachine(exe, wb.cpu())
    allocated = []

    def instrument(func, name, before_run, ret, *args):
        if before_run and name == "vm.builtin.alloc_storage":
            allocated.append(int(np.prod(args[1])))
    vm.set_instrument(instrument)
    vm["forward"](wb.nd.array(input_for("cnn", 3)), *[wb.nd.array(p) for p in params])
    assert sum(allocated) == exe.memory_usage["forward"].planned_bytes


def test_relax_compile_dispatch_and_exports() -> None:
    mod, _, params, ref = MODELS["mlp"][0]()
    exe = wb.compile(mod, "llvm")
    assert isinstance(exe, Executable) and isinstance(exe, relax.VMExecutable)
    assert relax.VirtualMachine is wb.runtime.relax_vm.VirtualMachine
    x, out = run(exe, "mlp", 3, params)
    np.testing.assert_allclose(out, ref(x, params), rtol=1e-4, atol=1e-5)
    # PrimFunc-only modules still give a runtime Module.
    from workbench import te
    A = te.placeholder((4,), name="A")
    B = te.compute((4,), lambda i: A[i] + 1.0, name="B")
    rt = wb.compile(te.create_prim_func([A, B]))
    assert not isinstance(rt, Executable)


def test_relax_compile_params_bound_as_constants() -> None:
    mod, names, params, ref = MODELS["mlp"][0](2)
    exe = relax.build(mod, "llvm", params=dict(zip(names, params)))
    assert exe.function_info("forward").param_names == ["x"]
    vm = relax.VirtualMachine(exe, wb.cpu())
    x = input_for("mlp", 2)
    np.testing.assert_allclose(vm["forward"](wb.nd.array(x)).numpy(), ref(x, params),
                               rtol=1e-4, atol=1e-5)
    # The weight is in the constant pool, transposed at compile time (FoldConstant: Linear's
    # permute_dims of a constant).
    assert "[8, 16]" in exe.stats()

"""The Relax VM over RPC on a real Dask worker: relax.VirtualMachine(remote_module,
session.cpu()) with set_input / invoke_stateful / get_outputs, direct calls, save_function,
time_evaluator and profile; a function returning a tuple; checked against numpy."""
import numpy as np
import pytest

import workbench as wb
from workbench import relax, rpc
from workbench.rpc import RemoteNDArray, RemoteVirtualMachine
from workbench.runtime.profiling import Report

from dask_procs import KEY
from rpc_helpers import two_heads


@pytest.fixture(scope="module")
def model(tmp_path_factory):
    exe, params, x, expected = two_heads()
    path = str(tmp_path_factory.mktemp("vm") / "two_heads.vmexe")
    exe.export_library(path)
    return path, params, x, expected


@pytest.fixture(scope="module")
def remote_vm(dask_cluster, model):
    path, params, x, expected = model
    session = rpc.connect(dask_cluster.address, key=KEY, timeout=60)
    session.upload(path)
    mod = session.load_module("two_heads.vmexe")
    assert mod.kind == "executable" and mod.function_names == ["forward"]
    vm = relax.VirtualMachine(mod, session.cpu(), profile=True)
    yield session, vm
    session.close()


def _check(outputs, expected):
    assert isinstance(outputs, tuple) and len(outputs) == 2  # a tuple return, over RPC
    assert all(isinstance(o, RemoteNDArray) for o in outputs)
    for got, want in zip(outputs, expected):
        np.testing.assert_allclose(got.numpy(), want, rtol=1e-5, atol=1e-5)


def test_stateful_api(remote_vm, model):
    session, vm = remote_vm
    _, params, x, expected = model
    assert isinstance(vm, RemoteVirtualMachine)
    dev = session.cpu()
    inputs = [wb.nd.array(x, dev)] + [wb.nd.array(v, dev) for v in params.values()]
    vm.set_input("forward", *inputs)
    vm.invoke_stateful("forward")
    _check(vm.get_outputs("forward"), expected)
    # local values are copied over and converted there as set_input does
    vm.set_input("forward", x, *params.values())
    vm.invoke_stateful("forward")
    _check(vm.get_outputs("forward"), expected)
    with pytest.raises(ValueError, match="Unknown function: nope"):
        vm.set_input("nope", x)


def test_direct_call_and_save_function(remote_vm, model):
    session, vm = remote_vm
    _, params, x, expected = model
    dev = session.cpu()
    inputs = [wb.nd.array(x, dev)] + [wb.nd.array(v, dev) for v in params.values()]
    _check(vm["forward"](*inputs), expected)
    vm.save_function("forward", "forward_saved", *inputs)
    _check(vm["forward_saved"](), expected)


def test_remote_timing_and_profile(remote_vm, model):
    session, vm = remote_vm
    _, params, x, _ = model
    dev = session.cpu()
    vm.set_input("forward", x, *params.values())
    res = vm.time_evaluator("invoke_stateful", dev, number=5, repeat=2)("forward")
    assert len(res.results) == 2 and all(0 < r < 0.05 for r in res.results)
    report = vm.profile("forward")
    assert isinstance(report, Report)
    names = set(report.to_dataframe()["Name"])
    assert any(name.startswith("fused_") or "matmul" in name for name in names), names
    with pytest.raises(NotImplementedError, match="not available over RPC"):
        vm.set_instrument(lambda *a: None)


def test_vm_needs_an_executable_and_a_session_device(dask_cluster, remote_vm, tmp_path):
    session, _ = remote_vm
    from rpc_helpers import scale_kernel
    scale_kernel(8).export_library(str(tmp_path / "k.o"))
    session.upload(str(tmp_path / "k.o"))
    with pytest.raises(ValueError, match="holds kernels"):
        relax.VirtualMachine(session.load_module("k.o"), session.cpu())
    mod = session.load_module("two_heads.vmexe")
    with pytest.raises(TypeError, match="device of the module's session"):
        relax.VirtualMachine(mod, wb.cpu())


def test_vm_on_the_in_process_cluster(model):
    path, params, x, expected = model
    with rpc.connect() as session:
        session.upload(path, "m.vmexe")
        vm = relax.VirtualMachine(session.load_module("m.vmexe"), session.cpu())
        vm.set_input("forward", x, *params.values())
        vm.invoke_stateful("forward")
        _check(vm.get_outputs("forward"), expected)

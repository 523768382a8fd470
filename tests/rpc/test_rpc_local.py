"""rpc.LocalSession: the RPC session interface over this process (TVM's tutorial flow:
export, upload, load_module, run on session.cpu(), time_evaluator), checked against numpy."""
import os

import numpy as np
import pytest

import workbench
from workbench import rpc, te
from workbench.contrib import utils


def _add_one(n=64):
    A = te.placeholder((n,), name="A")
    B = te.compute((n,), lambda i: A[i] + 1.0, name="B")
    mod = workbench.IRModule.from_expr(te.create_prim_func([A, B]).with_attr(
        "global_symbol", "add_one"))
    return workbench.compile(mod, target="llvm")


@pytest.mark.parametrize("file_name", ["lib.o", "lib.tar"])
def test_local_session_upload_load_run(file_name):
    lib = _add_one()
    temp = utils.tempdir()
    path = temp.relpath(file_name)
    lib.export_library(path)
    with rpc.LocalSession() as remote:
        assert remote.upload(path) == file_name
        assert remote.listdir() == [file_name]
        assert remote.download(file_name) == open(path, "rb").read()
        func = remote.load_module(file_name)
        dev = remote.cpu()
        assert dev == workbench.cpu(0) and remote.device("cpu", 0) == dev
        a = workbench.nd.array(np.random.uniform(size=64).astype("float32"), dev)
        b = workbench.nd.array(np.zeros(64, "float32"), dev)
        func(a, b)
        np.testing.assert_allclose(b.numpy(), a.numpy() + 1, rtol=1e-6)
        res = func.time_evaluator(func.entry_name, dev, number=2)(a, b)
        assert res.mean > 0
        remote.remove(file_name)
        assert remote.listdir() == []
        workdir = remote._workdir
    assert not os.path.exists(workdir)
    temp.remove()


def test_local_session_bytes_paths_and_errors():
    with rpc.LocalSession() as remote:
        remote.upload(b"abc", target="sub/x.bin")
        assert remote.listdir("sub") == ["x.bin"]
        assert remote.download("sub/x.bin") == b"abc"
        with pytest.raises(ValueError, match="required"):
            remote.upload(b"abc")
        with pytest.raises(ValueError, match="leaves"):
            remote.download("../etc/passwd")
        with pytest.raises(ValueError, match="relative"):
            remote.download("/etc/passwd")
        with pytest.raises(FileNotFoundError, match="nothing|sub"):
            remote.load_module("missing.so")
        with pytest.raises(ValueError, match="unknown device"):
            remote.device("tpu")
        assert remote.get_function("meta_schedule.as_dashboard") is not None
        assert remote.target.kind == "llvm"


def test_local_session_runs_a_vm_executable():
    from workbench import relax
    bb = relax.BlockBuilder()
    x = relax.Var("x", relax.TensorStructInfo((4,), "float32"))
    with bb.function("main", [x]):
        with bb.dataflow():
            y = bb.emit(relax.op.add(x, x))
            out = bb.emit_output(y)
        bb.emit_func_output(out)
    exe = workbench.compile(bb.get(), target="llvm")
    with utils.tempdir() as temp, rpc.LocalSession() as remote:
        exe.export_library(temp.relpath("m.vmexe"))
        remote.upload(temp.relpath("m.vmexe"))
        loaded = remote.load_module("m.vmexe")
        vm = relax.VirtualMachine(loaded, remote.cpu())
        data = np.arange(4, dtype="float32")
        np.testing.assert_array_equal(vm["main"](workbench.nd.array(data)).numpy(), data * 2)

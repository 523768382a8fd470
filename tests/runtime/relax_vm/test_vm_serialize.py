"""Executable.save / Executable.load: the archive round-trips bytecode, every constant kind and
the kernel libraries, and a saved executable runs in a fresh process."""
import json
import os
import subprocess
import sys
import textwrap
import zipfile

import numpy as np
import pytest

import workbench as wb
from workbench.runtime.relax_vm import (DataType, ExecBuilder, Executable, ShapeTuple,
                                        VirtualMachine)
from vm_programs import mlp_inputs, mlp_program, mlp_reference


def test_roundtrip_in_process(tmp_path, mlp_lib):
    x, w1, w2, bias = mlp_inputs()
    exe = mlp_program(mlp_lib, bias)
    path = tmp_path / "mlp.wbvm"
    exe.save(path)
    loaded = Executable.load(path)
    assert loaded.as_text() == exe.as_text()
    assert loaded.stats() == exe.stats()
    assert [f.to_json() for f in loaded.func_table] == [f.to_json() for f in exe.func_table]
    out = VirtualMachine(loaded, wb.cpu())["main"](*(wb.nd.array(a) for a in (x, w1, w2)))
    np.testing.assert_allclose(out.numpy(), mlp_reference(x, w1, w2, bias), rtol=1e-5,
                               atol=1e-5)
    with zipfile.ZipFile(path) as zf:
        assert set(zf.namelist()) == {"executable.json", "constants.npz", "lib0.so"}
        assert json.loads(zf.read("executable.json"))["format"] == \
            "workbench.relax_vm.Executable"


def test_every_constant_kind_roundtrips(tmp_path):
    ib = ExecBuilder()
    values = [wb.nd.array(np.arange(6, dtype="int16").reshape(2, 3)), ShapeTuple([4, 5]),
              DataType("float16"), "text", 1 << 60, float("inf"), -0.25]
    with ib.function("main", num_inputs=0):
        args = [ib.convert_constant(v) for v in values]
        ib.emit_call("vm.builtin.make_tuple", args=args, dst=ib.r(0))
        ib.emit_ret(ib.r(0))
    exe = ib.get()
    exe.save(tmp_path / "c.wbvm")
    loaded = Executable.load(tmp_path / "c.wbvm")
    assert loaded.stats() == exe.stats()
    out = VirtualMachine(loaded, wb.cpu())["main"]()
    np.testing.assert_array_equal(out[0].numpy(), values[0].numpy())
    assert out[0].dtype == "int16"
    assert isinstance(out[1], ShapeTuple) and tuple(out[1]) == (4, 5)
    assert isinstance(out[2], DataType) and out[2] == "float16"
    assert list(out[3:]) == ["text", 1 << 60, float("inf"), -0.25]


def test_load_rejects_other_files(tmp_path):
    bad = tmp_path / "bad.wbvm"
    bad.write_bytes(b"not a zip")
    with pytest.raises(ValueError, match="not a saved VM executable"):
        Executable.load(bad)
    with pytest.raises(FileNotFoundError):
        Executable.load(tmp_path / "missing.wbvm")


def test_saved_executable_runs_in_fresh_process(tmp_path, mlp_lib):
    x, w1, w2, bias = mlp_inputs(seed=3)
    exe = mlp_program(mlp_lib, bias)
    exe.save(tmp_path / "mlp.wbvm")
    np.savez(tmp_path / "inputs.npz", x=x, w1=w1, w2=w2)
    script = textwrap.dedent("""
        import sys
        import numpy as np
        import workbench as wb
        from workbench.runtime.relax_vm import Executable, VirtualMachine
        exe = Executable.load(sys.argv[1] + "/mlp.wbvm")
        inputs = np.load(sys.argv[1] + "/inputs.npz")
        vm = VirtualMachine(exe, wb.cpu())
        out = vm["main"](*(wb.nd.array(inputs[k]) for k in ("x", "w1", "w2")))
        np.save(sys.argv[1] + "/out.npy", out.numpy())
        open(sys.argv[1] + "/text.txt", "w").write(exe.as_text())
    """)
    env = dict(os.environ)
    proc = subprocess.run([sys.executable, "-c", script, str(tmp_path)], capture_output=True,
                          text=True, timeout=120, env=env)
    assert proc.returncode == 0, proc.stderr
    np.testing.assert_allclose(np.load(tmp_path / "out.npy"), mlp_reference(x, w1, w2, bias),
                               rtol=1e-5, atol=1e-5)
    assert (tmp_path / "text.txt").read_text() == exe.as_text()

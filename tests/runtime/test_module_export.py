import os
import pickle
import shutil
import subprocess
import sys
import textwrap

import llvmlite.binding as llvm
import numpy as np
import pytest

import rt_kernels as K
import workbench.nd as nd
from workbench import options
from workbench.runtime import Module, load_module

needs_cc = pytest.mark.skipif(shutil.which("cc") is None and shutil.which("gcc") is None,
                              reason="no C compiler to link a shared library")


@pytest.fixture(scope="module")
def mod():
    return K.build(K.ADD, K.SCALE, K.CHECK)


def _check_add(m):
    a = nd.array(np.arange(5, dtype="float32"))
    c = nd.empty(5)
    m["add"](a, a, c)
    np.testing.assert_array_equal(c.numpy(), 2 * np.arange(5, dtype="float32"))


def test_get_source(mod):
    assert "i32 @add(ptr" in mod.get_source("ll")
    assert mod.get_source() == mod.get_source("ll")
    assert "add:" in mod.get_source("asm")
    with pytest.raises(ValueError, match="unknown format 'ptx'"):
        mod.get_source("ptx")
    bare = Module.from_object(K.compile_kernels(K.ADD)[0])
    with pytest.raises(ValueError, match="'ll' source is not available"):
        bare.get_source("ll")


@needs_cc
def test_export_shared_library_and_reload(mod, tmp_path):
    path = str(tmp_path / "kernels.so")
    mod.export_library(path)
    loaded = load_module(path)
    assert loaded.function_names == mod.function_names
    assert loaded.entry_name == "add"
    _check_add(loaded)
    assert loaded.get_source("ll") == mod.get_source("ll")      # sources travel inside
    with pytest.raises(ValueError, match="shape variable 'n'"):
        loaded["add"](nd.empty(3), nd.empty(4), nd.empty(3))
    # Re-exporting a library module copies it; reloading at the same path sees new contents.
    again = str(tmp_path / "again.so")
    loaded.export_library(again)
    _check_add(load_module(again))
    other = K.build(K.CHECK)
    other.export_library(path)
    assert load_module(path).function_names == ["check"]


@needs_cc
def test_reloaded_library_runs_in_fresh_process(mod, tmp_path):
    path = str(tmp_path / "k.so")
    mod.export_library(path)
    script = textwrap.dedent(f"""
        import sys, numpy as np
        import workbench.runtime as rt
        m = rt.load_module({path!r})
        a = rt.tensor(np.arange(32, dtype="float32").reshape(4, 8))
        b = rt.empty((4, 8), "float32")
        m["scale"](a, 2.0, 1, b)
        assert np.allclose(b.numpy(), a.numpy() * 2 + 1)
        try:
            m["check"](-3)
        except RuntimeError as err:
            print("caught", err)
        print("ok")
    """)
    proc = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True,
                          timeout=60)
    assert proc.returncode == 0, proc.stderr
    assert "caught runtime check failed in kernel 'check'" in proc.stdout
    assert proc.stdout.strip().endswith("ok")


def test_export_object_file(mod, tmp_path):
    path = str(tmp_path / "k.o")
    mod.export_library(path)
    with open(path, "rb") as f:
        assert f.read(4) == b"\x7fELF"
    loaded = load_module(path)
    _check_add(loaded)
    with pytest.raises(ValueError, match="not available"):
        loaded.get_source("ll")


def test_save_artifacts(mod, tmp_path):
    mod.save(str(tmp_path / "k.ll"))
    assert "i32 @add(ptr" in (tmp_path / "k.ll").read_text()
    mod.save(str(tmp_path / "k.s"))
    assert (tmp_path / "k.s").read_text() == mod.get_source("asm")


def test_export_errors(mod, tmp_path):
    with options.override(cc="definitely-not-a-compiler"):
        with pytest.raises(RuntimeError, match="needs a C compiler.*'.o'"):
            mod.export_library(str(tmp_path / "x.so"))
    with pytest.raises(TypeError, match="unsupported options"):
        mod.export_library(str(tmp_path / "x.so"), fcompile=None)
    with pytest.raises(FileNotFoundError, match="no such file"):
        load_module(str(tmp_path / "missing.so"))


@needs_cc
def test_non_pic_object_gives_clear_export_error(tmp_path):
    ir = K._metadata_global({"version": 1, "entry": "g", "functions": [
        {"name": "g", "params": [], "shape_vars": []}]}) + """
@x = global i64 0
define i32 @g(ptr %args) {
  store i64 1, ptr @x
  %p = ptrtoint ptr @x to i32
  ret i32 0
}
"""
    m = llvm.parse_assembly(ir)
    m.triple = llvm.get_process_triple()
    tm = llvm.Target.from_default_triple().create_target_machine(reloc="static",
                                                                 codemodel="small")
    obj = tm.emit_object(m)
    mod = Module.from_object(obj)
    mod["g"]()
    try:
        mod.export_library(str(tmp_path / "g.so"))
    except RuntimeError as err:   # some linkers accept it; if not, the message must help
        assert "linking failed" in str(err)


def test_object_without_metadata_is_rejected():
    m = llvm.parse_assembly("define i32 @f(ptr %a) {\n ret i32 0\n}\n")
    m.triple = llvm.get_process_triple()
    obj = llvm.Target.from_default_triple().create_target_machine(reloc="pic").emit_object(m)
    with pytest.raises(ValueError, match="defines no '__workbench_metadata'"):
        Module.from_object(obj)


def test_pickle_module(mod):
    clone = pickle.loads(pickle.dumps(mod))
    _check_add(clone)
    assert clone.get_source("ll") == mod.get_source("ll")


def test_pickle_library_module(mod, tmp_path):
    if shutil.which("cc") is None and shutil.which("gcc") is None:
        pytest.skip("no C compiler")
    path = str(tmp_path / "p.so")
    mod.export_library(path)
    clone = pickle.loads(pickle.dumps(load_module(path)))
    os.remove(path)
    _check_add(clone)


def test_functions_outlive_module():
    f = K.build(K.ADD)["add"]
    import gc

    gc.collect()
    a = nd.array(np.ones(3, dtype="float32"))
    c = nd.empty(3)
    f(a, a, c)
    assert (c.numpy() == 2).all()

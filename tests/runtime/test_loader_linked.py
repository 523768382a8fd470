"""Loading object code by linking it into a shared library (option ``kernel_loader``): what
``auto`` chooses, and that linked kernels run like MCJIT-loaded ones.

MCJIT maps an object's code and constant sections separately; with PyTorch's ~3 GB of native
libraries mapped they can land more than 2 GB apart and RuntimeDyld aborts the process on a
32-bit relocation, so ``auto`` links (with the C compiler) in such processes."""
import shutil
import subprocess
import sys

import numpy as np
import pytest

import rt_kernels as K
import workbench.nd as nd
from workbench import options
from workbench.runtime import Module, loader

needs_cc = pytest.mark.skipif(shutil.which("cc") is None and shutil.which("gcc") is None,
                              reason="no C compiler to link a shared library")


@needs_cc
def test_linked_kernels_run():
    obj = K.compile_kernels(K.ADD, K.SCALE)[0]
    with options.override(kernel_loader="linked"):
        assert loader.use_linked_loader()
        mod = Module.from_object(obj)
    assert mod._code.origin != "mcjit"
    a = nd.array(np.arange(5, dtype="float32"))
    c = nd.empty(5)
    mod["add"](a, a, c)
    np.testing.assert_array_equal(c.numpy(), 2 * np.arange(5, dtype="float32"))
    with options.override(kernel_loader="mcjit"):
        assert not loader.use_linked_loader()
        assert Module.from_object(obj)._code.origin == "mcjit"


def test_kernel_loader_values_are_checked():
    with pytest.raises(ValueError, match="'auto', 'mcjit' or 'linked'"):
        with options.override(kernel_loader="dlopen"):
            pass


def _auto_choice(prelude: str) -> str:
    code = (f"{prelude}\nfrom workbench.runtime import loader\n"
            "print(loader.use_linked_loader())")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         timeout=300)
    assert out.returncode == 0, out.stderr
    return out.stdout.strip().splitlines()[-1]


@needs_cc
def test_auto_links_once_pytorch_is_loaded():
    assert _auto_choice("import workbench") == "False"
    pytest.importorskip("torch")
    assert _auto_choice("import torch") == "True"

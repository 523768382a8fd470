"""Every model of the zoo through ``from_exported_program``: imported, compiled with
``relax.build``, run on the VirtualMachine, and matching PyTorch to 1e-4 (rel and abs) in
float32. Each model is exported and compiled once (module-scoped fixture)."""
from __future__ import annotations

import numpy as np
import pytest

import frontend_zoo as zoo
from workbench import relax
from workbench.relax.frontend.torch import from_exported_program

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module", params=zoo.MODELS)
def built(request):
    name = request.param
    mod = from_exported_program(zoo.exported(name))
    return name, mod, relax.build(mod, "llvm")


def test_matches_pytorch(built):
    name, _, exe = built
    got = zoo.run_vm(exe, zoo.case(name).args)
    want = zoo.expected(name)
    assert len(got) == len(want)
    for g, w in zip(got, want):
        assert g.shape == w.shape and g.dtype == w.dtype
        assert np.abs(w).max() > 0.1, "the reference output is degenerate"
        zoo.assert_close(g, w, f"{name} (torch importer)")


def test_weights_are_bound_constants(built):
    name, mod, _ = built
    main = mod["main"]
    assert [p.name_hint for p in main.params] == \
        [s.arg.name for s in zoo.exported(name).graph_signature.input_specs
         if s.kind.name == "USER_INPUT"]
    assert main.attrs["num_input"] == len(main.params)


def test_every_kernel_call_knows_its_layers(built):
    """Source locations survive the whole pipeline: every kernel call of the compiled model
    names the PyTorch layers it came from."""
    name, _, exe = built
    spans = exe.call_sources
    kernel_calls = [s for s in spans.values()]
    assert kernel_calls and all(s.sources for s in kernel_calls)
    # (the blocked layout's reorders are the compiler's own kernels, named "layout")
    sources = [src for s in kernel_calls for src in s.sources]
    assert {src.frontend for src in sources} <= {"torch", "workbench"}
    assert all(src.name == "layout" for src in sources if src.frontend == "workbench")
    assert all(s.sources[0].frontend == "torch" or s.label() == "layout" for s in kernel_calls)
    if name == "resnet18":
        labels = {s.label() for s in kernel_calls}
        assert "layer1.0.conv1 + layer1.0.bn1 + layer1.0.relu" in labels, sorted(labels)
        # relu is one module called twice in a BasicBlock; the second call fuses with the
        # residual add and the second conv + bn.
        assert "layer1.0.conv2 + layer1.0.bn2 + layer1.0 + layer1.0.relu" in labels
        op_types = {t for s in kernel_calls for t in s.op_types}
        assert "aten.convolution.default" in op_types

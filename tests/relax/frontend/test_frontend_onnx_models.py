"""Every model of the zoo exported with ``torch.onnx.export`` and imported with ``from_onnx``:
compiled, run on the VirtualMachine, and matching both PyTorch and onnxruntime to 1e-4 (rel
and abs) in float32. The ONNX files come from the same ExportedPrograms as the torch tests."""
from __future__ import annotations

import pytest

import frontend_zoo as zoo
from workbench import relax
from workbench.relax.frontend.onnx import from_onnx

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module", params=zoo.MODELS)
def built(request):
    name = request.param
    model = zoo.onnx_model(name)
    mod = from_onnx(model)
    return name, model, relax.build(mod, "llvm")


def test_matches_pytorch_and_onnxruntime(built):
    name, model, exe = built
    args = zoo.case(name).args
    got = zoo.run_vm(exe, args)
    want = zoo.expected(name)
    ort = zoo.onnxruntime_outputs(model, args)
    assert len(got) == len(want) == len(ort)
    for g, w, o in zip(got, want, ort):
        assert g.shape == w.shape and g.dtype == w.dtype
        zoo.assert_close(g, w, f"{name} (ONNX importer) vs PyTorch")
        zoo.assert_close(g, o, f"{name} (ONNX importer) vs onnxruntime")


def test_kernel_calls_name_nodes_and_modules(built):
    """ONNX source locations: node names and op types, plus the PyTorch module paths the
    dynamo exporter records."""
    name, model, exe = built
    spans = list(exe.call_sources.values())
    assert spans and all(s.sources for s in spans)
    node_names = {n.name for n in model.graph.node}
    sources = [src for s in spans for src in s.sources]
    # every kernel names its nodes, but the reorders of the blocked layout, named "layout"
    layout = [src for src in sources if src.frontend == "workbench"]
    assert all(src.name == "layout" and src.op_type == "layout_transform" for src in layout)
    assert all(src.frontend == "onnx" and src.name in node_names for src in sources
               if src not in layout)
    if name == "resnet18":
        convs = [src for src in sources if src.op_type == "Conv"]
        # The exporter folds batch norm into the conv; the conv keeps the module it came from.
        assert "layer1.0.bn1" in {src.module_path for src in convs}


@pytest.mark.parametrize("name", ["bert", "gpt2"])
def test_legacy_exporter_graphs(name):
    """Graphs of the TorchScript-based exporter (opset 17): Identity weights and shape
    arithmetic (Shape, Gather, Concat, ConstantOfShape, Mod, ...) computed at import time."""
    model = zoo.onnx_model_legacy(name)
    exe = relax.build(from_onnx(model), "llvm")
    args = zoo.case(name).args
    got = zoo.run_vm(exe, args)
    for g, w, o in zip(got, zoo.expected(name), zoo.onnxruntime_outputs(model, args)):
        zoo.assert_close(g, w, f"{name} (legacy ONNX) vs PyTorch")
        zoo.assert_close(g, o, f"{name} (legacy ONNX) vs onnxruntime")

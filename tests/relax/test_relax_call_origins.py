"""Call origins: the spans of kernel calls as readable text (relax.call_origins), handed to the
runtime by relax.build (exe.call_origins), put on every profiled call by the VM, saved with
the executable; and what a model without spans (nn frontend) gets instead. Imported models
are in tests/relax/frontend/test_frontend_profiling.py."""
from __future__ import annotations

import numpy as np
import pytest

import workbench as wb
from workbench import relax
from workbench.relax import op as R
from workbench.relax.call_origins import op_name, origin_of
from workbench.relax.span import Source, Span
from workbench.runtime.relax_vm import CallOrigin, Executable


def _src(path: str, op: str = "aten.relu.default", frontend: str = "torch",
         name: str | None = None) -> Source:
    return Source(frontend, name or (path.replace(".", "_") or "n"), op, path,
                  "Mod" if path else "")


def test_labels_are_relative_to_the_common_module():
    conv, bn = "aten.convolution.default", "aten._native_batch_norm_legit_no_training.default"
    block = Span((_src("layer1.0.conv2", conv), _src("layer1.0.bn2", bn),
                  _src("layer1.0", "aten.add.Tensor"), _src("layer1.0.relu")))
    o = origin_of(block)
    assert o == CallOrigin("layer1.0.conv2 + bn2 + add + relu", "layer1.0",
                           "convolution + batch_norm + add + relu")
    stem = origin_of(Span((_src("conv1", conv), _src("bn1", bn), _src("relu"))))
    assert (stem.layer, stem.module) == ("conv1 + bn1 + relu", "")
    # one layer (several ops of it): the layer itself, its path as the module
    single = origin_of(Span((_src("h.0.attn.c_attn", "aten.linear.default"),
                             _src("h.0.attn.c_attn", "aten.add.Tensor"))))
    assert single == CallOrigin("h.0.attn.c_attn", "h.0.attn.c_attn", "linear + add")
    # an op of the common module's own forward is named by its op
    tail = origin_of(Span((_src("layer1.0", "aten.add.Tensor"), _src("layer1.0.relu"))))
    assert tail.layer == "layer1.0.add + relu" and tail.module == "layer1.0"
    # top-level function ops (no module path) keep their node names
    mixed = origin_of(Span((_src("fc", "aten.addmm.default"),
                            Source("torch", "view", "aten.view.default"))))
    assert mixed == CallOrigin("fc + view", "", "addmm + view")


def test_onnx_sources_use_node_names_and_op_types():
    plain = Span((Source("onnx", "node_Conv_0", "Conv"), Source("onnx", "node_Relu_1", "Relu")))
    assert origin_of(plain) == CallOrigin("node_Conv_0 + node_Relu_1", "", "Conv + Relu")
    scoped = Span((Source("onnx", "node_Conv_0", "Conv", "block.conv", "Conv2d"),
                   Source("onnx", "node_Relu_1", "Relu", "block.act", "ReLU")))
    assert origin_of(scoped) == CallOrigin("block.conv + act", "block", "Conv + Relu")
    assert op_name(Source("torch", "x", "aten.max_pool2d_with_indices.default")) == "max_pool2d"


def _tagged_model():
    """Two ``relu(conv(x) + b)`` blocks, each op tagged as an imported model would be."""
    rng = np.random.default_rng(0)
    bb = relax.BlockBuilder()
    x = relax.Var("x", relax.TensorStructInfo((1, 4, 6, 6), "float32"))
    with bb.function("main", [x]):
        with bb.dataflow():
            h = x
            for blk in ("blocks.0", "blocks.1"):
                w = relax.const(rng.standard_normal((4, 4, 3, 3)).astype("float32"))
                b = relax.const(rng.standard_normal((1, 4, 1, 1)).astype("float32"))
                with bb.span_scope(Span((_src(f"{blk}.conv", "aten.convolution.default"),))):
                    h = bb.emit(R.add(R.nn.conv2d(h, w, padding=1), b))
                with bb.span_scope(Span((_src(f"{blk}.act"),))):
                    h = bb.emit(R.nn.relu(h))
            out = bb.emit_output(h)
        bb.emit_func_output(out)
    return bb.get()


def test_build_hands_origins_to_the_vm_profile_and_they_are_saved(tmp_path):
    mod = _tagged_model()
    exe = relax.build(mod, "llvm")
    # (the reorder out of the blocked layout is the compiler's own: layer "layout")
    assert sorted(o.layer for o in exe.call_origins.values()) == [
        "blocks.0.conv + act", "blocks.1.conv + act", "layout"]
    assert set(exe.call_origins) == set(exe.call_sources)
    x = np.random.default_rng(1).standard_normal((1, 4, 6, 6)).astype("float32")
    vm = relax.VirtualMachine(exe, wb.cpu(), profile=True)
    np.testing.assert_allclose(vm["main"](wb.nd.array(x)).numpy(),
                               relax.testing.evaluate_numpy(mod, "main", x),
                               rtol=1e-4, atol=1e-4)
    report = vm.profile("main", wb.nd.array(x))
    kernels = [c for c in report.calls if c["Name"].startswith("fused_")]
    assert [c["Layer"] for c in kernels] == ["blocks.0.conv + act", "blocks.1.conv + act"]
    assert {c["Module"] for c in kernels} == {"blocks.0", "blocks.1"}
    assert {c["Op Type"] for c in kernels} == {"convolution + relu"}
    # calls without a source (input checks) get no source metrics
    assert all("Layer" not in c for c in report.calls if c["Name"].startswith("vm."))
    by_block = report.group_by("layer", depth=1).set_index("Layer")
    assert by_block.loc["blocks", "Count"] == 2
    assert by_block.loc["blocks", "Duration (us)"] == pytest.approx(
        sum(c["Duration (us)"].value for c in kernels))

    path = tmp_path / "model.wbexe"
    exe.save(path)
    loaded = Executable.load(path)
    assert loaded.call_origins == exe.call_origins
    again = relax.VirtualMachine(loaded, wb.cpu(), profile=True).profile("main",
                                                                         wb.nd.array(x))
    assert [c["Layer"] for c in again.calls if "Layer" in c and c["Layer"] != "layout"] == \
        [c["Layer"] for c in kernels]


def test_a_model_without_spans_profiles_as_before():
    from workbench.relax.frontend import nn

    class MLP(nn.Module):
        def __init__(self):
            self.fc1 = nn.Linear(8, 16)
            self.fc2 = nn.Linear(16, 4)

        def forward(self, x):
            return self.fc2(nn.relu(self.fc1(x)))

    mod, params = MLP().export_tvm({"forward": {"x": nn.spec.Tensor((2, 8), "float32")}})
    exe = relax.build(mod, "llvm")
    assert exe.call_origins == {}
    rng = np.random.default_rng(0)
    args = [wb.nd.array(rng.standard_normal((2, 8)).astype("float32"))] + [
        wb.nd.array(rng.standard_normal(p.shape).astype(p.dtype)) for _, p in params]
    report = relax.VirtualMachine(exe, wb.cpu(), profile=True).profile("forward", *args)
    assert not any("Layer" in c for c in report.calls)
    assert "Layer" not in report.table().splitlines()[0]
    # grouping still works: by kernel, and by op type from the kernel names
    layers = report.group_by("layer")
    kernels = [n for n in layers["Layer"] if not n.startswith("vm.")]
    assert kernels and all(n in exe.kernel_names for n in kernels)
    ops = set(report.group_by("op_type")["Op Type"])
    assert any(o.startswith("matmul") for o in ops)
    assert not any(o.startswith("fused_") or o[-1].isdigit() for o in ops
                   if not o.startswith("vm."))


def test_call_origin_checks_its_fields():
    with pytest.raises(TypeError, match="CallOrigin.layer must be a str"):
        CallOrigin(3)
    with pytest.raises(ValueError, match="call origin must be"):
        CallOrigin.from_json(["a", "b"])

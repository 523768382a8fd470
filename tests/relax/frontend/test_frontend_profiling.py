"""Source-level profiling of imported models: a small ResNet-style PyTorch module exported by
torch.export (and by the ONNX exporter), imported, compiled and run on the VM, then profiled.
Every kernel call names the PyTorch layers it came from in the Report, its DataFrame, the
grouped views, ReportView, VMStepper and the tuning dashboard's task table."""
from __future__ import annotations

import contextlib
import io
import warnings

import numpy as np
import pytest

torch = pytest.importorskip("torch")

import workbench as wb  # noqa: E402
from workbench import relax  # noqa: E402
from workbench.relax.frontend.torch import from_exported_program  # noqa: E402

from small_models import tiny_resnet  # noqa: E402


@pytest.fixture(scope="module")
def model():
    return tiny_resnet()


@pytest.fixture(scope="module")
def built(model):
    _, x, ep, want = model
    mod = from_exported_program(ep)
    exe = relax.build(mod, "llvm")
    vm = relax.VirtualMachine(exe, wb.cpu(), profile=True)
    got = vm["main"](wb.nd.array(x.numpy()))
    np.testing.assert_allclose(got[0].numpy(), want, rtol=1e-4, atol=1e-4)
    return mod, exe, vm, vm.profile("main", wb.nd.array(x.numpy()))


BLOCK_LAYERS = ["layer1.0.conv1 + bn1 + relu", "layer1.0.conv2 + bn2 + add + relu",
                "layer1.1.conv1 + bn1 + relu", "layer1.1.conv2 + bn2 + add + relu"]


def test_every_kernel_is_named_by_its_pytorch_layers(built):
    _, exe, _, report = built
    kernels = [c for c in report.calls if c["Name"] in exe.kernel_names]
    layers = [c["Layer"] for c in kernels]
    assert layers[0] == "conv1 + bn1 + relu"
    assert layers[1:5] == BLOCK_LAYERS
    assert "fc" in layers
    first = kernels[1]
    assert first["Module"] == "layer1.0" and first["Op Type"] == \
        "convolution + batch_norm + relu"
    frame = report.to_dataframe()
    assert {"Layer", "Module", "Op Type"} <= set(frame.columns)
    assert frame.loc[frame["Name"] == first["Name"], "Layer"].tolist()[:1] == [BLOCK_LAYERS[0]]
    # the two blocks' first convolutions share one kernel; the aggregated table says so
    table = report.table()
    assert "layer1.0.conv1 + bn1 + relu (+1 more)" in table


def test_fastest_of_several_runs(built):
    from workbench.runtime.profiling import Report
    _, _, vm, _ = built
    x = wb.nd.array(np.random.default_rng(2).standard_normal((1, 3, 12, 12)).astype("float32"))
    runs = [vm.profile("main", x) for _ in range(3)]
    quick = Report.fastest_of(runs)
    for k, call in enumerate(quick.calls):
        assert call["Duration (us)"].value == min(r.calls[k]["Duration (us)"].value
                                                  for r in runs)
        assert call.get("Layer") == runs[0].calls[k].get("Layer")
    assert quick.group_by("layer", depth=2)["Duration (us)"].sum() <= min(
        r.group_by("layer", depth=2)["Duration (us)"].sum() for r in runs)


def test_grouped_by_block_and_by_op_type(built):
    _, _, _, report = built
    kernel_time = sum(c["Duration (us)"].value for c in report.calls if "Layer" in c)
    blocks = report.group_by("layer", depth=2).set_index("Layer")
    assert {"layer1.0", "layer1.1", "conv1 + bn1 + relu", "fc"} <= set(blocks.index)
    assert blocks.loc["layer1.0", "Count"] == 2
    ops = report.group_by("op_type").set_index("Op Type")
    assert ops.loc["convolution + batch_norm + relu", "Count"] == 3   # stem + 2 blocks
    assert ops.loc["convolution + batch_norm + add + relu", "Count"] == 2
    sourced = ops[[not i.startswith("vm.") for i in ops.index]]
    assert sourced["Duration (us)"].sum() == pytest.approx(kernel_time)


def test_report_view_groups_by_layer(built):
    pytest.importorskip("ipywidgets")
    from workbench.widgets import ReportView
    _, _, _, report = built
    view = ReportView(report)
    assert view.group_dropdown.value == "Layer" and "Groups" in view.tabs.titles
    assert view.bar_figure.layout.title.text == "Time by layer"
    assert set(BLOCK_LAYERS) <= set(view.bar_figure.data[0].y)
    view.depth_dropdown.value = 1
    assert "layer1" in view.bar_figure.data[0].y
    assert "<td class='wb-text'>layer1</td>" in view.groups_html.value
    view.group_dropdown.value = "Op Type"
    assert view.bar_figure.layout.title.text == "Time by op type"
    assert "convolution + batch_norm + relu" in view.share_figure.data[0].labels
    view.filter_text.value = "layer1.1"   # the filter matches layers too
    assert set(view.frame["Layer"]) <= {"layer1.1.conv1 + bn1 + relu",
                                        "layer1.1.conv2 + bn2 + add + relu",
                                        "layer1.0.conv1 + bn1 + relu (+1 more)",
                                        "layer1.0.conv2 + bn2 + add + relu (+1 more)"}
    compare = ReportView(report, baseline=report, name="again", baseline_name="first")
    assert compare.diff_frame.columns[0] == "Layer"   # matched by layer
    assert "layer1.0.conv1 + bn1 + relu" in compare.diff_figure.data[0].y


def test_vm_stepper_names_layers_and_runs_to_one(built, model):
    pytest.importorskip("ipywidgets")
    from workbench.widgets import VMStepper
    _, x, _, _ = model
    _, exe, _, _ = built
    vm = relax.VirtualMachine(exe, wb.cpu())
    stepper = VMStepper(vm, "main", wb.nd.array(x.numpy()))
    try:
        assert stepper.wait_paused(60)
        assert "layer1.1.conv1 + bn1 + relu" in stepper.run_to_dropdown.options
        stepper.run_to("layer1.1.conv1*")
        assert stepper.wait_paused(60)
        assert stepper.pending.layer == "layer1.1.conv1 + bn1 + relu"
        assert "layer1.1.conv1 + bn1 + relu" in stepper.call_html.value
        stepper.continue_()
        assert stepper.core.wait_done(60)
        layers = stepper.frame["layer"].tolist()
        assert BLOCK_LAYERS[0] in layers and "" in layers   # builtins have none
        assert "<th class='l'>layer</th>" in stepper.history_html.value
    finally:
        stepper.close()


def test_tasks_and_dashboard_name_their_layers(model):
    from workbench.meta_schedule.relax_integration import extract_tasks
    _, _, ep, _ = model
    tasks = {t.task_name: t for t in extract_tasks(from_exported_program(ep), "llvm")}
    shared = [t for t in tasks.values() if t.weight == 2]
    assert shared and all(len(t.layers) == 2 for t in shared)
    assert any(t.layers == [BLOCK_LAYERS[0], BLOCK_LAYERS[2]] for t in shared)
    pytest.importorskip("ipywidgets")
    from workbench.widgets import TuningDashboard

    class Record:
        def __init__(self, name):
            self.ctx = type("Ctx", (), {"task_name": name, "mod": None})()
            self.task_weight, self.flop, self.is_terminated = 1.0, 1e6, False

    class Scheduler:
        tasks_ = [Record(name) for name in tasks]

    board = TuningDashboard("text", file=io.StringIO())
    board.set_task_layers({n: t.layers for n, t in tasks.items()})
    board.progress.sync_tasks(Scheduler())
    frame = board.frame
    assert list(frame.columns[:3]) == ["ID", "Name", "Layers"]
    shown = dict(zip(frame["Name"], frame["Layers"]))
    assert shown[shared[0].task_name].endswith("(+1 more)")


def test_onnx_import_names_kernels_by_node_scope(model):
    pytest.importorskip("onnx")
    from workbench.relax.frontend.onnx import from_onnx
    m, x, ep, want = model
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        with contextlib.redirect_stdout(io.StringIO()):
            program = torch.onnx.export(ep, (x,), dynamo=True, verbose=False)
    exe = relax.build(from_onnx(program.model_proto), "llvm")
    vm = relax.VirtualMachine(exe, wb.cpu(), profile=True)
    np.testing.assert_allclose(vm["main"](wb.nd.array(x.numpy())).numpy(), want,
                               rtol=1e-4, atol=1e-4)
    report = vm.profile("main", wb.nd.array(x.numpy()))
    kernels = [c for c in report.calls if "Layer" in c]
    assert len(kernels) >= 6
    ops = {o for c in kernels for o in c["Op Type"].split(" + ")}
    assert "Conv" in ops   # ONNX op types
    # The dynamo exporter records module scopes, and its optimizer folds each BatchNorm into
    # the Conv before it (the folded Conv is scoped at the batch norm): the block's layers
    # read as the torch import's without their convolutions.
    layers = [c["Layer"] for c in kernels]
    assert {"layer1.0.bn1 + relu", "layer1.1.bn2 + Add + relu", "fc"} <= set(layers), layers
    assert any(c["Layer"] == "layer1.1.bn2 + Add + relu" and c["Module"] == "layer1.1"
               and c["Op Type"] == "Conv + Add + Relu" for c in kernels)

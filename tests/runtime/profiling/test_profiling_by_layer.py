"""Reports of imported models: calls carry Layer / Module / Op Type metrics; Report.group_by
and Report.diff(by=...) group by them; TVM's formats keep working (the columns are extra
metrics). Built by hand here; tests/relax/frontend/test_frontend_profiling.py gets the same
reports from the VM running real imported models."""
import pytest

from workbench.runtime.profiling import Count, Duration, Percent, Report

pd = pytest.importorskip("pandas")

SHAPES = "float32[1, 8, 4, 4]"


def call(name, dur, layer=None, module="", op=None):
    row = {"Name": name, "Duration (us)": Duration(dur), "Count": Count(1), "Device": "cpu0",
           "Argument Shapes": SHAPES, "Percent": Percent(dur)}
    if layer is not None:
        row.update({"Layer": layer, "Module": module, "Op Type": op})
    return row


def model_report(scale: float = 1.0, rename: str = "") -> Report:
    """A small ResNet-like run: a stem spanning three top-level modules, two blocks sharing
    one kernel, a classifier, and a runtime builtin without a source."""
    conv = "convolution + batch_norm + relu"
    return Report(
        [call("vm.builtin.check_tensor_info", 1.0),
         call("fused_conv2d_batch_norm_relu", 20.0 * scale, "conv1 + bn1 + relu", "", conv),
         call("fused_conv2d1_batch_norm1_relu1" + rename, 10.0 * scale,
              "layer1.0.conv1 + bn1 + relu", "layer1.0", conv),
         call("fused_conv2d1_batch_norm1_add_relu1", 12.0 * scale,
              "layer1.0.conv2 + bn2 + add + relu", "layer1.0",
              "convolution + batch_norm + add + relu"),
         call("fused_conv2d1_batch_norm1_relu1" + rename, 11.0 * scale,
              "layer1.1.conv1 + bn1 + relu", "layer1.1", conv),
         call("fused_conv2d2_batch_norm2_relu2", 30.0 * scale,
              "layer2.0.conv1 + bn1 + relu", "layer2.0", conv),
         call("fused_matmul_add", 5.0, "fc", "fc", "addmm")],
        {"cpu0": {"Name": "Total", "Duration (us)": Duration(100.0), "Count": Count(1),
                  "Device": "cpu0"}},
        {"Executor": "VM"})



def test_group_by_can_leave_out_vm_builtins():
    r = model_report()
    # by default every call counts (the groups add up to the calls' total) ...
    assert "vm.builtin.check_tensor_info" in r.group_by("layer", depth=1)["Layer"].tolist()
    # ... and builtins=False keeps only the model's layers, for a plot of them
    for by, depth in (("layer", 1), ("layer", None), ("op_type", None), ("name", None)):
        groups = r.group_by(by, depth=depth, builtins=False)
        labels = groups.iloc[:, 0].tolist()
        assert not any(str(x).startswith("vm.") for x in labels), (by, labels)
        assert groups["Duration (us)"].sum() == pytest.approx(88.0)
    with pytest.raises(TypeError, match="builtins must be a bool"):
        r.group_by("layer", builtins="no")

def test_group_by_layer_op_type_and_name():
    r = model_report()
    by_layer = r.group_by("layer")
    assert list(by_layer.columns) == ["Layer", "Duration (us)", "Percent", "Count", "Kernels"]
    assert by_layer["Layer"].tolist()[:2] == ["layer2.0.conv1 + bn1 + relu",
                                             "conv1 + bn1 + relu"]
    # a call without a source (runtime builtin) is its own group, by name
    assert "vm.builtin.check_tensor_info" in by_layer["Layer"].tolist()
    assert by_layer["Duration (us)"].sum() == pytest.approx(89.0)

    blocks = r.group_by("layer", depth=1).set_index("Layer")
    # layer1's three calls are summed; the stem spans three top-level modules: own label
    assert blocks.loc["layer1", "Duration (us)"] == pytest.approx(33.0)
    assert blocks.loc["layer1", "Count"] == 3
    assert blocks.loc["layer1", "Kernels"] == ("fused_conv2d1_batch_norm1_relu1, "
                                                "fused_conv2d1_batch_norm1_add_relu1")
    assert blocks.loc["conv1 + bn1 + relu", "Duration (us)"] == pytest.approx(20.0)
    assert list(blocks.index[:3]) == ["layer1", "layer2", "conv1 + bn1 + relu"]
    per_block = r.group_by("layer", depth=2).set_index("Layer")
    assert per_block.loc["layer1.0", "Duration (us)"] == pytest.approx(22.0)
    assert per_block.loc["layer1.1", "Duration (us)"] == pytest.approx(11.0)
    assert "fc" in per_block.index  # one part deep: kept as it is

    ops = r.group_by("op_type").set_index("Op Type")
    assert ops.loc["convolution + batch_norm + relu", "Duration (us)"] == pytest.approx(71.0)
    assert ops.loc["convolution + batch_norm + relu", "Count"] == 4
    names = r.group_by("name").set_index("Name")
    assert names.loc["fused_conv2d1_batch_norm1_relu1", "Count"] == 2


def test_group_by_without_sources_falls_back_to_kernel_names():
    r = Report([call("fused_conv2d1_add1_relu1", 3.0), call("fused_conv2d_add_relu", 2.0),
                call("max_pool2d", 1.0), call("vm.builtin.reshape", 0.5)], {}, {})
    assert r.group_by("layer")["Layer"].tolist() == [
        "fused_conv2d1_add1_relu1", "fused_conv2d_add_relu", "max_pool2d",
        "vm.builtin.reshape"]
    ops = r.group_by("op_type")
    # counters go, "2d" stays; both convolution kernels are one op type
    assert ops["Op Type"].tolist() == ["conv2d_add_relu", "max_pool2d", "vm.builtin.reshape"]
    assert ops["Duration (us)"].tolist() == [5.0, 1.0, 0.5]
    assert r.group_by("layer", depth=1)["Layer"].tolist()[0] == "fused_conv2d1_add1_relu1"


def test_group_by_checks_its_arguments():
    r = model_report()
    with pytest.raises(ValueError, match="by must be one of"):
        r.group_by("module")
    with pytest.raises(ValueError, match="depth applies to by='layer'"):
        r.group_by("op_type", depth=1)
    with pytest.raises(ValueError, match="depth must be an int >= 1"):
        r.group_by("layer", depth=0)
    with pytest.raises(ValueError, match="depth needs by='layer'"):
        r.diff(r, depth=1)


def test_aggregated_rows_of_a_shared_kernel_name_its_layers():
    table = model_report().table()
    line = next(x for x in table.splitlines() if x.startswith("fused_conv2d1_batch_norm1_relu1"))
    # two layers share the kernel: the first is named, the rest counted
    assert "layer1.0.conv1 + bn1 + relu (+1 more)" in line
    assert "convolution + batch_norm + relu" in line
    header = table.splitlines()[0]
    assert "Layer" in header and "Op Type" in header
    assert "Module" not in header  # grouping data, shown through Layer
    frame = model_report().to_dataframe(aggregate=True).set_index("Name")
    assert frame.loc["fused_conv2d1_batch_norm1_relu1", "Module"] == "layer1"


def test_tvm_formats_keep_the_source_metrics():
    r = model_report()
    back = Report.from_json(r.json())
    assert back == r
    header = r.csv().splitlines()[0].split(",")
    assert {"Layer", "Module", "Op Type"} <= set(header)
    assert header == sorted(header)  # TVM's CSV: metric names in byte order
    assert '"layer1.0.conv2 + bn2 + add + relu"' in r.csv()


def test_diff_by_layer_matches_renamed_kernels():
    before, after = model_report(), model_report(scale=0.5, rename="_prepacked")
    calls = before.diff(after)
    # call by call, a renamed kernel does not match, but each row says its layer
    assert set(calls["Change"]) >= {"added", "removed"}
    assert calls["Layer"].iloc[1] == "conv1 + bn1 + relu"
    by_layer = before.diff(after, by="layer", baseline_name="untuned", name="tuned")
    assert list(by_layer.columns) == ["Layer", "untuned (us)", "tuned (us)", "Delta (us)",
                                      "Speedup", "Change"]
    row = by_layer.set_index("Layer").loc["layer1.1.conv1 + bn1 + relu"]
    assert row["Speedup"] == pytest.approx(2.0) and row["Change"] == "faster"
    assert set(by_layer["Change"]) == {"faster", "same"}  # fc and the builtin kept their time
    blocks = before.diff(after, by="layer", depth=1)
    assert blocks.set_index("Layer").loc["layer1", "New (us)"] == pytest.approx(16.5)
    assert blocks.attrs["title"].startswith("Baseline -> New: ")
    ops = before.diff(after, by="op_type")
    assert ops.set_index("Op Type").loc["addmm", "Change"] == "same"

"""ReportView built without a browser: the widget state and figure data are checked."""
import pytest

pytest.importorskip("ipywidgets")
pytest.importorskip("plotly")

from workbench.runtime.profiling import Count, Duration, Percent, Report  # noqa: E402
from workbench.widgets import ReportView  # noqa: E402


def call(name, dur, start, shapes="float32[8]", device="cpu0"):
    return {"Name": name, "Duration (us)": Duration(dur), "Count": Count(1), "Device": device,
            "Argument Shapes": shapes, "Percent": Percent(dur / 40 * 100),
            "Start (us)": Duration(start)}


def baseline() -> Report:
    return Report(
        [call("reshape", 1.0, 0.5), call("matmul", 10.0, 2.0), call("relu", 2.5, 13.0),
         call("matmul", 8.0, 16.0)],
        {"cpu0": {"Name": "Total", "Duration (us)": Duration(40.0), "Count": Count(1),
                  "Device": "cpu0", "Start (us)": Duration(0.0)}},
        {"Number of threads": Count(2), "Executor": "VM"})


def faster_matmul() -> Report:
    return Report([call("reshape", 1.0, 0.5), call("matmul", 5.0, 2.0),
                   call("relu", 3.0, 8.0), call("matmul", 4.0, 12.0)], {}, {})


def test_initial_state_is_the_aggregated_table_by_duration():
    view = ReportView(baseline())
    assert view.frame["Name"].tolist() == ["matmul", "relu", "reshape"]
    assert view.frame["Duration (us)"].tolist() == [18.0, 2.5, 1.0]
    assert view.frame["Count"].tolist() == [2, 1, 1]
    assert "<td class='wb-text'>matmul</td>" in view.table_html.value and "18.00" in view.table_html.value
    assert "<b>3</b> rows, 21.50 us in calls; cpu0 total 40.00 us" == view.summary_html.value
    assert view.tabs.titles == ("Table", "Time by operator", "Share", "Timeline")
    assert view.bar_figure.data[0].y == ("matmul", "relu", "reshape")
    assert view.bar_figure.data[0].x == (18.0, 2.5, 1.0)
    assert view.share_figure.data[0].labels == ("matmul", "relu", "reshape")
    assert view.share_figure.data[0].values == (18.0, 2.5, 1.0)


def test_aggregate_toggle_filter_and_sort():
    view = ReportView(baseline())
    view.aggregate_toggle.value = False
    assert view.frame["Name"].tolist() == ["matmul", "matmul", "relu", "reshape"]
    assert view.frame["Duration (us)"].tolist() == [10.0, 8.0, 2.5, 1.0]
    view.sort_dropdown.value = "(original order)"
    assert view.frame["Name"].tolist() == ["reshape", "matmul", "relu", "matmul"]
    view.filter_text.value = "MAT"
    assert view.frame["Name"].tolist() == ["matmul", "matmul"]
    assert "relu" not in view.table_html.value
    assert view.bar_figure.data[0].y == ("matmul",) and view.bar_figure.data[0].x == (18.0,)
    view.filter_text.value = ""
    view.sort_dropdown.value = "Name"
    view.ascending_check.value = True
    assert view.frame["Name"].tolist() == ["matmul", "matmul", "relu", "reshape"]
    view.aggregate_toggle.value = True
    assert view.frame["Name"].tolist() == ["matmul", "relu", "reshape"]
    assert "Start (us)" in view.sort_dropdown.options


def test_timeline_uses_recorded_start_times():
    view = ReportView(baseline())
    bar = view.timeline_figure.data[0]
    assert bar.base == (0.5, 2.0, 13.0, 16.0)
    assert bar.x == (1.0, 10.0, 2.5, 8.0)
    assert bar.y == ("cpu0",) * 4
    assert bar.hovertext[1] == "matmul: 10.00 us at 2.00 us"
    assert bar.marker.color[1] == bar.marker.color[3] != bar.marker.color[0]
    assert view.timeline_figure.layout.title.text == "Timeline"
    view.filter_text.value = "relu"
    assert view.timeline_figure.data[0].base == (13.0,)


def test_diff_tab_compares_two_reports():
    view = ReportView(faster_matmul(), baseline=baseline(), name="blocked",
                      baseline_name="naive")
    # every title and header says which run is compared with which
    assert view.tabs.titles[-1] == "Diff: naive -> blocked"
    # total of the calls in both runs: 21.5 us before, 13 us after
    assert view.diff_frame.attrs["title"] == "naive -> blocked: 1.65x faster"
    assert "naive -&gt; blocked: 1.65x faster" in view.diff_summary_html.value
    assert view.diff_figure.layout.title.text == "Speedup per call, naive -> blocked"
    assert view.diff_figure.layout.xaxis.title.text == \
        "naive time / blocked time (> 1: blocked is faster)"
    for header in ("naive (us)", "blocked (us)", "Speedup (naive / blocked)",
                   "blocked vs naive", "Delta (us, blocked - naive)"):
        assert f">{header}</th>" in view.diff_html.value, header
    assert view.summary_html.value.startswith("blocked: ")
    # aggregated: baseline groups by descending duration
    assert view.diff_frame["Name"].tolist() == ["matmul", "relu", "reshape"]
    assert view.diff_frame["Change"].tolist() == ["faster", "slower", "same"]
    assert view.diff_figure.data[0].x == (2.0, 2.5 / 3.0, 1.0)
    assert view.diff_figure.data[0].y == ("matmul", "relu", "reshape")
    assert view.diff_figure.data[0].marker.color[0] != view.diff_figure.data[0].marker.color[1]
    view.aggregate_toggle.value = False
    assert view.diff_frame["Occurrence"].tolist() == [0, 0, 0, 1]
    assert view.diff_figure.data[0].y == ("reshape #0", "matmul #0", "relu #0", "matmul #1")
    assert view.diff_figure.data[0].x[1] == 2.0
    assert "faster" in view.diff_html.value


def test_top_k_groups_the_rest():
    view = ReportView(baseline(), top_k=1)
    assert view.bar_figure.data[0].y == ("matmul", "other")
    assert view.bar_figure.data[0].x == (18.0, 3.5)


def test_report_without_timestamps_gets_a_synthetic_timeline():
    r = Report([{"Name": "a", "Duration (us)": Duration(2.0), "Device": "cpu0"},
                {"Name": "b", "Duration (us)": Duration(3.0), "Device": "cpu0"}], {}, {})
    view = ReportView(r)
    assert view.timeline_figure.data[0].base == (0.0, 2.0)
    assert "laid end to end" in view.timeline_figure.layout.title.text


def test_static_fallback_and_argument_checks():
    view = ReportView(baseline())
    bundle = view._repr_mimebundle_()
    assert "application/vnd.jupyter.widget-view+json" in bundle
    assert bundle["text/html"].startswith('<div class="wb-report"')
    assert bundle["text/plain"].startswith("Name")
    with pytest.raises(TypeError, match="report must be a Report"):
        ReportView("x")
    with pytest.raises(TypeError, match="baseline must be a Report"):
        ReportView(baseline(), baseline=3)
    # the old, ambiguous argument is refused with the call to write instead
    with pytest.raises(TypeError, match=r"ReportView\(new_report, baseline=old_report"):
        ReportView(baseline(), other=faster_matmul())
    with pytest.raises(TypeError, match="positional"):
        ReportView(baseline(), faster_matmul())
    with pytest.raises(ValueError, match="must differ"):
        ReportView(baseline(), baseline=baseline(), name="x", baseline_name="x")
    with pytest.raises(ValueError, match="top_k"):
        ReportView(baseline(), top_k=0)


# ---- real-model sizes: condensed shapes, one line per row, pages, builtins ---------------------

def conv_call(i, dur, start):
    shapes = ", ".join(["float32[1, 64, 56, 56]", "float32[64, 64, 3, 3]", "float32[64]",
                        "float32[64]", "float32[64]", "float32[64]", "float32[64]",
                        "float32[64]", "float32[1, 64, 56, 56]"])
    row = call(f"fused_conv2d{i}_batch_norm{i}_relu{i}", dur, start, shapes)
    row.update({"Layer": f"layer{i % 4 + 1}.{i}.conv1 + bn1 + relu (+3 more)",
                "Module": f"layer{i % 4 + 1}.{i}", "Op Type": "convolution + batch_norm + relu"})
    return row


def model_report(n=120) -> Report:
    """A model-sized report: builtins around ``n`` convolution calls with long cells."""
    calls = [call("vm.builtin.check_tensor_info", 3.0, 0.0),
             call("vm.builtin.match_shape", 2.0, 3.0)]
    calls += [conv_call(i, 10.0 + i, 5.0 + 200 * i) for i in range(n)]
    calls.append(call("vm.builtin.make_tuple", 1.0, 5.0 + 200 * n))
    return Report(calls, {}, {})


def test_condense_shapes():
    from workbench.widgets.table_html import condense_shapes
    assert condense_shapes("float32[1, 64, 56, 56], float32[64, 64, 3, 3], "
                           "float32[1, 64, 56, 56]") == "3 args: 1x64x56x56 ... -> 1x64x56x56"
    assert condense_shapes("float32[1, 128, 1, 1], float32[1, 128]") == "1x128x1x1 -> 1x128"
    assert condense_shapes("int64[2]") == "int64 2"
    assert condense_shapes("float32[]") == "scalar"
    assert condense_shapes("") == "" and condense_shapes("n/a") == "n/a"


def test_long_cells_are_condensed_with_the_full_text_in_a_title():
    view = ReportView(model_report(3))
    page = view.table_html.value
    assert "<td class='wb-text' title='float32[1, 64, 56, 56], float32[64, 64, 3, 3], " in page
    assert ">9 args: 1x64x56x56 ... -&gt; 1x64x56x56</td>" in page
    # a long layer label is cut by the style (one line) and kept whole in its title
    assert "title='layer1.0.conv1 + bn1 + relu (+3 more)'" in page
    assert "white-space: nowrap" in page and "text-overflow: ellipsis" in page
    assert "overflow-x: auto" in page       # the container scrolls sideways


def test_vm_builtins_are_hidden_until_asked_for():
    view = ReportView(model_report(3))
    names = view.frame["Name"].tolist()
    assert names and not any(n.startswith("vm.builtin.") for n in names)
    assert "3 VM builtin calls hidden (6.00 us)" in view.summary_html.value
    for labels in (view.bar_figure.data[0].y, view.share_figure.data[0].labels,
                   view.groups_frame["Layer"].tolist(), view.timeline_figure.data[0].hovertext):
        assert not any("vm.builtin" in str(x) for x in labels), labels
    view.depth_dropdown.value = 1
    assert sorted(view.groups_frame["Layer"]) == ["layer1", "layer2", "layer3"]
    view.builtins_check.value = True
    assert "vm.builtin.match_shape" in view.frame["Name"].tolist()
    assert "vm.builtin.match_shape" in view.bar_figure.data[0].y
    assert "vm.builtin.make_tuple" in view.groups_frame["Layer"].tolist()
    assert len(view.timeline_figure.data[0].x) == 6
    assert "hidden" not in view.summary_html.value


def test_diff_leaves_out_builtins_by_default():
    view = ReportView(model_report(3), baseline=model_report(3))
    assert not view.diff_frame.iloc[:, 0].astype(str).str.startswith("vm.").any()
    assert view.diff_frame.attrs["title"].startswith("baseline -> new")
    view.builtins_check.value = True
    assert view.diff_frame.iloc[:, 0].astype(str).str.startswith("vm.builtin.").any()


def test_call_table_pages_and_columns():
    view = ReportView(model_report(120), page_size=50)
    view.aggregate_toggle.value = False
    assert len(view.frame) == 120 and view.pages == 3
    assert len(view.page_frame) == 50 and view.page_label.value == "rows 1-50 of 120 (page 1/3)"
    assert view.prev_button.disabled and not view.next_button.disabled
    assert view.table_html.value.count("<tr>") == 51   # header + 50 rows
    view.next_button.click()
    view.next_button.click()
    assert view.page == 2 and len(view.page_frame) == 20
    assert view.page_label.value == "rows 101-120 of 120 (page 3/3)"
    assert view.next_button.disabled and not view.prev_button.disabled
    assert view.page_frame["Name"].tolist() == view.frame["Name"].tolist()[100:]
    # a control change starts again at the first page
    view.filter_text.value = "conv2d11"
    assert view.page == 0 and view.frame["Name"].tolist()[0].startswith("fused_conv2d11")
    # Start (us) and Module start hidden; the chooser shows and hides columns
    assert "Start (us)" not in view.page_frame.columns and "Module" not in view.page_frame
    assert "Start (us)" in view.columns_select.options
    view.columns_select.value = ("Name", "Duration (us)", "Start (us)")
    assert list(view.page_frame.columns) == ["Name", "Duration (us)", "Start (us)"]
    assert ">Argument Shapes</th>" not in view.table_html.value
    with pytest.raises(ValueError, match="page_size"):
        ReportView(model_report(1), page_size=0)

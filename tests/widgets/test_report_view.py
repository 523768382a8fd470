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
    assert "<td>matmul</td>" in view.table_html.value and "18.00" in view.table_html.value
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
        assert f"<th>{header}</th>" in view.diff_html.value, header
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

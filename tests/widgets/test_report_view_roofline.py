"""ReportView's roofline face (issue 27), without a browser: the call table's GFLOPS / GB/s /
% of bound / Headroom columns, the roofline plot's roofs and points, the "where to tune next"
list, and the filter; and the tuning dashboard's roofline bound per task."""
from __future__ import annotations

import io

import pytest

pytest.importorskip("ipywidgets")
pytest.importorskip("plotly")

from workbench import te  # noqa: E402
from workbench.ir.module import IRModule  # noqa: E402
from workbench.meta_schedule.roofline import roofline  # noqa: E402
from workbench.runtime.machine_limits import MachineLimits  # noqa: E402
from workbench.runtime.profiling import Count, Duration, Report  # noqa: E402
from workbench.widgets import ReportView, TuningDashboard  # noqa: E402

LIMITS = MachineLimits(peak_gflops=100.0, per_core_gflops=50.0, bandwidth_gbs=10.0, cores=2,
                       cpu="test CPU", kind="fp32", measured_at="2026-01-01T00:00:00Z",
                       key="test")
N = 64
MATMUL_FLOP = 2 * N ** 3
MATMUL_BYTES = 3 * N * N * 4
SHAPES = f"float32[{N}, {N}], float32[{N}, {N}], float32[{N}, {N}]"


def kernels() -> IRModule:
    a = te.placeholder((N, N), name="A")
    b = te.placeholder((N, N), name="B")
    k = te.reduce_axis((0, N), name="k")
    c = te.compute((N, N), lambda i, j: te.sum(a[i, k] * b[k, j], axis=k), name="C")
    x = te.placeholder((N, N), name="X")
    y = te.compute((N, N), lambda i, j: te.max(x[i, j], 0.0), name="Y")
    return IRModule({"matmul": te.create_prim_func([a, b, c]),
                     "relu": te.create_prim_func([x, y])})


def call(name, dur, shapes):
    return {"Name": name, "Duration (us)": Duration(dur), "Count": Count(1), "Device": "cpu0",
            "Argument Shapes": shapes}


def report() -> Report:
    relu_shapes = f"float32[{N}, {N}], float32[{N}, {N}]"
    return Report([call("vm.builtin.match_shape", 1.0, f"float32[{N}, {N}]"),
                   call("matmul", 100.0, SHAPES), call("relu", 5.0, relu_shapes),
                   call("matmul", 60.0, SHAPES)], {}, {})


def test_call_table_gets_the_roofline_columns():
    view = ReportView(report(), exe=kernels(), limits=LIMITS)
    assert view.tabs.titles[-1] == "Roofline"
    row = view.frame.set_index("Name").loc["matmul"]      # aggregated: both calls
    assert row["GFLOPS"] == pytest.approx(2 * MATMUL_FLOP / 160e-6 / 1e9)
    assert row["GB/s"] == pytest.approx(2 * MATMUL_BYTES / 160e-6 / 1e9)
    bound_s = 2 * max(MATMUL_FLOP / 100e9, MATMUL_BYTES / 10e9)
    assert row["% of bound"] == pytest.approx(bound_s / 160e-6 * 100)
    assert row["Headroom"] == pytest.approx(160e-6 / bound_s)
    for column in ("GFLOPS", "GB/s", "% of bound", "Headroom"):
        assert column in view.page_frame.columns and column in view.sort_dropdown.options
    view.aggregate_toggle.value = False                     # per call: each its own time
    calls = view.frame[view.frame["Name"] == "matmul"]
    assert sorted(calls["GFLOPS"]) == pytest.approx(
        sorted([MATMUL_FLOP / 100e-6 / 1e9, MATMUL_FLOP / 60e-6 / 1e9]))
    view.builtins_check.value = True
    builtin = view.frame[view.frame["Name"] == "vm.builtin.match_shape"]
    assert builtin["GFLOPS"].isna().all()


def test_roofline_plot_and_ranking():
    view = ReportView(report(), exe=kernels(), limits=LIMITS)
    fig = view.roofline_figure
    assert fig.layout.xaxis.type == "log" and fig.layout.yaxis.type == "log"
    memory, compute, points, cache = fig.data
    assert len(cache.x) == 0                                    # no cache level known
    ridge = LIMITS.ridge_intensity
    assert memory.x[1] == pytest.approx(ridge) and memory.y[1] == pytest.approx(100.0)
    assert memory.y[0] == pytest.approx(memory.x[0] * 10.0)     # slope = bandwidth
    assert compute.y == (100.0, 100.0)
    assert set(points.text) == {"matmul", "relu"}
    matmul = points.text.index("matmul")
    assert points.x[matmul] == pytest.approx(MATMUL_FLOP / MATMUL_BYTES)
    assert points.y[matmul] == pytest.approx(2 * MATMUL_FLOP / 160e-6 / 1e9)
    assert points.marker.size[matmul] > points.marker.size[points.text.index("relu")]
    assert "matmul" in points.hovertext[matmul] and "headroom" in points.hovertext[matmul]
    assert "100 GFLOPS peak, 10.0 GB/s" in fig.layout.title.text
    # The ranking: the same as roofline(), its order in the table.
    assert list(view.ranking.index) == list(roofline(report(), kernels(), LIMITS).index)
    html = view.ranking_html.value
    assert "Where to tune next" in html
    assert html.index(view.ranking.index[0]) < html.index(view.ranking.index[1])
    view.filter_text.value = "rel"
    assert list(view.ranking_shown.index) == ["relu"] and fig.data[2].text == ("relu",)


def test_roofline_arguments_are_checked():
    with pytest.raises(TypeError, match="exe= .* or roofline="):
        ReportView(report(), exe=kernels(),
                   roofline=roofline(report(), kernels(), LIMITS))
    with pytest.raises(TypeError, match="roofline must be the DataFrame"):
        ReportView(report(), roofline=report().to_dataframe())
    with pytest.raises(TypeError, match="limits= needs exe="):
        ReportView(report(), limits=LIMITS)
    with pytest.raises(ValueError, match="calls none of the executable's kernels"):
        ReportView(Report([call("other", 1.0, "float32[1]")], {}, {}), exe=kernels(),
                   limits=LIMITS)
    plain = ReportView(report())
    assert plain.ranking is None and "Roofline" not in plain.tabs.titles
    assert "GFLOPS" not in plain.frame.columns


def test_dashboard_shows_each_tasks_roofline_bound():
    from types import SimpleNamespace

    from workbench.meta_schedule.runner import RunnerResult
    mod = IRModule({"main": kernels()["matmul"]})
    sched = SimpleNamespace(tasks_=[SimpleNamespace(
        ctx=SimpleNamespace(task_name="matmul", mod=mod), task_weight=1.0,
        flop=MATMUL_FLOP, is_terminated=False, runner_futures=None)])
    dash = TuningDashboard("widget", interval=0, limits=LIMITS)
    dash.apply(sched, 0, [object()], [SimpleNamespace(error_msg=None)],
               [RunnerResult([50e-6], None)])
    dash.finish(sched)
    frame = dash.frame
    bound = LIMITS.bound_gflops(MATMUL_FLOP / MATMUL_BYTES)
    cols = list(frame.columns)
    assert cols[cols.index("Speed (GFLOPS)") + 1:][:2] == ["Bound (GFLOPS)", "% of bound"]
    assert frame["Bound (GFLOPS)"].tolist() == pytest.approx([bound])
    gflops = MATMUL_FLOP / 50e-6 / 1e9
    assert frame["% of bound"].tolist() == pytest.approx([gflops / bound * 100])
    assert "Bound (GFLOPS)" in dash.table_html.value
    (line,) = dash.best_figure.layout.shapes
    assert line.y0 == pytest.approx(bound) and line.line.dash == "dot"
    text = TuningDashboard("text", limits=LIMITS, file=io.StringIO())
    text.apply(sched, 0, [object()], [SimpleNamespace(error_msg=None)],
               [RunnerResult([50e-6], None)])
    assert f"{gflops / bound * 100:.1f}% of the roofline" in text.text_line(0, 1)
    # Without limits (or without the task's module) there is no bound column.
    none = TuningDashboard("widget", interval=0, limits=None)
    none.attach_scheduler(sched)
    assert "Bound (GFLOPS)" not in none.frame.columns
    with pytest.raises(TypeError, match="limits must be MachineLimits"):
        TuningDashboard("text", limits=1.0)


def _copy_kernel() -> IRModule:
    x = te.placeholder((N, N), name="X")
    y = te.compute((N, N), lambda i, j: x[i, j], name="Y")
    return IRModule({"main": te.create_prim_func([x, y])})


def test_a_task_that_only_moves_data_is_held_against_the_bandwidth():
    """A copy has no FLOPs: its percentage is its bytes' time at the roof's bandwidth against
    its latency, and the text line prints no "0.0 GFLOPS" roof (it read "11.3% of the
    roofline's 0.0" on a reshape)."""
    from types import SimpleNamespace

    from workbench.meta_schedule.runner import RunnerResult
    sched = SimpleNamespace(tasks_=[SimpleNamespace(
        ctx=SimpleNamespace(task_name="copy", mod=_copy_kernel()), task_weight=1.0,
        flop=0.0, is_terminated=False, runner_futures=None)])
    nbytes = 2 * N * N * 4
    cached = MachineLimits(**dict(LIMITS.to_dict(), cache_bandwidth_gbs=40.0,
                                  cache_bytes=nbytes))
    for limits, bandwidth in ((LIMITS, 10e9), (cached, 40e9)):
        text = TuningDashboard("text", limits=limits, file=io.StringIO())
        text.apply(sched, 0, [object()], [SimpleNamespace(error_msg=None)],
                   [RunnerResult([4e-6], None)])
        want = nbytes / bandwidth / 4e-6 * 100
        assert text.frame["% of bound"].tolist() == pytest.approx([want])
        line = text.text_line(0, 1)
        assert f"({want:.1f}% of the roofline)" in line and "GFLOPS)" not in line


def test_the_roofline_plot_draws_the_cache_roof_when_known():
    cached = MachineLimits(**dict(LIMITS.to_dict(), cache_bandwidth_gbs=40.0,
                                  cache_bytes=1 << 20))
    fig = ReportView(report(), exe=kernels(), limits=cached).roofline_figure
    cache = fig.data[3]
    assert cache.line.dash == "dash" and len(cache.x) == 2
    assert cache.y[1] == pytest.approx(100.0) and cache.x[1] == pytest.approx(100.0 / 40.0)
    assert "40.0 GB/s in cache" in fig.layout.title.text
    plain = ReportView(report(), exe=kernels(), limits=LIMITS).roofline_figure
    assert len(plain.data[3].x) == 0

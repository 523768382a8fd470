"""TuningDashboard on a cluster: which worker measured what (RunnerResult.worker), in the
widget (a table and each candidate's hover text), the text lines and the static repr."""
import io
from types import SimpleNamespace

from workbench.meta_schedule.builder import BuilderResult
from workbench.meta_schedule.runner import RunnerResult
from workbench.widgets import TuningDashboard
from workbench.widgets.tuning_progress import WORKER_COLUMNS

W0, W1 = "tcp://10.0.0.1:4001", "tcp://10.0.0.2:4002"


def _scheduler():
    return SimpleNamespace(tasks_=[SimpleNamespace(ctx=SimpleNamespace(task_name=name, mod=None),
                                                   task_weight=1.0, flop=2e6,
                                                   is_terminated=False, runner_futures=None)
                                   for name in ("dense", "conv")])


def _feed(dash):
    sched = _scheduler()
    ok = BuilderResult("/tmp/x.o", None)
    dash.apply(sched, 0, [None] * 3, [ok] * 3,
               [RunnerResult([1e-3], None, worker=W0), RunnerResult([2e-3], None, worker=W1),
                RunnerResult(None, "RPCRunner: wrong result: ...", worker=W1)])
    dash.apply(sched, 1, [None] * 2, [ok] * 2,
               [RunnerResult([3e-3], None, worker=W0), RunnerResult([4e-3], None, worker=W0)])
    return sched


def test_worker_table_and_hover_text():
    dash = TuningDashboard("widget", interval=0)
    _feed(dash)
    dash.render()
    frame = dash.workers_frame
    assert list(frame.columns) == list(WORKER_COLUMNS)
    rows = {r.Worker: r for r in frame.itertuples()}
    assert rows[W0].Measured == 3 and rows[W0].Errors == 0
    assert rows[W0].Tasks == "#0 dense x1, #1 conv x2"
    assert rows[W1].Measured == 2 and rows[W1].Errors == 1 and rows[W1].Tasks == "#0 dense x2"
    assert "Measured on" in dash.workers_html.value and W1 in dash.workers_html.value
    hovers = [t.hovertext for t in dash.scatter_figure.data[1:]]
    assert list(hovers[0]) == [f"measured on {W0}", f"measured on {W1}"]
    assert W1 in dash.scatter_figure.data[0].hovertext[0]  # the error names its worker too
    assert W0 in dash._repr_mimebundle_()["text/html"]


def test_text_mode_names_the_workers():
    out = io.StringIO()
    dash = TuningDashboard("text", file=out)
    _feed(dash)
    dash.finish()
    text = out.getvalue()
    assert "on 2 workers" in text and "Measured on:" in text and W0 in text


def test_local_runs_show_no_worker_table():
    dash = TuningDashboard("widget", interval=0)
    dash.apply(_scheduler(), 0, [None], [BuilderResult("/tmp/x.o", None)],
               [RunnerResult([1e-3], None)])
    dash.render()
    assert dash.workers_frame.empty and dash.workers_html.value == ""

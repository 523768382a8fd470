"""TuningDashboard without a browser: widget state and figure data after synthetic ``apply``
calls (fast) and after a real small tuning run (marked ``tuning``)."""
import io
import math
import random
import threading
import time
from types import SimpleNamespace

import pytest

pytest.importorskip("ipywidgets")
pytest.importorskip("plotly")

from workbench.meta_schedule.builder import BuilderResult  # noqa: E402
from workbench.meta_schedule.measure_callback import (  # noqa: E402
    AddToDatabase, MeasureCallback, PyMeasureCallback,
)
from workbench.meta_schedule.runner import RunnerResult  # noqa: E402
from workbench.widgets import TuningDashboard, attach_dashboard  # noqa: E402
from workbench.widgets.throttle import Throttle  # noqa: E402
from workbench.widgets.tuning_dashboard import (  # noqa: E402
    DashboardAttachment, in_notebook, table_html,
)
from workbench.widgets.tuning_progress import TABLE_COLUMNS  # noqa: E402

MATMUL_FLOP = 2 * 128 ** 3


class FakeScheduler:
    """What a measure callback sees of TVM's task scheduler: ``tasks_`` records and
    ``terminate_task`` (which, like TVM's, must not be called twice for one task)."""

    def __init__(self, n_tasks=2, weights=None, flop=MATMUL_FLOP):
        weights = weights or [1.0] * n_tasks
        self.tasks_ = [SimpleNamespace(ctx=SimpleNamespace(task_name=f"task{i}", mod=None),
                                       task_weight=weights[i], flop=flop, is_terminated=False,
                                       runner_futures=None) for i in range(n_tasks)]
        self.database_ = None
        self.cost_model_ = None
        self.terminated = []

    def terminate_task(self, task_id):
        assert not self.tasks_[task_id].is_terminated, f"task {task_id} terminated twice"
        self.tasks_[task_id].is_terminated = True
        self.terminated.append(task_id)


def matmul(n=16):
    """``C = A @ B`` as an IRModule (a tuning workload)."""
    from workbench import te
    from workbench.ir.module import IRModule

    A = te.placeholder((n, n), "float32", name="A")
    B = te.placeholder((n, n), "float32", name="B")
    k = te.reduce_axis((0, n), name="k")
    C = te.compute((n, n), lambda i, j: te.sum(A[i, k] * B[k, j], axis=k), name="C")
    return IRModule({"main": te.create_prim_func([A, B, C])})


def scheduled(mod, factor):
    """A traced candidate: the first loop split by ``factor``, then EnterPostproc."""
    from workbench.tir.schedule import Schedule

    sch = Schedule(mod)
    i, _, _ = sch.get_loops(sch.get_block("C"))
    sch.split(i, [None, factor])
    sch.enter_postproc()
    return sch


def batch(latencies_us, build_errors=(), run_errors=()):
    """Builder and runner results for one batch; ``None`` latency = a run without times."""
    built, ran = [], []
    for i, lat in enumerate(latencies_us):
        if i in build_errors:
            built.append(BuilderResult(None, "LocalBuilder: An exception occurred\nboom"))
            ran.append(RunnerResult(None, "LocalBuilder: An exception occurred\nboom"))
            continue
        built.append(BuilderResult(f"/tmp/artifact{i}.so", None))
        if i in run_errors:
            ran.append(RunnerResult(None, "LocalRunner: wrong result: max abs error 3.0"))
        else:
            ran.append(RunnerResult(None if lat is None else [lat * 1e-6], None))
    return [object()] * len(latencies_us), built, ran


def feed(dash, sched, task_id, *args, **kwargs):
    cands, built, ran = batch(*args, **kwargs)
    dash.apply(sched, task_id, cands, built, ran)


# ---- model, table and figures -----------------------------------------------------------------

def test_is_a_measure_callback():
    dash = TuningDashboard("text")
    assert isinstance(dash, PyMeasureCallback) and isinstance(dash, MeasureCallback)
    assert getattr(TuningDashboard, "_derived_object", False)


def test_table_rows_use_tvm_statistics_columns():
    sched = FakeScheduler(2, weights=[1.0, 2.0])
    dash = TuningDashboard("widget", interval=0, max_trials_global=32)
    feed(dash, sched, 0, [400.0, 200.0, 300.0, 250.0])
    feed(dash, sched, 1, [100.0, 50.0, 80.0, 90.0], build_errors={1})
    sched.tasks_[0].is_terminated = True
    dash.finish(sched)
    frame = dash.frame
    assert tuple(frame.columns) == TABLE_COLUMNS
    assert frame["ID"].tolist() == [0, 1]
    assert frame["Name"].tolist() == ["task0", "task1"]
    assert frame["FLOP"].tolist() == [MATMUL_FLOP] * 2
    assert frame["Weight"].tolist() == [1.0, 2.0]
    assert frame["Latency (us)"].tolist() == pytest.approx([200.0, 80.0])
    assert frame["Weighted Latency (us)"].tolist() == pytest.approx([200.0, 160.0])
    assert frame["Speed (GFLOPS)"].tolist() == pytest.approx(
        [MATMUL_FLOP / 200e-6 / 1e9, MATMUL_FLOP / 80e-6 / 1e9])
    assert frame["Trials"].tolist() == [4, 4]
    assert frame["Errors"].tolist() == [0, 1]
    assert frame["Done"].tolist() == ["Y", ""]
    html = dash.table_html.value
    assert "Speed (GFLOPS)" in html and "Weighted Latency (us)" in html
    assert f"{MATMUL_FLOP / 200e-6 / 1e9:.4f}" in html
    assert "<b>8/32</b> trials" in dash.summary_html.value
    assert "finished" in dash.summary_html.value
    assert dash.progress_bar.value == 8 and dash.progress_bar.max == 32
    assert dash.stop_button.disabled


def test_task_without_valid_measurement_shows_na():
    sched = FakeScheduler(1)
    dash = TuningDashboard("widget", interval=0)
    feed(dash, sched, 0, [1.0, 1.0], run_errors={0, 1})
    assert math.isnan(dash.frame["Latency (us)"][0])
    assert "N/A" in dash.table_html.value
    assert dash.best_figure.data[0].x in ((), None)


def test_a_task_note_is_shown_in_the_summary_and_the_text_table():
    """A task that found no valid candidate carries the scheduler's note (why); the widget's
    summary and the text table show it, escaped."""
    sched = FakeScheduler(2)
    dash = TuningDashboard("widget", interval=0)
    dash.attach_scheduler(sched)
    feed(dash, sched, 0, [10.0, 20.0])
    sched.tasks_[1].note = "Task #1 ('task1') found no valid candidate: 4 <refused>"
    dash.finish(sched)
    assert dash.progress.snapshot().notes == [sched.tasks_[1].note]
    assert "found no valid candidate: 4 &lt;refused&gt;" in dash.summary_html.value
    assert "Warning: Task #1 ('task1') found no valid candidate" in dash._text_table(
        dash.progress.snapshot())


def test_best_so_far_is_monotone_and_scatter_has_every_candidate():
    rng = random.Random(7)
    sched = FakeScheduler(3)
    dash = TuningDashboard("widget", interval=0)
    n_candidates = n_errors = 0
    for step in range(12):
        lats = [rng.uniform(20.0, 500.0) for _ in range(8)]
        errs = {rng.randrange(8)} if step % 3 == 0 else set()
        feed(dash, sched, step % 3, lats, run_errors=errs)
        n_candidates += len(lats)
        n_errors += len(errs)
    dash.finish()
    best_traces = dash.best_figure.data
    assert len(best_traces) == 3
    for task_id, trace in enumerate(best_traces):
        ys = list(trace.y)
        assert ys == sorted(ys), "best-so-far must never decrease"
        snap = dash.progress.snapshot()
        assert ys[-1] == pytest.approx(snap.tasks[task_id].best_gflops)
        assert list(trace.x) == sorted(trace.x)
    points = sum(len(t.x) for t in dash.scatter_figure.data)
    assert points == n_candidates
    errors = dash.scatter_figure.data[0]
    assert errors.name == "errors" and len(errors.x) == n_errors
    assert set(errors.y) == {0.0}
    assert all("wrong result" in text for text in errors.hovertext)
    assert dash.frame["Errors"].sum() == n_errors
    # Trial indices number the candidates 1..n in measurement order across tasks.
    xs = sorted(x for t in dash.scatter_figure.data for x in t.x)
    assert xs == list(range(1, n_candidates + 1))


def test_errors_of_every_kind_are_counted():
    sched = FakeScheduler(1)
    dash = TuningDashboard("widget", interval=0)
    feed(dash, sched, 0, [10.0, None, 30.0, 40.0], build_errors={0}, run_errors={2})
    snap = dash.progress.snapshot()
    assert snap.errors == 3 and snap.trials == 4
    errors = [m.error for m in snap.measurements]
    assert errors[0].startswith("LocalBuilder") and errors[1] == "no run time measured"
    assert errors[2].startswith("LocalRunner: wrong result") and errors[3] is None
    assert "errors <span" in dash.summary_html.value


def test_latency_is_the_median_of_run_secs():
    sched = FakeScheduler(1)
    dash = TuningDashboard("widget", interval=0)
    cands, built, _ = batch([0.0])
    dash.apply(sched, 0, cands, built, [RunnerResult([1e-4, 5e-4, 2e-4, 3e-4], None)])
    assert dash.frame["Latency (us)"][0] == pytest.approx(250.0)


def test_metric_toggle_switches_the_scatter_to_latency():
    sched = FakeScheduler(1)
    dash = TuningDashboard("widget", interval=0)
    feed(dash, sched, 0, [100.0, 200.0])
    gflops = list(dash.scatter_figure.data[1].y)
    assert gflops == pytest.approx([MATMUL_FLOP / 100e-6 / 1e9, MATMUL_FLOP / 200e-6 / 1e9])
    dash.metric_toggle.value = "Latency (us)"
    assert list(dash.scatter_figure.data[1].y) == pytest.approx([100.0, 200.0])
    assert dash.scatter_figure.layout.yaxis.title.text == "Latency (us)"


def test_eta_from_the_pace_so_far():
    sched = FakeScheduler(1)
    dash = TuningDashboard("text", max_trials_global=40, file=io.StringIO())
    feed(dash, sched, 0, [10.0] * 10)
    snap = dash.progress.snapshot()
    assert snap.budget == 40
    assert snap.eta_s == pytest.approx(snap.elapsed_s / 10 * 30)
    dash.finish()
    assert dash.progress.snapshot().eta_s == 0.0


def test_budget_is_capped_by_trials_per_task():
    sched = FakeScheduler(2)
    dash = TuningDashboard("text", max_trials_global=1000, max_trials_per_task=16,
                           file=io.StringIO())
    feed(dash, sched, 0, [10.0])
    assert dash.progress.snapshot().budget == 32


def test_flop_falls_back_to_the_estimate_of_the_task_module():
    n = 16
    mod = matmul(n)
    sched = FakeScheduler(1)
    del sched.tasks_[0].flop
    sched.tasks_[0].ctx.mod = mod
    dash = TuningDashboard("text", file=io.StringIO())
    feed(dash, sched, 0, [1.0])
    assert dash.frame["FLOP"][0] == 2 * n ** 3


# ---- throttling and threads -------------------------------------------------------------------

def test_throttle_coalesces_many_updates_and_renders_the_final_state():
    sched = FakeScheduler(2)
    dash = TuningDashboard("widget", interval=0.5)
    start, t0 = dash.throttle.renders, time.monotonic()
    for step in range(200):
        feed(dash, sched, step % 2, [100.0 + step, 90.0 + step])
    # At most one render per interval (plus the leading one), never one per batch.
    allowed = 2 + (time.monotonic() - t0) / 0.5
    assert dash.throttle.renders - start <= allowed < 20
    dash.finish()
    assert dash.frame["Trials"].tolist() == [200, 200]
    assert dash.table_html.value == table_html(dash.frame)   # the final state was drawn
    assert sum(len(t.x) for t in dash.scatter_figure.data) == 400
    assert dash.throttle.last_error is None


def test_trailing_render_shows_the_last_state_without_finish():
    sched = FakeScheduler(1)
    dash = TuningDashboard("widget", interval=0.1)
    for _ in range(30):
        feed(dash, sched, 0, [50.0])
    assert dash.throttle.wait(timeout=10)
    assert not dash.throttle.pending
    assert dash.frame["Trials"].tolist() == [30]
    assert dash.table_html.value == table_html(dash.frame)
    assert len(dash.scatter_figure.data[1].x) == 30


def test_throttle_unit():
    calls = []
    th = Throttle(lambda: calls.append(time.monotonic()), interval=0.2)
    th.request()                      # leading edge: at once
    assert len(calls) == 1
    for _ in range(50):
        th.request()                  # coalesced into one trailing render
    assert len(calls) == 1 and th.pending
    assert th.wait(timeout=10)
    assert len(calls) == 2 and not th.pending
    assert calls[1] - calls[0] >= 0.19
    th.flush()                        # nothing pending: no render
    assert len(calls) == 2
    th.request()
    th.close()
    assert len(calls) == 3 and th.renders == 3
    with pytest.raises(ValueError):
        Throttle(lambda: None, interval=-1)


def test_throttle_keeps_render_errors_away_from_the_caller():
    def broken():
        raise RuntimeError("front end went away")
    th = Throttle(broken, interval=0)
    th.request()
    assert isinstance(th.last_error, RuntimeError) and th.renders == 1


def test_apply_from_worker_threads_is_thread_safe():
    sched = FakeScheduler(4)
    dash = TuningDashboard("widget", interval=0.01)
    per_thread, size = 25, 4

    def worker(task_id):
        rng = random.Random(task_id)
        for _ in range(per_thread):
            feed(dash, sched, task_id, [rng.uniform(10, 100) for _ in range(size)])

    threads = [threading.Thread(target=worker, args=(i,)) for i in range(4)]
    for t in threads:
        t.start()
    while any(t.is_alive() for t in threads):
        dash.render()                 # a reader racing the writers
    for t in threads:
        t.join()
    dash.finish()
    assert dash.throttle.last_error is None
    snap = dash.progress.snapshot()
    assert snap.trials == 4 * per_thread * size
    assert sorted(m.trial for m in snap.measurements) == list(range(1, snap.trials + 1))
    assert dash.frame["Trials"].tolist() == [per_thread * size] * 4
    assert sum(len(t.x) for t in dash.scatter_figure.data) == snap.trials


def test_tuning_loop_in_a_worker_thread_with_the_main_thread_reading():
    sched = FakeScheduler(1)
    dash = TuningDashboard("widget", interval=0.05)

    def loop():
        for _ in range(40):
            feed(dash, sched, 0, [30.0, 40.0])
            time.sleep(0.002)

    worker = threading.Thread(target=loop)
    worker.start()
    seen = []
    while worker.is_alive():
        seen.append(dash.progress.snapshot().trials)
        time.sleep(0.005)
    worker.join()
    dash.finish()
    assert seen == sorted(seen)
    assert dash.frame["Trials"].tolist() == [80]


# ---- stop -------------------------------------------------------------------------------------

def test_stop_button_terminates_every_task_at_the_next_batch():
    sched = FakeScheduler(3)
    dash = TuningDashboard("widget", interval=0)
    feed(dash, sched, 0, [10.0])
    assert sched.terminated == []
    dash.stop_button.click()
    assert dash.stop_requested and dash.stop_button.disabled
    assert dash.stop_button.description == "Stopping"
    sched.tasks_[2].runner_futures = ["a batch still in flight"]
    feed(dash, sched, 1, [20.0])      # the batch measured when the click arrived
    assert sched.terminated == [0, 1], "a task with a batch in flight waits for its join"
    feed(dash, sched, 2, [30.0])      # its join: now it ends too (its results were kept)
    assert sched.terminated == [0, 1, 2]
    feed(dash, sched, 2, [30.0])      # never terminated twice
    dash.finish(sched)
    assert dash.frame["Done"].tolist() == ["Y", "Y", "Y"]
    assert dash.frame["Trials"].tolist() == [1, 1, 2]


def test_stop_keeps_every_measured_record_in_the_database():
    """A TVM-shaped loop: callbacks run in order (AddToDatabase first), the loop ends when
    no task is alive. Records measured before and in the stopping batch are all stored."""
    from workbench.meta_schedule.database import MemoryDatabase
    from workbench.meta_schedule.search_strategy import MeasureCandidate
    from workbench.meta_schedule.arg_info import ArgInfo

    mod = matmul(16)
    sched = FakeScheduler(1, flop=2 * 16 ** 3)
    sched.tasks_[0].ctx = SimpleNamespace(task_name="main", mod=mod, target=None)
    sched.database_ = MemoryDatabase()
    dash = TuningDashboard("text", file=io.StringIO())
    callbacks = [AddToDatabase(), dash]
    batches = 0
    while not all(t.is_terminated for t in sched.tasks_) and batches < 10:
        cands = [MeasureCandidate(scheduled(mod, 4), ArgInfo.from_entry_func(mod))
                 for _ in range(4)]
        _, built, ran = batch([5.0] * 4)
        for cb in callbacks:
            cb.apply(sched, 0, cands, built, ran)
        batches += 1
        if batches == 2:
            dash.request_stop()       # clicked while the second batch was measured
    assert batches == 3
    assert len(sched.database_) == 12
    assert dash.progress.snapshot().trials == 12


# ---- text fallback and integration ------------------------------------------------------------

def test_text_fallback_prints_one_line_per_batch(capsys):
    assert not in_notebook()
    sched = FakeScheduler(2)
    dash = TuningDashboard(max_trials_global=16)
    assert dash.mode == "text" and dash.widget is None
    feed(dash, sched, 0, [100.0, 200.0, 50.0, 80.0])
    feed(dash, sched, 1, [10.0, 20.0, 30.0, 40.0], build_errors={3})
    dash.request_stop()
    dash.finish(sched)
    lines = capsys.readouterr().out.splitlines()
    assert len(lines) == 4
    flop = MATMUL_FLOP
    assert lines[0].startswith("[Task #0: task0] +4 -> 4 trials (total 4/16) | best "
                               f"{flop / 50e-6 / 1e9:.4f} GFLOPS (50.00 us) | errors 0 | "
                               "elapsed ")
    assert "ETA" in lines[0]
    assert "(total 8/16)" in lines[1] and "errors 1" in lines[1]
    assert lines[2].startswith("Stop requested")
    assert lines[3].startswith("Tuning stopped: 8 trials, 1 errors")


def test_static_fallback_in_the_mimebundle():
    sched = FakeScheduler(1)
    dash = TuningDashboard("widget", interval=0)
    feed(dash, sched, 0, [10.0])
    bundle = dash._repr_mimebundle_()
    assert "application/vnd.jupyter.widget-view+json" in bundle
    assert "Speed (GFLOPS)" in bundle["text/html"]
    assert "task0" in bundle["text/plain"]
    text = TuningDashboard("text", file=io.StringIO())._repr_mimebundle_()
    assert "application/vnd.jupyter.widget-view+json" not in text


def test_attach_dashboard():
    cbs = [AddToDatabase()]
    plain = attach_dashboard(cbs, False)
    assert isinstance(plain, DashboardAttachment) and plain.measure_callbacks is cbs
    assert plain.dashboard is None
    with attach_dashboard("default", True, max_trials_global=64,
                          max_trials_per_task=8) as callbacks:
        dash = callbacks[-1]
        assert isinstance(dash, TuningDashboard) and dash.mode == "text"
        assert [type(c).__name__ for c in callbacks[:-1]] == \
            ["AddToDatabase", "RemoveBuildArtifact", "UpdateCostModel"]
    assert dash.progress.finished
    mine = TuningDashboard("text", file=io.StringIO())
    att = attach_dashboard([AddToDatabase(), mine], mine)
    assert att.dashboard is mine and att.measure_callbacks.count(mine) == 1
    att = attach_dashboard(AddToDatabase(), "text")
    assert len(att.measure_callbacks) == 2
    with pytest.raises(TypeError, match="dashboard must be"):
        attach_dashboard([], 3)
    with pytest.raises(ValueError, match="mode must be"):
        TuningDashboard("html")


# ---- a real tuning run ------------------------------------------------------------------------
# Small and cheap on purpose (replay-trace search, random cost model, 1 ms measurements): the
# point is the dashboard's view of a real scheduler, builder, runner and database.

def _tune(work_dir, **kwargs):
    import workbench.meta_schedule as ms
    from workbench.meta_schedule.runner import EvaluatorConfig, LocalRunner

    runner = LocalRunner(evaluator_config=EvaluatorConfig(number=1, repeat=1, min_repeat_ms=1))
    options = dict(max_trials_global=8, num_trials_per_iter=4, runner=runner,
                   strategy="replay-trace", cost_model="random", seed=0)
    options.update(kwargs)
    return ms.tune_tir(matmul(64), "llvm -num-cores=2", str(work_dir), **options)


@pytest.mark.tuning
def test_real_tuning_run_feeds_the_dashboard(tmp_path):
    import workbench.meta_schedule as ms

    dash = TuningDashboard("widget", interval=0.1)
    database = _tune(tmp_path, measure_callbacks=[*ms.MeasureCallback.create("default"), dash])
    dash.finish()
    snap = dash.progress.snapshot()
    assert snap.trials == len(database.get_all_tuning_records()) == 8
    frame = dash.frame
    assert frame["Name"].tolist() == ["main"] and frame["Trials"].tolist() == [8]
    assert frame["FLOP"].tolist() == [2 * 64 ** 3]
    assert frame["Done"].tolist() == ["Y"]
    assert frame["Errors"].tolist() == [snap.errors]
    assert dash.table_html.value == table_html(frame)
    assert sum(len(t.x) for t in dash.scatter_figure.data) == 8
    assert len(dash.scatter_figure.data[0].x) == snap.errors
    ys = list(dash.best_figure.data[0].y)
    assert ys == sorted(ys) and ys[-1] > 0
    # The dashboard's best is the database's best.
    best = min(r.mean_run_secs for r in database.get_all_tuning_records() if r.is_valid())
    assert frame["Latency (us)"][0] == pytest.approx(best * 1e6, rel=1e-6)


@pytest.mark.tuning
def test_stop_from_another_thread_ends_a_real_run_and_keeps_records(tmp_path):
    """Tuning runs in a worker thread (as a notebook would run it to keep the Stop button
    live); the main thread clicks Stop once the first batch shows."""
    import workbench.meta_schedule as ms

    dash = TuningDashboard("widget", interval=0.05)
    result = {}

    def run():
        result["db"] = _tune(tmp_path, max_trials_global=40,
                             measure_callbacks=[*ms.MeasureCallback.create("default"), dash])

    worker = threading.Thread(target=run)
    worker.start()
    deadline = time.monotonic() + 120
    while dash.progress.snapshot().trials < 4 and worker.is_alive() \
            and time.monotonic() < deadline:
        time.sleep(0.01)
    dash.stop_button.click()
    worker.join(timeout=180)
    assert not worker.is_alive()
    dash.finish()
    snap = dash.progress.snapshot()
    assert 4 <= snap.trials < 40, "tuning went on after Stop"
    assert len(result["db"].get_all_tuning_records()) == snap.trials   # nothing lost
    assert dash.frame["Done"].tolist() == ["Y"]
    assert dash.throttle.last_error is None


@pytest.mark.tuning
def test_tune_tir_dashboard_option_prints_text_outside_a_notebook(tmp_path, capsys):
    import inspect
    import workbench.meta_schedule as ms

    if "dashboard" not in inspect.signature(ms.tune_tir).parameters:
        pytest.skip("tune_tir has no dashboard parameter yet")
    _tune(tmp_path, dashboard=True)
    lines = [ln for ln in capsys.readouterr().out.splitlines() if ln.startswith("[Task #0")]
    assert len(lines) == 2
    assert "(total 8/8)" in lines[-1] and "GFLOPS" in lines[-1] and "ETA" in lines[-1]


# ---- measurements after the search are counted apart from the budget -----------------------

def test_remeasurements_are_counted_apart_from_the_trial_budget(capsys):
    sched = FakeScheduler(2)
    dash = TuningDashboard("widget", max_trials_global=8)
    feed(dash, sched, 0, [100.0, 200.0, 50.0, 80.0])
    feed(dash, sched, 1, [10.0, 20.0, 30.0, 40.0])
    dash.begin_phase("confirmation")
    feed(dash, sched, 0, [60.0, 55.0, 52.0])
    feed(dash, sched, 1, [11.0, 12.0])
    dash.finish(sched)
    snap = dash.progress.snapshot()
    assert (snap.trials, snap.measured, snap.budget) == (8, 13, 8)
    assert snap.counts_text() == "8/8 trials + 5 re-measurements"
    assert "<b>8/8</b> trials + 5 re-measurements" in dash.summary_html.value
    assert (dash.progress_bar.value, dash.progress_bar.max) == (8, 8)
    frame = dash.frame
    assert frame["Trials"].tolist() == [4, 4]
    assert frame["Re-measured"].tolist() == [3, 2]
    assert list(frame.columns).index("Re-measured") == list(frame.columns).index("Trials") + 1
    # every measurement is still a candidate in the plot
    assert sum(len(t.x) for t in dash.scatter_figure.data) == 13
    with pytest.raises(ValueError, match="phase must be one of"):
        dash.begin_phase("warm-up")

    text = TuningDashboard("text", max_trials_global=4)
    feed(text, sched, 0, [100.0, 200.0, 50.0, 80.0])
    text.begin_phase("post-optimization")
    feed(text, sched, 0, [40.0, 45.0])
    text.finish(sched)
    lines = capsys.readouterr().out.splitlines()
    assert "(total 4/4 + 2 post-optimization trials)" in lines[1], lines[1]
    assert lines[-1].startswith("Tuning finished: 4 trials + 2 post-optimization trials,")


def test_task_table_is_one_line_per_row_with_padded_columns():
    sched = FakeScheduler(1)
    dash = TuningDashboard("widget", max_trials_global=4)
    dash.set_task_layers({"task0": ["layer1.0.conv1 + bn1 + relu",
                                    "layer1.1.conv1 + bn1 + relu"]})
    feed(dash, sched, 0, [100.0, 200.0, 50.0, 80.0])
    dash.render()
    html = dash.table_html.value
    assert "white-space: nowrap" in html and "padding: 2px 8px" in html
    assert "overflow-x: auto" in html
    # numbers right-aligned, text left-aligned; a long layer label keeps its text in a title
    assert "<td>4</td>" in html and "<td class='wb-text'>task0</td>" in html
    assert "title='layer1.0.conv1 + bn1 + relu (+1 more)'" in html


def test_plots_wrap_instead_of_overlapping_and_keep_legends_outside():
    dash = TuningDashboard("widget")
    charts = dash.widget.children[-1]
    assert charts.layout.flex_flow == "row wrap"
    for cell in charts.children:
        assert cell.layout.min_width and cell.layout.flex.startswith("1 1")
    for fig in (dash.best_figure, dash.scatter_figure):
        assert fig.layout.width is None          # follows its box, never a fixed width
        assert fig.layout.legend.x >= 1 and fig.layout.legend.xanchor == "left"


@pytest.mark.tuning
def test_real_run_counts_the_confirmation_apart(tmp_path):
    from workbench import options

    dash = TuningDashboard("widget", interval=0.1)
    with options.override(ms_confirm_rounds=2, ms_confirm_top_k=2):
        database = _tune(tmp_path, dashboard=dash)
    snap = dash.progress.snapshot()
    records = len(database.get_all_tuning_records())
    assert snap.trials == 8 and snap.measured == records > 8
    assert snap.extra_counts() == {"confirmation": records - 8}
    assert f"<b>8/8</b> trials + {records - 8} re-measurements" in dash.summary_html.value


def test_legend_labels_are_short_so_the_plots_keep_their_width():
    sched = FakeScheduler(1)
    sched.tasks_[0].ctx.task_name = "fused_conv2d_winograd1_add5_add6_relu3"
    dash = TuningDashboard("widget")
    feed(dash, sched, 0, [100.0, 50.0])
    dash.render()
    names = [t.name for t in dash.best_figure.data]
    assert names == ["#0 fused_co...add6_relu3"], names   # 24 characters
    assert "fused_conv2d_winograd1_add5_add6_relu3" in dash.table_html.value

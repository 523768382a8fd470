"""The notebook widgets (ipywidgets + plotly) with a live kernel in a real JupyterLab: cells
run through the UI (click the prompt, Shift+Enter), their widget output renders, controls
reach the kernel and come back, and what the TuningDashboard's Stop button really does.

Stop, as found here (JupyterLab 4.6.6, ipykernel 7.4.0, ipywidgets 8.1.9): JupyterLab sends
the click on a kernel subshell (setting ``commsOverSubshells``, default "perCommTarget"), but
ipykernel routes a comm message to the shell that last *sent* on that comm
(``BaseComm._reply_subshell_for``), which for a widget created by a cell is the main shell,
busy while the cell runs. The dashboard's controls opt out of that routing
(``handle_on_frontend_subshell``), so Stop ends a ``tune_tir`` running in the cell itself after
the batch being measured; a tuning run in a background thread stops the same way.
"""
import re
import time

import nbformat
import pytest

pytestmark = [pytest.mark.browser, pytest.mark.timeout(180)]

# A tiny, fast tuning (replay-trace search, random cost model, 1 ms measurements) of a
# 16x16 matmul, with the dashboard shown by tune_tir itself (dashboard=True).
TUNING_SOURCE = '''
import tempfile
import time

import workbench.meta_schedule as ms
from workbench import te
from workbench.ir.module import IRModule
from workbench.meta_schedule.runner import EvaluatorConfig, LocalRunner
from workbench.widgets import ReportView, TuningDashboard


def matmul(n=16):
    A = te.placeholder((n, n), "float32", name="A")
    B = te.placeholder((n, n), "float32", name="B")
    k = te.reduce_axis((0, n), name="k")
    C = te.compute((n, n), lambda i, j: te.sum(A[i, k] * B[k, j], axis=k), name="C")
    return IRModule({"main": te.create_prim_func([A, B, C])})


def tune(max_trials_global, dashboard=True):
    runner = LocalRunner(evaluator_config=EvaluatorConfig(number=1, repeat=1, min_repeat_ms=1))
    return ms.tune_tir(matmul(16), "llvm -num-cores=2", tempfile.mkdtemp(),
                       max_trials_global=max_trials_global, num_trials_per_iter=4,
                       runner=runner, strategy="replay-trace", cost_model="random", seed=0,
                       dashboard=dashboard)
'''


def _notebook(jupyter_lab, name, report_source, *sources):
    cells = [nbformat.v4.new_code_cell(report_source + TUNING_SOURCE)]
    cells += [nbformat.v4.new_code_cell(source) for source in sources]
    return jupyter_lab.write_notebook(name, cells)


def _texts(locator) -> list[str]:
    return [t.strip() for t in locator.all_text_contents()]


def _wait_for_text(locator, pattern: str, timeout_s: float) -> re.Match:
    """Poll ``locator``'s text until ``pattern`` matches; return the match."""
    deadline = time.monotonic() + timeout_s
    text = ""
    while time.monotonic() < deadline:
        text = locator.inner_text() if locator.count() else ""
        found = re.search(pattern, text)
        if found:
            return found
        time.sleep(0.2)
    raise AssertionError(f"no {pattern!r} within {timeout_s:.0f} s; the text was:\n{text}")


def _eventually(check, timeout_s: float, what: str):
    """Poll ``check()`` until it returns a true value (widget updates arrive asynchronously)."""
    deadline = time.monotonic() + timeout_s
    while True:
        value = check()
        if value or time.monotonic() > deadline:
            break
        time.sleep(0.2)
    assert value, f"{what}: not within {timeout_s:.0f} s"
    return value


def test_report_view_and_tuning_dashboard_render_and_respond(notebook, jupyter_lab,
                                                              report_source):
    url = _notebook(jupyter_lab, "widgets.ipynb", report_source,
                    "ReportView(make_report())",
                    "db = tune(8)\nprint(f'RECORDS {len(db.get_all_tuning_records())}')")
    notebook.open(url)
    notebook.run_cell(0)
    notebook.run_cell(1)

    # ---- ReportView: tabs, the call table, a control that goes to the kernel and back ----
    view = notebook.output(1)
    table = view.locator("table.wb-report-view")
    table.wait_for(timeout=60_000)
    tab_titles = _texts(view.locator(".lm-TabBar-tabLabel"))
    assert tab_titles == ["Table", "Time by operator", "Share", "Timeline"], tab_titles
    assert sorted(_texts(table.locator("tbody tr td:first-child"))) == \
        ["add_one_16", "exp_64", "matmul_64"]
    # Typing in the Filter box is a comm message to the kernel; the kernel's refresh()
    # sends the filtered table and charts back.
    view.locator(".widget-text input").fill("exp")
    _eventually(lambda: _texts(table.locator("tbody tr td:first-child")) == ["exp_64"],
                20, "the table filtered to exp_64")
    view.locator(".lm-TabBar-tab", has_text="Time by operator").click()
    chart = view.locator(".js-plotly-plot", has_text="Time by operator")
    chart.wait_for(timeout=20_000)
    assert chart.is_visible()
    _eventually(lambda: chart.locator(".barlayer .point").count() == 1 and
                _texts(chart.locator(".yaxislayer-above .ytick")) == ["exp_64"],
                20, "one bar, exp_64, in 'Time by operator'")

    # ---- TuningDashboard shown by tune_tir(dashboard=True) ----
    notebook.run_cell(2)
    dash = notebook.output(2)
    _wait_for_text(dash, r"RECORDS 8", timeout_s=90)
    summary = dash.locator(".widget-html-content", has_text="trials").first
    _wait_for_text(summary, r"8/8\s*trials.*finished", timeout_s=20)
    tuning_table = dash.locator("table.wb-tuning-table")
    headers = _texts(tuning_table.locator("thead th"))
    row = dict(zip(headers, _texts(tuning_table.locator("tbody tr").first.locator("td"))))
    assert (row["Name"], row["Trials"], row["Done"]) == ("main", "8", "Y"), row
    assert float(row["Speed (GFLOPS)"]) > 0
    stop = dash.locator("button.widget-button", has_text="Stop")
    assert stop.is_disabled(), "Stop stays enabled after the run finished"
    plots = dash.locator(".js-plotly-plot")
    assert plots.count() == 2
    assert _texts(dash.locator(".js-plotly-plot .gtitle")) == ["Best so far", "Candidates"]
    # Every measured candidate is a marker in "Candidates" (errors included, at y = 0).
    candidates = plots.nth(1)
    _eventually(lambda: candidates.locator(".scatterlayer .point").count() == 8, 20,
                "8 markers in 'Candidates'")
    # The y-axis toggle goes to the kernel, which re-plots the candidates as latencies.
    dash.locator(".widget-toggle-buttons button", has_text="Latency (us)").click()
    _eventually(lambda: "Latency (us)" in _texts(candidates.locator(".g-ytitle")), 20,
                "the Candidates y axis switched to Latency (us)")


def _trials_at_least(summary, budget: int, least: int, timeout_s: float) -> tuple[int, str]:
    """Wait until the dashboard's summary line shows at least ``least`` trials; return the
    count and the line."""
    deadline = time.monotonic() + timeout_s
    text = ""
    while time.monotonic() < deadline:
        text = summary.inner_text() if summary.count() else ""
        found = re.search(rf"(\d+)/{budget}\s*trials", text)
        if found and int(found.group(1)) >= least:
            return int(found.group(1)), text
        time.sleep(0.1)
    raise AssertionError(f"fewer than {least} trials after {timeout_s:.0f} s: {text!r}")


def test_stop_ends_a_tuning_run_in_the_running_cell(notebook, jupyter_lab, report_source):
    """``tune_tir(..., dashboard=True)`` typed in a cell: Stop, clicked while the cell runs,
    ends the run after the batch being measured; the cell returns the Database holding every
    measured record, and the kernel is free again for the next cell."""
    budget = 2000  # about 5 minutes of tuning here if Stop did nothing
    url = _notebook(jupyter_lab, "stop_in_cell.ipynb", report_source,
                    f"db = tune({budget})\n"
                    "print(f'RUN {type(db).__name__} records={len(db.get_all_tuning_records())}')",
                    "print('NEXT CELL RAN')")
    notebook.open(url)
    notebook.run_cell(0)
    notebook.run_cell(1)
    dash = notebook.output(1)
    summary = dash.locator(".widget-html-content", has_text="trials").first
    stop = dash.locator("button.widget-button", has_text="Stop")
    seen, line = _trials_at_least(summary, budget, 4, timeout_s=60)
    assert "running" in line, line
    stop.click()
    clicked = time.monotonic()

    ran = _wait_for_text(dash, r"RUN (\w+) records=(\d+)", timeout_s=120)
    elapsed = time.monotonic() - clicked
    kind, records = ran.group(1), int(ran.group(2))
    assert kind == "JSONDatabase"
    assert seen <= records < budget, (seen, records)
    # The page shows the count a render late; a few batches of slack, against a 2000 budget.
    assert records <= seen + 24, f"{records} records: tuning went on for a while after Stop"
    _wait_for_text(summary, rf"{records}/{budget}\s*trials.*finished", timeout_s=20)
    assert stop.is_disabled()
    notebook.run_cell(2)
    _wait_for_text(notebook.output(2), r"NEXT CELL RAN", timeout_s=30)
    print(f"Stop clicked in the running cell at {seen} trials; the cell returned "
          f"{elapsed:.1f} s later with {records} records")


def test_stop_ends_a_tuning_running_in_a_background_thread(notebook, jupyter_lab,
                                                           report_source):
    """Tuning in a ``threading.Thread`` with a dashboard displayed beforehand (the way that
    also works with frontends without subshells, notebooks/05): the click reaches the kernel
    at once and the run ends after the batch being measured, keeping every measured record."""
    budget = 2000  # about 5 minutes of tuning here if Stop did nothing
    url = _notebook(jupyter_lab, "stop_thread.ipynb", report_source,
                    "import threading\n"
                    "dash = TuningDashboard()\n"
                    "display(dash)\n"
                    "result = {}\n"
                    f"worker = threading.Thread(target=lambda: result.update(db=tune({budget}, "
                    "dash)))\n"
                    "worker.start()",
                    "worker.join(timeout=120)\n"
                    "print(f'STOPPED alive={worker.is_alive()} '\n"
                    "      f'records={len(result[\"db\"].get_all_tuning_records())} '\n"
                    "      f'trials={dash.progress.snapshot().trials}')")
    notebook.open(url)
    notebook.run_cell(0)
    notebook.run_cell(1)
    dash = notebook.output(1)
    summary = dash.locator(".widget-html-content", has_text="trials").first
    stop = dash.locator("button.widget-button", has_text="Stop")
    seen, line = _trials_at_least(summary, budget, 4, timeout_s=60)
    stop.click()
    clicked = time.monotonic()
    notebook.run_cell(2)

    stopped = _wait_for_text(notebook.output(2),
                             r"STOPPED alive=(\w+) records=(\d+) trials=(\d+)", timeout_s=120)
    elapsed = time.monotonic() - clicked
    alive, records, trials = stopped.group(1), int(stopped.group(2)), int(stopped.group(3))
    assert alive == "False"
    assert seen <= records < budget, (seen, records)
    # The page shows the count a render late; a few batches of slack, against a 2000 budget.
    assert records <= seen + 24, f"{records} records: tuning went on for a while after Stop"
    assert trials == records  # the dashboard saw every stored record: nothing was dropped
    _wait_for_text(summary, rf"{records}/{budget}\s*trials.*finished", timeout_s=20)
    assert stop.is_disabled()
    print(f"Stop clicked at {seen} trials; the run ended {elapsed:.1f} s later with "
          f"{records} records")

"""The notebook faces on real models, measured in Chromium at two window widths (issue 26).

Notebook 07 (ResNet-18) read in JupyterLab showed: ReportView rows ten lines tall and its last
column cut at the widget's edge; the tuning dashboard counting re-measurements against the
trial budget ("25/16 trials"), its table columns running together and its two plots
overlapping; VM builtins listed as model layers. Here, with a ResNet-18 report and a
transformer report (torch models at random weights, compiled and profiled by the VM) and a
real tuning run, the page's element boxes are checked (:mod:`layout_checks`) at 1400 and 800
px: table rows at most two lines tall, no cell cut without its text in a title, tables that
scroll when too wide, no overlapping dashboard elements, legends off the plots.

The last test runs notebooks 03, 05, 07 and 08 top to bottom and keeps a screenshot of every
screen under ``tests/browser/artefacts/<notebook>/`` (not committed): look at them.
"""
from __future__ import annotations

import re
import shutil
import time
from pathlib import Path

import nbformat
import pytest
from layout_checks import OVERLAP_PROBLEMS, TABLE_PROBLEMS
from test_widgets_browser import TUNING_SOURCE, _eventually, _texts, _wait_for_text

pytestmark = [pytest.mark.browser, pytest.mark.timeout(420)]

WIDTHS = (1400, 800)
ARTEFACTS = Path(__file__).parent / "artefacts"
NOTEBOOKS = Path(__file__).parents[2] / "notebooks"

# Reports of real models, built in the notebook's kernel: torch at random weights, exported,
# imported into Relax, built with default schedules and profiled by the VM.
MODELS_SOURCE = '''
import workbench as wb   # before torch: one libgomp, with the runtime's bounded spinning
import torch
import torchvision
from workbench import relax
from workbench.relax.frontend.torch import from_exported_program
from workbench.widgets import ReportView


def profile_model(model, example):
    """The VM profiler's Report of ``model`` (eval mode) on ``example``."""
    with torch.no_grad():
        ep = torch.export.export(model.eval(), (example,))
    exe = relax.build(from_exported_program(ep), wb.Target("llvm -num-cores=2"))
    vm = relax.VirtualMachine(exe, wb.cpu(), profile=True)
    return vm.profile("main", wb.nd.array(example.numpy()))


def resnet18_report():
    torch.manual_seed(0)
    return profile_model(torchvision.models.resnet18(weights=None), torch.randn(1, 3, 224, 224))


def transformer_report():
    torch.manual_seed(0)
    layer = torch.nn.TransformerEncoderLayer(d_model=64, nhead=4, dim_feedforward=128,
                                             dropout=0.0, batch_first=True)
    model = torch.nn.TransformerEncoder(layer, num_layers=2, enable_nested_tensor=False)
    return profile_model(model, torch.randn(1, 16, 64))
'''


def _shots() -> Path:
    """Where the widget screenshots go (made on first use)."""
    shots = ARTEFACTS / "widgets"
    shots.mkdir(parents=True, exist_ok=True)
    return shots


def _problems(locator, script: str) -> list[str]:
    return locator.evaluate(script)


def _at_widths(notebook, outputs, script: str, what: str) -> None:
    """Run ``script`` on every output at each window width, keeping a screenshot of each
    output (``artefacts/widgets``); fail with every problem found."""
    found = []
    shots = _shots()
    for width in WIDTHS:
        notebook.page.set_viewport_size({"width": width, "height": 1000})
        time.sleep(1.0)  # JupyterLab and plotly re-lay out on resize
        for name, output in outputs:
            output.scroll_into_view_if_needed()
            output.screenshot(path=str(shots / f"{name}_{width}.png"))
            found += [f"{width}px, {name}: {p}" for p in _problems(output, script)]
    assert not found, f"{what}:\n" + "\n".join(found)


def test_report_tables_fit_resnet18_and_a_transformer(notebook, jupyter_lab):
    cells = [MODELS_SOURCE,
             "r18 = resnet18_report()\nv18 = ReportView(r18)\nv18",
             "vt = ReportView(transformer_report(), page_size=20)\n"
             "vt.aggregate_toggle.value = False\nvt"]
    url = jupyter_lab.write_notebook("faces_reports.ipynb",
                                     [nbformat.v4.new_code_cell(c) for c in cells])
    notebook.open(url)
    for i in range(3):
        notebook.run_cell(i)
    resnet, transformer = notebook.output(1), notebook.output(2)
    for view in (resnet, transformer):
        view.locator("table.wb-report-view").first.wait_for(timeout=240_000)

    # The ResNet's convolutions: condensed shapes, the full list on hover.
    shapes = resnet.locator("table.wb-report-view td[title*='float32[']").first
    assert re.fullmatch(r"\d+ args: (\w+ )?[\dx]+ \.\.\. -> (\w+ )?[\dx]+|"
                        r"(\w+ )?[\dx]+ -> (\w+ )?[\dx]+",
                        shapes.inner_text()), shapes.inner_text()
    _at_widths(notebook, [("ResNet-18", resnet), ("transformer", transformer)],
               TABLE_PROBLEMS, "the report tables do not fit")

    # VM builtins: not in the table nor the layer chart until asked for.
    names = _texts(resnet.locator("table.wb-report-view").first.locator("tbody tr td:first-child"))
    assert names and not [n for n in names if n.startswith("vm.builtin")], names
    resnet.locator(".lm-TabBar-tab", has_text="Time by operator").click()
    chart = resnet.locator(".js-plotly-plot", has_text="Time by layer")
    chart.wait_for(timeout=20_000)
    ticks = _texts(chart.locator(".yaxislayer-above .ytick"))
    assert ticks and not [t for t in ticks if "vm.builtin" in t], ticks
    resnet.locator(".widget-checkbox", has_text="VM builtins").locator("input").check()
    resnet.locator(".lm-TabBar-tab", has_text="Table").click()
    first_column = resnet.locator("table.wb-report-view").first.locator("tbody tr td:first-child")
    _eventually(lambda: any(n.startswith("vm.builtin") for n in _texts(first_column)),
                20, "the VM builtins in the table after ticking 'VM builtins'")

    # The transformer's per-call table, a page at a time.
    label = transformer.locator(".widget-html-content", has_text="rows 1-20 of")
    total = int(re.search(r"of (\d+)", label.inner_text()).group(1))
    assert total > 20
    assert transformer.locator("table.wb-report-view").first.locator("tbody tr").count() == 20
    transformer.locator("button", has_text="Next").click()
    _wait_for_text(transformer, rf"rows 21-{min(40, total)} of {total}", timeout_s=20)


def test_dashboard_counts_and_lays_out_without_overlap(notebook, jupyter_lab):
    """A real run with the confirmation on, watched in a window 800 px wide, then the window
    widened to 1400 px: the figures follow (plotly sizes a figure when it draws it, and on
    window resizes)."""
    run = ("from workbench import options\n"
           "with options.override(ms_confirm_rounds=2, ms_confirm_top_k=2):\n"
           "    db = tune(8)\n"
           "print(f'RECORDS {len(db.get_all_tuning_records())}')")
    url = jupyter_lab.write_notebook("faces_dashboard.ipynb", [
        nbformat.v4.new_code_cell(TUNING_SOURCE), nbformat.v4.new_code_cell(run)])
    notebook.page.set_viewport_size({"width": 800, "height": 1000})
    notebook.open(url)
    notebook.run_cell(0)
    notebook.run_cell(1)
    dash = notebook.output(1)
    records = int(_wait_for_text(dash, r"RECORDS (\d+)", timeout_s=180).group(1))
    assert records > 8, "the confirmation measured nothing: nothing to count apart"
    summary = dash.locator(".widget-html-content", has_text="trials").first
    _wait_for_text(summary, rf"8/8\s*trials \+ {records - 8} re-measurements.*finished",
                   timeout_s=30)
    headers = _texts(dash.locator("table.wb-tuning-table thead th"))
    assert "Re-measured" in headers, headers

    boxes, found = {}, []
    for width in sorted(WIDTHS):
        notebook.page.set_viewport_size({"width": width, "height": 1000})
        time.sleep(1.5)  # JupyterLab's layout, then plotly's resize (after 100 ms)
        dash.scroll_into_view_if_needed()
        dash.screenshot(path=str(_shots() / f"dashboard_{width}.png"))
        for script in (TABLE_PROBLEMS, OVERLAP_PROBLEMS):
            found += [f"{width}px: {p}" for p in _problems(dash, script)]
        plots = dash.locator(".js-plotly-plot .main-svg:first-child")
        boxes[width] = [plots.nth(i).bounding_box() for i in range(2)]
    assert not found, "the dashboard does not lay out:\n" + "\n".join(found)
    side, stacked = boxes[1400], boxes[800]
    assert abs(side[0]["y"] - side[1]["y"]) < 60, side       # side by side (toggle above 2)
    assert stacked[1]["y"] >= stacked[0]["y"] + stacked[0]["height"] - 1, stacked


def _run_all(notebook) -> None:
    """Run > Run All Cells, the way a reader runs a notebook."""
    page = notebook.page
    page.locator(".lm-MenuBar-itemLabel", has_text="Run").first.click()
    page.locator(".lm-Menu-itemLabel", has_text="Run All Cells").first.click()


def _wait_until_run(notebook, timeout_s: float) -> None:
    """Until every code cell has an execution count and the kernel is idle."""
    page = notebook.page
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        pending = page.evaluate(
            "() => [...document.querySelectorAll('.jp-Notebook .jp-CodeCell .jp-InputPrompt')]"
            ".filter(p => !/\\[\\d+\\]/.test(p.textContent)).length")
        if pending == 0:
            notebook.wait_for_idle_kernel(timeout_s=max(1.0, deadline - time.monotonic()))
            return
        time.sleep(1.0)
    raise AssertionError(f"the notebook did not finish within {timeout_s:.0f} s")


#: Both checks on every output on the screen, in one round trip to the page (one per output
#: and check took most of a long notebook's test).
EVERY_OUTPUTS_PROBLEMS = (f"(els) => els.flatMap(el => [...({TABLE_PROBLEMS})(el), "
                          f"...({OVERLAP_PROBLEMS})(el)])")


def _screens(notebook, directory: Path) -> tuple[int, list[str]]:
    """A screenshot of every screen of the open notebook, top to bottom, and the layout
    problems of the outputs on each screen (the notebook renders only the cells in view);
    returns how many screens and the problems."""
    page = notebook.page
    scroller = page.locator(".jp-NotebookPanel:not(.lm-mod-hidden) .jp-WindowedPanel-outer")
    page.evaluate("() => document.activeElement && document.activeElement.blur()")
    shown = scroller.evaluate("(el) => el.clientHeight")
    problems: dict[str, None] = {}
    index, top = 0, 0
    while True:
        scroller.evaluate(f"(el) => el.scrollTo(0, {top})")
        time.sleep(0.6)  # windowed cells render as they come into view
        page.screenshot(path=str(directory / f"screen_{index:02d}.png"))
        outputs = page.locator(".jp-NotebookPanel:not(.lm-mod-hidden) .jp-OutputArea")
        problems.update(dict.fromkeys(outputs.evaluate_all(EVERY_OUTPUTS_PROBLEMS)))
        # a plot of the model's layers or kernels lists no VM builtins
        problems.update(dict.fromkeys(
            f"a plot shows the VM builtin {t!r} as an axis label" for t in page.evaluate(
                "() => [...document.querySelectorAll('.js-plotly-plot .ytick, "
                ".js-plotly-plot .xtick')].map(t => t.textContent)"
                ".filter(t => t.includes('vm.builtin'))")))
        index += 1
        height = scroller.evaluate("(el) => el.scrollHeight")
        if top + shown >= height or index >= 60:
            return index, list(problems)
        top += shown - 80  # a little overlap between screens


#: Smaller parameters than the notebooks' test defaults where the run is long (the nbmake run
#: of the notebooks keeps theirs): set by a first cell, as the reader sets them by environment.
SMALL = {"07_optimize_a_pytorch_model": {"WB_NB07_TRIALS": "4", "WB_NB07_PER_ITER": "2"}}


def _copy_notebook(name: str, directory: Path) -> None:
    """``notebooks/<name>.ipynb`` into ``directory``, with :data:`SMALL`'s parameters."""
    nb = nbformat.read(NOTEBOOKS / f"{name}.ipynb", as_version=4)
    if name in SMALL:
        nb.cells.insert(0, nbformat.v4.new_code_cell(
            f"import os\nos.environ.update({SMALL[name]!r})  # the browser test's parameters"))
    nbformat.write(nb, directory / f"{name}.ipynb")


def _read_saved(path: Path, before: float):
    """The notebook at ``path`` once saved after ``before`` and whole, else None: the server
    may still be writing it when its time stamp has changed (an empty file was read once)."""
    if path.stat().st_mtime <= before:
        return None
    try:
        return nbformat.read(path, as_version=4)
    except ValueError:          # nbformat.reader.NotJSONError: a file half written
        return None


@pytest.mark.timeout(900)
@pytest.mark.parametrize("name", ["03_profiling", "05_tuning",
                                  "07_optimize_a_pytorch_model", "08_remote_and_cluster"])
def test_notebook_reads_well_and_keeps_screenshots(notebook, jupyter_lab, name):
    _copy_notebook(name, jupyter_lab.root)
    notebook.page.set_viewport_size({"width": 1400, "height": 1000})
    notebook.open(jupyter_lab.notebook_url(f"{name}.ipynb"))
    _run_all(notebook)
    _wait_until_run(notebook, timeout_s=780)
    # Saved, the notebook file holds every output (the page only the cells in view).
    path = jupyter_lab.root / f"{name}.ipynb"
    before = path.stat().st_mtime
    notebook.page.keyboard.press("Control+s")
    saved = _eventually(lambda: _read_saved(path, before), 30, "the notebook saved")
    errors = [f"cell {i}: {o.get('ename')}: {o.get('evalue')}"
              for i, c in enumerate(saved.cells) if c.cell_type == "code"
              for o in c.outputs if o.output_type == "error"]
    assert not errors, errors
    directory = ARTEFACTS / name
    shutil.rmtree(directory, ignore_errors=True)
    directory.mkdir(parents=True)
    count, problems = _screens(notebook, directory)
    print(f"{name}: {count} screenshots in {directory}")
    assert not problems, "\n".join(problems)

"""Reading a comparison as a reader does: ``ReportView(tiled, baseline=naive, ...)`` in a real
JupyterLab, its Diff tab opened by a click. Every place that states a direction (tab title,
headline, chart title and axis, table headers) names both runs in the order baseline -> new,
and a faster new run is a green bar above 1, never a red "0.18x"."""
import re

import nbformat
import pytest

pytestmark = [pytest.mark.browser, pytest.mark.timeout(180)]

# Two Reports of one matmul call: "naive" takes 5.5x as long as "tiled" (fixed durations, so
# the page's numbers are known).
SOURCE = '''
from workbench.runtime.profiling import Count, Duration, Report
from workbench.widgets import ReportView


def run(matmul_us):
    calls = [{"Name": "matmul", "Duration (us)": Duration(matmul_us), "Count": Count(1),
              "Device": "cpu0", "Argument Shapes": "float32[256, 256]"},
             {"Name": "relu", "Duration (us)": Duration(10.0), "Count": Count(1),
              "Device": "cpu0", "Argument Shapes": "float32[256, 256]"}]
    return Report(calls, {}, {})


naive, tiled = run(1090.0), run(190.0)
ReportView(tiled, baseline=naive, name="tiled", baseline_name="naive")
'''


def test_diff_tab_names_both_runs(notebook, jupyter_lab, tmp_path):
    url = jupyter_lab.write_notebook("diff.ipynb", [nbformat.v4.new_code_cell(SOURCE)])
    notebook.open(url)
    notebook.run_cell(0)
    view = notebook.output(0)
    view.locator("table.wb-report-view").first.wait_for(timeout=60_000)
    tab = view.locator(".lm-TabBar-tab", has_text="Diff")
    assert tab.inner_text().strip() == "Diff: naive -> tiled"
    tab.click()

    # (1090 + 10) / (190 + 10) = 5.5
    headline = view.locator(".wb-diff-headline")
    headline.wait_for(timeout=20_000)
    assert headline.inner_text().strip() == "naive -> tiled: 5.50x faster"
    chart = view.locator(".js-plotly-plot", has_text="Speedup per call")
    chart.wait_for(timeout=20_000)
    # SVG text: text_content, not inner_text
    assert chart.locator(".gtitle").text_content().strip() == "Speedup per call, naive -> tiled"
    assert chart.locator(".g-xtitle").text_content().strip() == \
        "naive time / tiled time (> 1: tiled is faster)"
    assert sorted(t.strip() for t in
                  chart.locator(".yaxislayer-above .ytick").all_text_contents()) == \
        ["matmul", "relu"]
    # the faster kernel's bar is green (the slower/same ones are not)
    fills = [p.evaluate("e => getComputedStyle(e).fill") for p in
             chart.locator(".barlayer .point path").all()]
    assert fills[0] == "rgb(84, 162, 75)", fills

    table = view.locator("table.wb-report-view", has_text="Speedup (naive / tiled)")
    headers = [h.strip() for h in table.locator("thead th").all_text_contents()]
    for want in ("naive (us)", "tiled (us)", "Delta (us, tiled - naive)",
                 "Speedup (naive / tiled)", "tiled vs naive"):
        assert want in headers, headers
    first = dict(zip(headers, [t.strip() for t in
                               table.locator("tbody tr").first.locator("td").all_text_contents()]))
    assert (first["Name"], first["tiled vs naive"]) == ("matmul", "faster"), first
    assert re.fullmatch(r"5\.7\d", first["Speedup (naive / tiled)"]), first
    notebook.page.screenshot(path=str(tmp_path / "diff_tab.png"), full_page=True)

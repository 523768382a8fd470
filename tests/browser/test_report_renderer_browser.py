"""The prebuilt JupyterLab MIME renderer for Report (extension/src, built into
workbench/labextension/) in a real JupyterLab: a notebook whose saved output is a real
Report's MIME bundle shows our table (not the text/html fallback), one row per kernel, and
clicking a column header sorts it."""
import nbformat
import pytest

from workbench.runtime.profiling import REPORT_MIME_TYPE

pytestmark = [pytest.mark.browser, pytest.mark.timeout(180)]


def _texts(locator) -> list[str]:
    return [t.strip() for t in locator.all_text_contents()]


def _column(table, header: str) -> list[str]:
    """The text of column ``header`` in the table body, top to bottom."""
    headers = _texts(table.locator("thead th"))
    index = headers.index(header)
    return _texts(table.locator(f"tbody tr td:nth-child({index + 1}) .wb-Report-text"))


def test_saved_report_output_renders_as_a_sortable_table(notebook, jupyter_lab, report_source):
    namespace: dict = {}
    exec(compile(report_source, "report_source", "exec"), namespace)  # noqa: S102 - our source
    report = namespace["make_report"]()
    bundle = report._repr_mimebundle_()
    assert REPORT_MIME_TYPE in bundle and "text/html" in bundle
    cell = nbformat.v4.new_code_cell("report", execution_count=1, outputs=[
        nbformat.v4.new_output("execute_result", data=bundle, execution_count=1)])
    notebook.open(jupyter_lab.write_notebook("saved_report.ipynb", [cell]), kernel=False)

    output = notebook.output(0)
    rendered = output.locator(".wb-ReportRenderer .wb-Report")
    rendered.wait_for(timeout=30_000)
    # Our renderer won over the text/html fallback of the same bundle.
    assert output.locator(".jp-RenderedHTMLCommon table").count() == 0
    table = rendered.locator("table.wb-Report-table")
    headers = _texts(table.locator("thead th"))
    for column in ("Name", "Duration (us)", "Count", "Device", "Argument Shapes"):
        assert column in headers, headers

    # Aggregated (the default): one row per kernel, largest total duration first.
    frame = report.to_dataframe(aggregate=True)
    by_duration = frame.sort_values("Duration (us)", ascending=False)["Name"].tolist()
    assert sorted(by_duration) == ["add_one_16", "exp_64", "matmul_64"]
    assert _column(table, "Name") == by_duration
    assert _column(table, "Count") == ["3", "3", "3"]
    duration_th = table.locator("thead th", has_text="Duration (us)")
    assert "wb-Report-sorted" in duration_th.get_attribute("class")
    assert duration_th.get_attribute("aria-sort") == "descending"
    summary = rendered.locator(".wb-Report-summary").inner_text()
    assert summary.startswith("3 groups of 9 calls"), summary
    assert "Total" in _texts(table.locator("tfoot tr td:first-child"))

    # Click "Name": strings sort ascending first; a second click flips the order.
    table.locator("thead th button.wb-Report-sort", has_text="Name").click()
    name_th = table.locator("thead th", has_text="Name").first
    assert "wb-Report-sorted" in name_th.get_attribute("class")
    assert name_th.get_attribute("aria-sort") == "ascending"
    assert "wb-Report-sorted" not in (duration_th.get_attribute("class") or "")
    assert _column(table, "Name") == sorted(by_duration)
    assert _column(table, "Name") != by_duration, "sorting by Name changed nothing"
    table.locator("thead th button.wb-Report-sort", has_text="Name").click()
    assert table.locator("thead th", has_text="Name").first.get_attribute("aria-sort") \
        == "descending"
    assert _column(table, "Name") == sorted(by_duration, reverse=True)

    # The other controls of the renderer: un-aggregate (9 calls), then filter by name.
    rendered.locator(".wb-Report-aggregate input").uncheck()
    assert len(_column(table, "Name")) == 9
    rendered.locator("input.wb-Report-filter").fill("exp")
    assert _column(table, "Name") == ["exp_64"] * 3
    assert rendered.locator(".wb-Report-summary").inner_text().startswith("3 calls of 9 calls")

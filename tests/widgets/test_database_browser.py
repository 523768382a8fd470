"""DatabaseBrowser without a browser: the DataFrame, controls and record detail."""
import html
import math
import re

import pytest

pytest.importorskip("ipywidgets")

from workbench.meta_schedule.database import (  # noqa: E402
    JSONDatabase, MemoryDatabase, TuningRecord,
)
from workbench.widgets import DatabaseBrowser  # noqa: E402
from workbench.widgets.database_browser import COLUMNS, records_in_commit_order  # noqa: E402

from test_tuning_dashboard import matmul, scheduled  # noqa: E402


def plain(html_text):
    """The text of highlighted HTML."""
    return html.unescape(re.sub(r"<[^>]+>", "", html_text))


def fill(db):
    """Two matmul workloads (16 and 32); the 16 one has a failure and three timings."""
    m16, m32 = matmul(16), matmul(32)
    w16, w32 = db.commit_workload(m16), db.commit_workload(m32)
    for factor, secs in ((4, [2e-6]), (2, [1e-6, 3e-6]), (8, [1e10]), (4, [0.5e-6])):
        db.commit_tuning_record(TuningRecord(scheduled(m16, factor).trace, w16, secs))
    db.commit_tuning_record(TuningRecord(scheduled(m32, 4).trace, w32, [4e-6]))
    return db


@pytest.fixture(params=["memory", "json"])
def db(request, tmp_path):
    return fill(MemoryDatabase() if request.param == "memory"
                else JSONDatabase(work_dir=str(tmp_path)))


def test_records_as_a_dataframe(db):
    view = DatabaseBrowser(db)
    frame = view.frame
    assert tuple(frame.columns) == COLUMNS
    assert frame["Trial"].tolist() == [1, 2, 3, 4, 5]       # commit order, even for JSON
    assert frame["Workload"].tolist() == ["main"] * 5
    assert frame["Arguments"][0] == "float32[16,16], float32[16,16], float32[16,16]"
    assert frame["Arguments"][4] == "float32[32,32], float32[32,32], float32[32,32]"
    assert frame["Hash"].nunique() == 2 and all(len(h) == 16 for h in frame["Hash"])
    times = frame["Run time (us)"].tolist()
    assert times[:2] + times[3:] == pytest.approx([2.0, 2.0, 0.5, 4.0])   # the mean
    assert math.isnan(times[2])
    assert frame["Error"].tolist() == [False, False, True, False, False]
    gflops = frame["GFLOPS"].tolist()
    assert gflops[0] == pytest.approx(2 * 16 ** 3 / 2e-6 / 1e9)
    assert gflops[4] == pytest.approx(2 * 32 ** 3 / 4e-6 / 1e9)
    assert math.isnan(gflops[2])
    assert frame["Runs"].tolist() == [1, 2, 1, 1, 1]
    assert "<b>5</b> of 5 record(s)" in view.summary_html.value
    assert "2 workload(s); 1 failed" in view.summary_html.value
    assert "N/A" in view.table_html.value


def test_filter_sort_and_best_only(db):
    view = DatabaseBrowser(db)
    view.sort_dropdown.value = "Run time (us)"
    assert view.frame["Trial"].tolist() == [4, 1, 2, 5, 3]   # failures last
    view.ascending_check.value = False
    assert view.frame["Trial"].tolist() == [5, 1, 2, 4, 3]
    view.best_toggle.value = True
    assert sorted(view.frame["Trial"].tolist()) == [4, 5]
    view.filter_text.value = "32,32"
    assert view.frame["Trial"].tolist() == [5]
    view.filter_text.value = view.all_frame["Hash"][0][:8].upper()
    assert view.frame["Trial"].tolist() == [4]
    view.best_toggle.value = False
    assert sorted(view.frame["Trial"].tolist()) == [1, 2, 3, 4]
    view.filter_text.value = "nothing like this"
    assert len(view.frame) == 0 and view.record_select.value is None
    assert "no record selected" in view.trace_html.value


def test_selected_record_shows_trace_and_scheduled_ir(db):
    view = DatabaseBrowser(db)
    assert view.record_select.value == 1
    view.record_select.value = 2
    text = view.trace_python(2)
    assert "sch.split(" in text and "factors=[None, 2]" in text
    assert "factors=[None, 2]" in plain(view.trace_html.value)
    ir = view.scheduled_ir(2)
    assert "T.grid(8, 2, 16, 16)" in ir.script()
    assert "T.grid(8, 2, 16, 16)" in plain(view.ir_html.value)
    # The replay is what query_schedule gives for the best record.
    best = view.all_frame.sort_values("Run time (us)").iloc[0]
    from workbench.ir.structural import structural_equal
    assert structural_equal(view.scheduled_ir(int(best["Trial"])),
                            db.query_ir_module(matmul(16)))
    with pytest.raises(IndexError, match="no record with trial index 9"):
        view.record(9)


def test_refresh_sees_new_records(db):
    view = DatabaseBrowser(db)
    m16 = matmul(16)
    db.commit_tuning_record(TuningRecord(scheduled(m16, 16).trace, db.commit_workload(m16),
                                         [0.1e-6]))
    assert len(view.frame) == 5
    view.refresh()
    assert view.frame["Trial"].tolist()[-1] == 6


def test_records_in_commit_order_for_a_sorted_database(tmp_path):
    db = fill(JSONDatabase(work_dir=str(tmp_path)))
    by_speed = db.get_all_tuning_records()
    assert by_speed[0].run_secs == [0.5e-6]            # TVM's JSON database sorts by speed
    ordered = records_in_commit_order(db)
    assert [r.run_secs for r in ordered][:2] == [[2e-6], [1e-6, 3e-6]]
    reopened = JSONDatabase(work_dir=str(tmp_path))  # file order is commit order
    assert [r.run_secs for r in records_in_commit_order(reopened)] == \
        [r.run_secs for r in ordered]


def test_empty_database_and_bad_argument():
    view = DatabaseBrowser(MemoryDatabase())
    assert len(view.frame) == 0 and "<b>0</b> of 0" in view.summary_html.value
    view.best_toggle.value = True
    view.filter_text.value = "x"
    assert len(view.frame) == 0
    with pytest.raises(TypeError, match="must be a meta_schedule Database"):
        DatabaseBrowser({"not": "a database"})


def test_static_fallback(db):
    bundle = DatabaseBrowser(db)._repr_mimebundle_()
    assert "application/vnd.jupyter.widget-view+json" in bundle
    assert "Run time (us)" in bundle["text/html"] and "Trial" in bundle["text/plain"]

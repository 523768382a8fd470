"""Beyond TVM: DataFrames, diffs, Chrome traces, notebook repr, and the Profiler engine."""
import json
import math
import subprocess
import sys
import time
from dataclasses import dataclass

import pytest

from workbench.runtime.profiling import (REPORT_MIME_TYPE, Count, Duration, MetricCollector,
                                         Profiler, Report)


@dataclass(frozen=True)
class Cpu:
    device_type: int = 1
    device_id: int = 0


def test_import_loads_no_pandas_or_widgets():
    code = ("import sys, workbench.runtime.profiling as p; "
            "print(sorted(m for m in ('pandas', 'ipywidgets', 'plotly') if m in sys.modules))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"


def test_to_dataframe_calls(report):
    df = report.to_dataframe()
    assert list(df.columns) == ["Name", "Duration (us)", "Percent", "Device", "Count",
                                "Argument Shapes", "Bytes Read", "Hit Rate"]
    assert df["Name"].tolist() == ["reshape", "matmul", "relu", "matmul"]
    assert df["Duration (us)"].tolist() == [1.0, 10.0, 2.5, 8.0]
    assert str(df["Duration (us)"].dtype) == "float64"
    assert str(df["Count"].dtype) == "Int64" and df["Count"].tolist() == [1, 1, 1, 1]
    assert str(df["Bytes Read"].dtype) == "Int64"
    assert df["Bytes Read"].isna().tolist() == [True, False, True, False]
    assert df["Hit Rate"].tolist()[1] == 0.5 and math.isnan(df["Hit Rate"].tolist()[0])


def test_to_dataframe_aggregated(report):
    df = report.to_dataframe(aggregate=True)
    assert df["Name"].tolist() == ["matmul", "relu", "reshape"]  # by descending duration
    assert df["Duration (us)"].tolist() == [18.0, 2.5, 1.0]
    assert df["Percent"].tolist() == [72.0, 10.0, 4.0]
    assert df["Count"].tolist() == [2, 1, 1]
    assert df["Bytes Read"].tolist()[0] == 3072
    assert df["Hit Rate"].tolist()[0] == pytest.approx(0.4)


def test_to_dataframe_keeps_fixed_columns_when_absent():
    df = Report([{"Name": "k"}], {}, {}).to_dataframe()
    assert list(df.columns)[:6] == ["Name", "Duration (us)", "Percent", "Device", "Count",
                                    "Argument Shapes"]
    assert math.isnan(df["Duration (us)"][0]) and df["Device"][0] == ""


def _call(name, dur, shapes="float32[4]"):
    return {"Name": name, "Duration (us)": Duration(dur), "Count": Count(1), "Device": "cpu0",
            "Argument Shapes": shapes}


def test_diff_call_by_call():
    base = Report([_call("a", 10.0), _call("b", 4.0), _call("a", 6.0), _call("gone", 1.0)], {}, {})
    new = Report([_call("a", 5.0), _call("b", 4.1), _call("a", 9.0), _call("added", 2.0)], {}, {})
    d = base.diff(new)
    assert list(d.columns) == ["Name", "Argument Shapes", "Device", "Occurrence",
                               "Baseline (us)", "New (us)", "Delta (us)", "Speedup", "Change"]
    assert d["Name"].tolist() == ["a", "b", "a", "gone", "added"]
    assert d["Occurrence"].tolist() == [0, 0, 1, 0, 0]
    assert d["Change"].tolist() == ["faster", "same", "slower", "removed", "added"]
    assert d["Speedup"].tolist()[:3] == [2.0, pytest.approx(4.0 / 4.1), pytest.approx(6.0 / 9.0)]
    assert d["Delta (us)"].tolist()[:3] == [-5.0, pytest.approx(0.1), 3.0]
    assert math.isnan(d["New (us)"][3]) and math.isnan(d["Baseline (us)"][4])


def test_diff_names_both_runs():
    naive = Report([_call("a", 10.0), _call("b", 1.0)], {}, {})
    tiled = Report([_call("a", 1.0), _call("b", 1.0)], {}, {})
    d = naive.diff(tiled, baseline_name="naive", name="tiled")
    assert list(d.columns)[4:6] == ["naive (us)", "tiled (us)"]
    assert d.attrs["title"] == "naive -> tiled: 5.50x faster"
    assert d.attrs["speedup"] == pytest.approx(5.5)
    # the other way round reads as a slowdown, never as "0.18x faster"
    assert tiled.diff(naive, baseline_name="tiled", name="naive").attrs["title"] == \
        "tiled -> naive: 5.50x slower"
    assert naive.diff(naive).attrs["title"] == "Baseline -> New: the same speed"
    with pytest.raises(ValueError, match="different names"):
        naive.diff(tiled, baseline_name="x", name="x")
    with pytest.raises(TypeError, match="name must be a non-empty str"):
        naive.diff(tiled, name="")


def test_diff_aggregated_and_threshold():
    base = Report([_call("a", 10.0), _call("a", 6.0)], {}, {})
    new = Report([_call("a", 8.0), _call("a", 7.0)], {}, {})
    d = base.diff(new, aggregate=True)
    assert d["Baseline (us)"].tolist() == [16.0] and d["New (us)"].tolist() == [15.0]
    assert d["Change"].tolist() == ["faster"]
    assert base.diff(new, aggregate=True, threshold=0.1)["Change"].tolist() == ["same"]
    with pytest.raises(TypeError, match="other must be a Report"):
        base.diff("x")
    with pytest.raises(ValueError, match="threshold"):
        base.diff(new, threshold=-1)


def test_chrome_trace_with_recorded_timestamps(tmp_path):
    calls = [dict(_call("a", 3.0), **{"Start (us)": Duration(1.0)}),
             dict(_call("b", 2.0), **{"Start (us)": Duration(5.0)})]
    r = Report(calls, {"cpu0": {"Name": "Total", "Duration (us)": Duration(8.0),
                                "Device": "cpu0", "Start (us)": Duration(0.0)}},
               {"Executor": "VM"})
    path = tmp_path / "trace.json"
    text = r.to_chrome_trace(path)
    assert path.read_text() == text
    doc = json.loads(text)
    assert doc["displayTimeUnit"] == "ms"
    assert doc["otherData"] == {"configuration": {"Executor": "VM"}, "timestamps": "recorded"}
    meta = [e for e in doc["traceEvents"] if e["ph"] == "M"]
    assert {"name": "thread_name", "ph": "M", "pid": 1, "tid": 1,
            "args": {"name": "cpu0"}} in meta
    spans = [e for e in doc["traceEvents"] if e["ph"] == "X"]
    assert [(e["name"], e["ts"], e["dur"], e["tid"]) for e in spans] == [
        ("a", 1.0, 3.0, 1), ("b", 5.0, 2.0, 1), ("Total", 0.0, 8.0, 1)]
    assert spans[0]["args"] == {"Duration (us)": 3.0, "Count": 1, "Device": "cpu0",
                                "Argument Shapes": "float32[4]"}
    assert spans[0]["cat"] == "call" and spans[2]["cat"] == "total"


def test_chrome_trace_without_timestamps_lays_calls_end_to_end(ref_report):
    doc = json.loads(ref_report.to_chrome_trace())
    spans = [(e["name"], e["ts"], e["dur"]) for e in doc["traceEvents"] if e["ph"] == "X"]
    assert spans == [("matmul", 0.0, 10.0), ("relu", 10.0, 2.5), ("matmul", 12.5, 8.0),
                     ("Total", 0.0, 25.0)]
    assert doc["otherData"]["timestamps"].startswith("synthetic")


def test_start_timestamp_is_json_and_csv_data_but_not_a_table_column():
    r = Report([dict(_call("a", 3.0), **{"Start (us)": Duration(1.5)})], {}, {})
    assert '"Start (us)":{"microseconds":1.5}' in r.json()
    assert r.csv().splitlines()[0] == "Argument Shapes,Count,Device,Duration (us),Name,Start (us)"
    assert "Start" not in r.table()


def test_mimebundle(ref_report):
    bundle = ref_report._repr_mimebundle_()
    assert set(bundle) == {"text/plain", "text/html", REPORT_MIME_TYPE}
    assert REPORT_MIME_TYPE == "application/vnd.workbench.report+json"
    assert bundle["text/plain"] == str(ref_report)
    assert json.dumps(bundle[REPORT_MIME_TYPE], separators=(",", ":"),
                      ensure_ascii=False) == ref_report.json()
    page = bundle["text/html"]
    assert page.count("<th ") == 6 and "<script>" in page
    body = page[page.index("<tbody>"):page.index("</tbody>")]
    assert body.index(">matmul<") < body.index(">relu<")
    assert '<td data-v="18.0">18.00</td>' in body
    foot = page[page.index("<tfoot>"):page.index("</tfoot>")]
    assert ">Sum<" in foot and ">Total<" in foot and "----------" not in foot
    assert "<td>Executor</td><td>VM</td>" in page


def test_html_escapes_names():
    page = Report([_call("<b>&", 1.0)], {}, {})._repr_html_()
    assert "&lt;b&gt;&amp;" in page and "<b>&" not in page


class Tally(MetricCollector):
    def __init__(self):
        self.devices, self.started = None, 0

    def init(self, devices):
        self.devices = list(devices)

    def start(self, device):
        self.started += 1
        return self.started

    def stop(self, state):
        return {"Tally": Count(state)}


def test_profiler_records_nested_calls_with_percent_and_timestamps():
    tally = Tally()
    prof = Profiler([Cpu()], [tally], configuration={"Executor": "VM"}, num_threads=3)
    assert [d.name for d in tally.devices] == ["cpu0"]
    prof.start()
    assert prof.is_running()
    prof.start_call("outer", Cpu(), {"Argument Shapes": "float32[2]"})
    prof.start_call("inner", Cpu())
    time.sleep(0.002)
    prof.stop_call()
    prof.stop_call()
    prof.stop()
    r = prof.report()
    assert [c["Name"] for c in r.calls] == ["inner", "outer"]  # inner finishes first
    inner, outer = r.calls
    assert list(outer) == ["Name", "Duration (us)", "Count", "Device", "Argument Shapes",
                           "Tally", "Percent", "Start (us)"]
    total = r.device_metrics["cpu0"]["Duration (us)"].value
    assert inner["Duration (us)"].value >= 2000.0
    assert outer["Duration (us)"].value >= inner["Duration (us)"].value
    assert outer["Percent"].value == pytest.approx(outer["Duration (us)"].value / total * 100)
    assert 0 <= outer["Start (us)"].value <= inner["Start (us)"].value
    assert r.device_metrics["cpu0"]["Name"] == "Total"
    assert r.configuration == {"Executor": "VM", "Number of threads": Count(3)}
    assert Report.from_json(r.json()) == r


def test_profiler_misuse():
    prof = Profiler([Cpu()])
    with pytest.raises(RuntimeError, match="call start"):
        prof.start_call("x", Cpu())
    prof.start()
    prof.start_call("x", Cpu())
    with pytest.raises(RuntimeError, match="1 call"):
        prof.stop()
    with pytest.raises(ValueError, match="at least one device"):
        Profiler([])

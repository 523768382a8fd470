"""Report.fastest_of: per call, the fastest of several runs of the same program."""
import pytest

from workbench.runtime.profiling import Count, Duration, Percent, Report


def run(durations, total, shapes="float32[4]"):
    calls = [{"Name": n, "Duration (us)": Duration(d), "Percent": Percent(100 * d / total),
              "Count": Count(1), "Device": "cpu0", "Argument Shapes": shapes,
              "Layer": f"layer.{n}"} for n, d in durations]
    return Report(calls, {"cpu0": {"Name": "Total", "Duration (us)": Duration(total),
                                   "Count": Count(1), "Device": "cpu0"}},
                  {"Executor": "VM"})


def test_each_call_keeps_its_fastest_time():
    a = run([("conv", 10.0), ("relu", 9.0)], 25.0)      # relu hit by a time slice
    b = run([("conv", 14.0), ("relu", 1.0)], 20.0)      # conv hit
    c = run([("conv", 12.0), ("relu", 2.0)], 16.0)      # the quickest run overall
    r = Report.fastest_of([a, b, c])
    assert [x["Duration (us)"].value for x in r.calls] == [10.0, 1.0]
    assert [x["Percent"].value for x in r.calls] == pytest.approx([62.5, 6.25])  # of 16 us
    assert r.device_metrics == c.device_metrics
    assert r.configuration == {"Executor": "VM", "Runs": Count(3)}
    assert [x["Layer"] for x in r.calls] == ["layer.conv", "layer.relu"]   # other metrics kept
    assert Report.fastest_of([a]).calls == a.calls
    assert a.calls[1]["Duration (us)"].value == 9.0      # inputs unchanged


def test_runs_of_different_programs_are_refused():
    a = run([("conv", 10.0), ("relu", 9.0)], 25.0)
    with pytest.raises(ValueError, match="has 1 calls, reports\\[0\\] 2"):
        Report.fastest_of([a, run([("conv", 1.0)], 2.0)])
    with pytest.raises(ValueError, match="call 1 is 'relu' in reports\\[0\\] but 'add'"):
        Report.fastest_of([a, run([("conv", 1.0), ("add", 1.0)], 2.0)])
    with pytest.raises(ValueError, match="call 0 is 'conv'"):
        Report.fastest_of([a, run([("conv", 1.0), ("relu", 1.0)], 2.0, shapes="float32[8]")])
    with pytest.raises(TypeError, match="non-empty list of Reports"):
        Report.fastest_of([])
    with pytest.raises(TypeError, match="reports\\[1\\] is a str"):
        Report.fastest_of([a, "b"])

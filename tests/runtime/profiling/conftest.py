"""Reports shared by the profiling tests, built by hand (no profiler involved)."""
import pytest

from workbench.runtime.profiling import Count, Duration, Percent, Ratio, Report

SHAPES_MM = "float32[1, 64], float32[64, 64], float32[1, 64]"


def reference_report() -> Report:
    """The worked example of the reference (section 1.7): matmul, relu, matmul on cpu0."""
    return Report(
        [
            {"Name": "matmul", "Duration (us)": Duration(10.0), "Count": Count(1),
             "Device": "cpu0", "Argument Shapes": SHAPES_MM, "Percent": Percent(40.0)},
            {"Name": "relu", "Duration (us)": Duration(2.5), "Count": Count(1),
             "Device": "cpu0", "Argument Shapes": "float32[1, 64], float32[1, 64]",
             "Percent": Percent(10.0)},
            {"Name": "matmul", "Duration (us)": Duration(8.0), "Count": Count(1),
             "Device": "cpu0", "Argument Shapes": SHAPES_MM, "Percent": Percent(32.0)},
        ],
        {"cpu0": {"Name": "Total", "Duration (us)": Duration(25.0), "Count": Count(1),
                  "Device": "cpu0"}},
        {"Number of threads": Count(8), "Executor": "VM"},
    )


def rich_report() -> Report:
    """Four calls whose call order, duration order and group order all differ, with two extra
    metrics (a Count present on some calls only and a Ratio) to exercise every table rule."""
    def call(name, dur, pct, shapes, **extra):
        row = {"Name": name, "Duration (us)": Duration(dur), "Count": Count(1),
               "Device": "cpu0", "Argument Shapes": shapes, "Percent": Percent(pct)}
        row.update(extra)
        return row

    return Report(
        [
            call("reshape", 1.0, 4.0, "float32[64]"),
            call("matmul", 10.0, 40.0, "float32[1, 64]",
                 **{"Bytes Read": Count(1024), "Hit Rate": Ratio(0.5)}),
            call("relu", 2.5, 10.0, "float32[1, 64]"),
            call("matmul", 8.0, 32.0, "float32[1, 64]",
                 **{"Bytes Read": Count(2048), "Hit Rate": Ratio(0.3)}),
        ],
        {"cpu0": {"Name": "Total", "Duration (us)": Duration(25.0), "Count": Count(1),
                  "Device": "cpu0"}},
        {"Number of threads": Count(8), "Executor": "VM"},
    )


@pytest.fixture
def ref_report() -> Report:
    return reference_report()


@pytest.fixture
def report() -> Report:
    return rich_report()

"""Profiler: scopes, the thread-local stack, and TVM's table layout (with its Total quirk)."""
import threading
import time

import pytest

from workbench.meta_schedule.profiler import Profiler


def test_table_layout_matches_tvm():
    prof = Profiler()
    prof.stats_sec = {"Total": 92.124, "SendToBuilder": 52.722,
                      "EvoSearch/Evolve/Misc/CopyMeasuredWorkloads": 1.5,
                      "MeasureCallback/UpdateCostModel": 14.568}
    expected = (
        "    ID |                                        Name | Time (min) | Percentage \n"
        "-------------------------------------------------------------------------------\n"
        " Total |                                      1.5354 |   100.0000 |            \n"
        "     1 |                               SendToBuilder |     0.8787 |    57.2294 \n"
        "     2 |             MeasureCallback/UpdateCostModel |     0.2428 |    15.8135 \n"
        "     3 | EvoSearch/Evolve/Misc/CopyMeasuredWorkloads |     0.0250 |     1.6282 \n"
        "-------------------------------------------------------------------------------\n")
    assert prof.table() == expected


def test_scopes_accumulate_and_total_is_recorded():
    with Profiler() as prof:
        assert Profiler.current() is prof
        for _ in range(2):
            with Profiler.timeit("Step"):
                time.sleep(0.01)
        with pytest.raises(ValueError, match="total time"):
            prof.table()  # inside the scope: no Total yet
    stats = prof.get()
    assert set(stats) == {"Step", "Total"}
    assert 0.02 <= stats["Step"] <= stats["Total"]
    assert Profiler.current() is None
    assert prof.table().splitlines()[2].startswith(" Total |")
    with pytest.raises(ValueError, match="empty"):
        Profiler().table()


def test_timeit_without_profiler_is_a_no_op_and_stacks_are_per_thread():
    with Profiler.timeit("nothing"):
        pass
    with Profiler() as outer:
        with Profiler() as inner:
            with Profiler.timeit("A"):
                pass
            seen = []
            t = threading.Thread(target=lambda: seen.append(Profiler.current()))
            t.start()
            t.join()
            assert seen == [None]
        assert Profiler.current() is outer
    assert "A" in inner.get() and "A" not in outer.get()

"""workbench.s_tir: TVM's later names for the schedule, the tuner and dlight are the very
Workbench modules (one module object, so classes and registries are shared)."""
import importlib
import sys

import pytest

import workbench


def test_s_tir_submodules_are_the_workbench_modules():
    from workbench.s_tir.meta_schedule.relax_integration import extract_tasks
    from workbench.meta_schedule import relax_integration
    assert extract_tasks is relax_integration.extract_tasks
    assert sys.modules["workbench.s_tir.meta_schedule.relax_integration"] is relax_integration
    import workbench.s_tir as s_tir
    import workbench.meta_schedule as ms
    assert s_tir.meta_schedule is ms
    assert s_tir.schedule is importlib.import_module("workbench.tir.schedule")
    assert s_tir.dlight is workbench.dlight
    assert s_tir.Schedule is workbench.tir.Schedule and s_tir.Trace is workbench.tir.Trace
    assert s_tir.TensorIntrin is workbench.tir.TensorIntrin


def test_s_tir_schedule_works_through_the_alias():
    from workbench import te
    from workbench.s_tir import Schedule
    A = te.placeholder((16,), name="A")
    B = te.compute((16,), lambda i: A[i] + 1.0, name="B")
    sch = Schedule(te.create_prim_func([A, B]))
    (i,) = sch.get_loops(sch.get_block("B"))
    sch.split(i, factors=[None, 4])
    assert len(sch.get_loops(sch.get_block("B"))) == 2


def test_s_tir_unknown_names_fail():
    with pytest.raises(ImportError):
        importlib.import_module("workbench.s_tir.not_a_package")
    import workbench.s_tir as s_tir
    with pytest.raises(AttributeError):
        _ = s_tir.not_a_name

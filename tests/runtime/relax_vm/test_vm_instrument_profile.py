"""set_instrument (event order, arguments, SKIP_RUN), time_evaluator call counts for the three
documented usage patterns, and profile() reports."""
import csv
import io
import json
from collections import Counter

import numpy as np
import pytest

import workbench as wb
from workbench.runtime import register_func, remove_global_func
from workbench.runtime.profiling import Report
from workbench.runtime.relax_vm import (ExecBuilder, VirtualMachine, VMClosure,
                                        VMInstrumentReturnKind)
from vm_programs import mlp_inputs, mlp_program


def nd(x):
    return wb.nd.array(x)


@pytest.fixture
def mlp(mlp_lib):
    x, w1, w2, bias = mlp_inputs()
    return mlp_program(mlp_lib, bias), (nd(x), nd(w1), nd(w2))


# -- instrument ------------------------------------------------------------------------------------

def test_instrument_counts_and_skip_run(mlp):
    exe, args = mlp
    vm = VirtualMachine(exe, wb.cpu())
    counts = Counter()
    rets = []

    def instrument(func, func_symbol, before_run, ret_value, *call_args):
        assert callable(func)
        counts[(func_symbol, before_run)] += 1
        if before_run:
            rets.append(ret_value)
        if func_symbol == "matmul":
            return VMInstrumentReturnKind.SKIP_RUN
        return VMInstrumentReturnKind.NO_OP

    vm.set_instrument(instrument)
    vm["main"](*args)
    assert counts[("matmul", True)] == 2 and counts[("matmul", False)] == 0
    assert counts[("relu", True)] == 2 and counts[("relu", False)] == 2
    assert counts[("vm.builtin.alloc_tensor", True)] == 5
    assert counts[("vm.builtin.check_tensor_info", False)] == 3
    assert all(r is None for r in rets)


def test_instrument_sees_arguments_and_results(mlp):
    exe, args = mlp
    vm = VirtualMachine(exe, wb.cpu())
    events = []
    vm.set_instrument(lambda f, name, before, ret, *a: events.append((name, before, ret, a)))
    out = vm["main"](*args)
    first = events[0]
    assert first[:3] == ("vm.builtin.check_tensor_info", True, None)
    assert first[3][0] is args[0] and first[3][1] == 2 and first[3][2] == "float32"
    assert "param=x" in first[3][3]
    alloc = next(e for e in events if e[0] == "vm.builtin.alloc_storage" and e[1])
    assert alloc[3][0] is vm                          # the %vm context
    assert tuple(alloc[3][1]) == (256,) and alloc[3][3] == "uint8"
    last_relu_after = [e for e in events if e[0] == "relu" and not e[1]][-1]
    assert last_relu_after[3][1] is out and last_relu_after[2] is None  # DPS: returns None


def test_instrument_nested_calls_and_skip_result():
    ib = ExecBuilder()
    with ib.function("inner", num_inputs=1):
        ib.emit_call("test.vm.add_scalar", args=[ib.r(0), ib.imm(1)], dst=ib.r(1))
        ib.emit_ret(ib.r(1))
    with ib.function("main", num_inputs=1):
        ib.emit_call("inner", args=[ib.r(0)], dst=ib.r(1))
        ib.emit_call("test.vm.add_scalar", args=[ib.r(1), ib.imm(10)], dst=ib.r(2))
        ib.emit_ret(ib.r(2))
    vm = VirtualMachine(ib.get(), wb.cpu())
    events = []

    def instrument(func, name, before, ret, *args):
        events.append((name, before, ret, args))
        if name == "inner":
            assert isinstance(func, VMClosure)

    vm.set_instrument(instrument)
    assert vm["main"](1) == 12
    assert events == [("inner", True, None, (1,)),
                      ("test.vm.add_scalar", True, None, (1, 1)),
                      ("test.vm.add_scalar", False, 2, (1, 1)),
                      ("inner", False, 2, (1,)),
                      ("test.vm.add_scalar", True, None, (2, 10)),
                      ("test.vm.add_scalar", False, 12, (2, 10))]
    vm.set_instrument(lambda f, name, before, ret, *a: 1 if name == "test.vm.add_scalar" and
                      a[1] == 10 else None)
    assert vm["main"](1) is None   # the skipped call's destination holds None
    vm.set_instrument(None)
    assert vm["main"](1) == 12


# -- time_evaluator --------------------------------------------------------------------------------

@pytest.fixture
def counting_vm():
    calls = []
    register_func("test.vm_time.count", lambda x: calls.append(x) or x, override=True)
    ib = ExecBuilder()
    with ib.function("main", num_inputs=1, param_names=["x"]):
        ib.emit_call("test.vm_time.count", args=[ib.r(0)], dst=ib.r(1))
        ib.emit_ret(ib.r(1))
    yield VirtualMachine(ib.get(), wb.cpu()), calls
    remove_global_func("test.vm_time.count")


def test_time_evaluator_direct(counting_vm):
    vm, calls = counting_vm
    res = vm.time_evaluator("main", wb.cpu(), number=3, repeat=2)(nd(np.zeros(2)))
    assert len(calls) == 1 + 3 * 2 and len(res.results) == 2


def test_time_evaluator_stateful(counting_vm):
    vm, calls = counting_vm
    vm.set_input("main", nd(np.zeros(2)))
    res = vm.time_evaluator("invoke_stateful", wb.cpu(), number=2, repeat=3)("main")
    assert len(calls) == 1 + 2 * 3 and len(res.results) == 3


def test_time_evaluator_saved_function(counting_vm):
    vm, calls = counting_vm
    vm.save_function("main", "saved_main", nd(np.zeros(2)), include_return=False)
    res = vm.time_evaluator("saved_main", wb.cpu())()
    assert len(calls) == 1 + 10 and res.mean > 0


def test_time_evaluator_preproc_and_unknown(counting_vm):
    vm, calls = counting_vm
    pre = []
    register_func("test.vm_time.pre", lambda *a: pre.append(a), override=True)
    try:
        vm.time_evaluator("main", wb.cpu(), number=1, repeat=4, f_preproc="test.vm_time.pre")(
            nd(np.zeros(2)))
        assert len(pre) == 4 and len(calls) == 5
    finally:
        remove_global_func("test.vm_time.pre")
    with pytest.raises(AttributeError, match="nope"):
        vm.time_evaluator("nope", wb.cpu())


# -- profile ---------------------------------------------------------------------------------------

def test_profile_requires_flag(mlp):
    exe, args = mlp
    vm = VirtualMachine(exe, wb.cpu())
    with pytest.raises(AttributeError, match="profile"):
        vm.profile("main", *args)
    with pytest.raises(AttributeError):
        vm["profile"]


def test_profile_report_rows(mlp):
    exe, args = mlp
    vm = VirtualMachine(exe, wb.cpu(), profile=True)
    report = vm.profile("main", *args)
    assert isinstance(report, Report)
    names = Counter(c["Name"] for c in report.calls)
    # only calls with tensor arguments are recorded (not alloc_storage / alloc_tensor)
    assert names == {"matmul": 2, "relu": 2, "add_bias": 1, "vm.builtin.check_tensor_info": 3,
                     "vm.builtin.match_shape": 3}
    for call in report.calls:
        assert call["Duration (us)"].microseconds > 0 and call["Count"].value == 1
        assert call["Device"] == "cpu0"
        assert call["Percent"].percent > 0
    matmuls = [c for c in report.calls if c["Name"] == "matmul"]
    assert matmuls[0]["Argument Shapes"] == "float32[4, 16], float32[16, 16], float32[4, 16]"
    bias = next(c for c in report.calls if c["Name"] == "add_bias")
    assert bias["Argument Shapes"] == "float32[4, 16], float32[16], float32[4, 16]"
    assert [c["Name"] for c in report.calls][:2] == ["vm.builtin.check_tensor_info",
                                                     "vm.builtin.match_shape"]
    assert report.configuration["Executor"] == "VM"
    assert "Number of threads" in report.configuration
    assert list(report.device_metrics) == ["cpu0"]
    text = str(report)
    assert "matmul" in text and "Total" in text and "Duration" in text
    doc = json.loads(report.json())
    assert set(doc) >= {"calls", "device_metrics", "configuration"}
    rows = list(csv.DictReader(io.StringIO(report.csv())))
    assert {r["Name"] for r in rows} >= {"matmul", "relu"}


def test_profile_nested_calls_and_tuples():
    ib = ExecBuilder()
    with ib.function("inner", num_inputs=1):
        ib.emit_call("test.vm.add", args=[ib.r(0), ib.r(0)], dst=ib.r(1))
        ib.emit_ret(ib.r(1))
    with ib.function("main", num_inputs=1):
        ib.emit_call("inner", args=[ib.r(0)], dst=ib.r(1))
        ib.emit_call("vm.builtin.make_tuple", args=[ib.r(1), ib.r(0)], dst=ib.r(2))
        ib.emit_ret(ib.r(2))
    vm = VirtualMachine(ib.get(), wb.cpu(), profile=True)
    report = vm.profile("main", np.ones(3, "float32"))  # numpy input is converted
    # the inner call finishes (and is listed) before its enclosing call
    assert [c["Name"] for c in report.calls] == ["test.vm.add", "inner",
                                                 "vm.builtin.make_tuple"]
    assert report.calls[2]["Argument Shapes"] == "float32[3], float32[3]"


def test_profile_with_set_input(mlp):
    exe, args = mlp
    vm = VirtualMachine(exe, wb.cpu(), profile=True)
    vm.set_input("main", *args)
    report = vm.profile("main")
    assert sum(c["Name"] == "matmul" for c in report.calls) == 2
    with pytest.raises(ValueError, match="already provided by set_input"):
        vm.profile("main", *args)
    vm2 = VirtualMachine(exe, wb.cpu(), profile=True)
    with pytest.raises(ValueError, match="No input is provided"):
        vm2.profile("main")
    with pytest.raises(ValueError, match="Unknown function"):
        vm2.profile("nope", *args)
    # profiling leaves the VM in its fast mode
    assert vm2._interp.hooks.active[0] is False

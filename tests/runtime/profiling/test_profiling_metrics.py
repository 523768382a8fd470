"""Metric value types, DeviceWrapper and Report construction checks."""
import pickle
from dataclasses import dataclass

import pytest

from workbench.runtime.profiling import Count, DeviceWrapper, Duration, Percent, Ratio, Report


@dataclass(frozen=True)
class FakeDevice:
    device_type: int
    device_id: int

    def __str__(self):
        return f"{'cpu' if self.device_type == 1 else 'cuda'}({self.device_id})"


def test_value_access():
    assert Count(3).value == 3 and int(Count(3)) == 3
    assert Duration(12.5).microseconds == 12.5 and Duration(12.5).value == 12.5
    assert Percent(10).percent == 10.0 and type(Percent(10).percent) is float
    assert Ratio(0.5).ratio == 0.5 and float(Ratio(0.5)) == 0.5


def test_equality_hash_and_ordering():
    assert Duration(1.0) == Duration(1) and hash(Duration(1.0)) == hash(Duration(1))
    assert Duration(1.0) != Percent(1.0) and Count(1) != 1
    assert Count(1) < Count(2) and Duration(3.0) >= Duration(2.0)
    assert sorted([Ratio(2.0), Ratio(0.5)]) == [Ratio(0.5), Ratio(2.0)]
    with pytest.raises(TypeError):
        _ = Duration(1.0) < Count(2)
    assert len({Count(1), Count(1), Duration(1.0)}) == 2


def test_repr_and_pickle():
    assert repr(Count(5)) == "Count(5)"
    assert repr(Duration(12.5)) == "Duration(12.5)"
    assert repr(Percent(40.0)) == "Percent(40.0)"
    assert repr(Ratio(0.25)) == "Ratio(0.25)"
    assert pickle.loads(pickle.dumps(Duration(2.5))) == Duration(2.5)


def test_immutable():
    with pytest.raises(AttributeError):
        Count(1).value = 2
    with pytest.raises(AttributeError):
        Duration(1.0)._value = 2.0


@pytest.mark.parametrize("make,arg,error,message", [
    (Count, 1.5, TypeError, "Count() takes an integer, got float"),
    (Count, True, TypeError, "got bool"),
    (Count, 2**63, ValueError, "int64"),
    (Duration, "1", TypeError, "Duration() takes a real number, got str"),
    (Duration, float("nan"), ValueError, "must be finite"),
    (Percent, float("inf"), ValueError, "must be finite"),
    (Ratio, None, TypeError, "Ratio() takes a real number"),
])
def test_bad_payloads(make, arg, error, message):
    with pytest.raises(error) as info:
        make(arg)
    assert message in str(info.value)


def test_numpy_scalars_accepted():
    np = pytest.importorskip("numpy")
    assert Count(np.int64(7)) == Count(7) and type(Count(np.int64(7)).value) is int
    assert Duration(np.float32(0.5)) == Duration(0.5)


def test_device_wrapper():
    a, b = DeviceWrapper(FakeDevice(1, 0)), DeviceWrapper(FakeDevice(1, 0))
    assert a == b and hash(a) == hash(b) and {a: 1}[b] == 1
    assert a != DeviceWrapper(FakeDevice(2, 0))
    assert a.name == "cpu0" and DeviceWrapper(FakeDevice(2, 3)).name == "cuda3"
    assert (a.device_type, a.device_id) == (1, 0)
    assert repr(a) == "DeviceWrapper(cpu(0))"
    with pytest.raises(TypeError, match="device_type"):
        DeviceWrapper("cpu")


def test_report_attributes_and_device_keys():
    r = Report([{"Name": "k", "Duration (us)": Duration(1.0)}],
               {FakeDevice(1, 0): {"Duration (us)": Duration(2.0)}},
               {"Executor": "VM"})
    assert r.calls == [{"Name": "k", "Duration (us)": Duration(1.0)}]
    assert list(r.device_metrics) == ["cpu0"]
    assert r.configuration == {"Executor": "VM"}
    assert repr(r) == "<Report: 1 calls on cpu0>"


@pytest.mark.parametrize("args,message", [
    (([{"a": 1.0}], {}, {}), "calls[0]['a']: a metric value must be Count, Duration"),
    (({"a": Count(1)}, {}, {}), "calls must be a list of dicts"),
    (([{"a": Count(1)}, {"a": Ratio(1.0)}], {}, {}), "calls[1]['a'] is Ratio but calls[0]['a'] is Count"),
    (([], {"cpu0": {"x": None}}, {}), "device_metrics['cpu0']['x']"),
    (([], {3: {}}, {}), "device_metrics keys must be device names"),
    (([], {}, {"n": 8}), "configuration['n']"),
    (([{1: Count(1)}], {}, {}), "non-string metric name 1"),
])
def test_report_rejects_bad_input(args, message):
    with pytest.raises(TypeError) as info:
        Report(*args)
    assert message in str(info.value)

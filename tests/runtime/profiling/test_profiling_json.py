"""Report.from_json: exact round trips for every metric type, and malformed inputs."""
import json

import pytest

from workbench.runtime.profiling import Count, Duration, Percent, Ratio, Report


def every_kind_report() -> Report:
    # Values chosen to break naive float printing: 0.1, tiny, huge, negative zero.
    return Report(
        [
            {"Name": 'k"1\\\n ü', "Duration (us)": Duration(0.1), "Count": Count(1),
             "Percent": Percent(33.333333333333336), "IPC": Ratio(1e-20), "Big": Count(2**63 - 1)},
            {"Name": "k2", "Duration (us)": Duration(1e300), "Count": Count(-5),
             "Percent": Percent(-0.0), "IPC": Ratio(2.5)},
        ],
        {"cpu0": {"Name": "Total", "Duration (us)": Duration(12.0), "Ratio": Ratio(0.5),
                  "Percent": Percent(100.0), "Count": Count(1)},
         "cpu1": {"Name": "Total", "Duration (us)": Duration(3.0)}},
        {"Number of threads": Count(4), "Executor": "VM", "Load": Percent(7.5),
         "Scale": Ratio(3.0), "Warm-up": Duration(0.0)},
    )


def test_round_trip_every_metric_type():
    r = every_kind_report()
    back = Report.from_json(r.json())
    assert back == r
    assert back.json() == r.json()
    for original, parsed in zip(r.calls, back.calls):
        assert [type(v) for v in original.values()] == [type(v) for v in parsed.values()]
        assert list(original) == list(parsed)  # key order kept
    assert list(back.device_metrics) == ["cpu0", "cpu1"]
    assert back.configuration["Warm-up"] == Duration(0.0)
    assert type(back.configuration["Warm-up"].value) is float
    assert back.calls[0]["IPC"].value == 1e-20  # TVM's 17 fixed decimals would print 0
    assert back.table(aggregate=False, col_sums=False) == r.table(aggregate=False, col_sums=False)
    assert back.csv() == r.csv()


def test_round_trip_parses_as_plain_json_with_tvm_value_types():
    doc = json.loads(every_kind_report().json())
    assert list(doc) == ["calls", "device_metrics", "configuration"]
    for call in doc["calls"]:
        assert isinstance(call["Name"]["string"], str)
        assert isinstance(call["Count"]["count"], int)
        assert isinstance(call["Duration (us)"]["microseconds"], float)
        assert all(len(v) == 1 for v in call.values())


def test_missing_parts_are_empty():
    r = Report.from_json("{}")
    assert (r.calls, r.device_metrics, r.configuration) == ([], {}, {})
    assert Report.from_json(b'{"calls": [{"n": {"count": 2}}]}').calls == [{"n": Count(2)}]


MALFORMED = [
    # (input, text the error must contain: where and what)
    ("not json", "not valid JSON at line 1 column 1"),
    ('{"calls": [', "not valid JSON at line 1 column 12"),
    ("[]", "at top level: expected an object, got list"),
    ('{"calls": [], "call": []}', "unknown key(s) ['call']"),
    ('{"calls": {}}', "at calls: expected an array"),
    ('{"calls": [1]}', "at calls[0]: expected an object of metrics, got int"),
    ('{"calls": [{"Name": "matmul"}]}', "at calls[0]['Name']: a metric value must be an object"),
    ('{"calls": [{"Count": {}}]}', "at calls[0]['Count']: a metric value must have exactly one key, got 0"),
    ('{"calls": [{"Count": {"count": 1, "ratio": 0.5}}]}', "exactly one key, got 2: ['count', 'ratio']"),
    ('{"calls": [{"X": {"bytes": 3}}]}', "at calls[0]['X']: cannot parse metric of type 'bytes'"),
    ('{"calls": [{"Count": {"count": 1.5}}]}', "at calls[0]['Count']['count']: a count needs a JSON integer, got float"),
    ('{"calls": [{"Count": {"count": true}}]}', "at calls[0]['Count']['count']: a count needs a JSON integer, got bool"),
    ('{"calls": [{"C": {"count": 9223372036854775808}}]}', "at calls[0]['C']['count']: Count() must fit in int64"),
    ('{"calls": [{"D": {"microseconds": "12"}}]}', "at calls[0]['D']['microseconds']: a Duration needs a JSON number, got str"),
    ('{"calls": [{"D": {"microseconds": NaN}}]}', "NaN is not valid JSON"),
    ('{"configuration": {"x": {"percent": 1e999}}}', "at configuration['x']['percent']: Percent() must be finite"),
    ('{"calls": [{"N": {"string": 5}}]}', "at calls[0]['N']['string']: a string metric needs a JSON string"),
    ('{"calls": [{"A": {"count": 1}, "A": {"count": 2}}]}', "duplicate key 'A'"),
    ('{"device_metrics": []}', "at device_metrics: expected an object keyed by device, got list"),
    ('{"device_metrics": {"cpu0": 3}}', "at device_metrics['cpu0']: expected an object of metrics"),
    ('{"configuration": []}', "at configuration: expected an object of metrics, got list"),
    ('{"calls": [{"A": {"count": 1}}, {"A": {"ratio": 0.5}}]}', "calls[1]['A'] is Ratio but calls[0]['A'] is Count"),
    (b'\xff\xfe{', "Report.from_json"),
]


@pytest.mark.parametrize("bad,message", MALFORMED, ids=[m for _, m in MALFORMED])
def test_malformed_input_says_where(bad, message):
    with pytest.raises(ValueError) as info:
        Report.from_json(bad)
    assert message in str(info.value)
    assert str(info.value).startswith("Report.from_json")


def test_from_json_needs_text():
    with pytest.raises(TypeError, match="takes a str"):
        Report.from_json({"calls": []})

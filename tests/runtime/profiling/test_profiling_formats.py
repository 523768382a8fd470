"""json(), csv() and table() checked against text written by hand from TVM's rules.

In the expected tables "··" stands for the two spaces TVM prints after the last cell of a line.
"""
import pytest

from workbench.runtime.profiling import Count, Duration, Percent, Ratio, Report


def text(s: str) -> str:
    return s.replace("·", " ")


CONFIG_BLOCK = "\nConfiguration\n-------------\nNumber of threads: 8\nExecutor: VM\n"


def test_reference_worked_example(ref_report):
    # Reference section 1.7, verbatim.
    expected = text("""\
Name        Duration (us)  Percent  Device  Count                                  Argument Shapes··
matmul              18.00    72.00    cpu0      2  float32[1, 64], float32[64, 64], float32[1, 64]··
relu                 2.50    10.00    cpu0      1                   float32[1, 64], float32[1, 64]··
----------                                                                                        ··
Sum                 20.50    82.00              3                                                 ··
Total               25.00             cpu0      1                                                 ··
""") + CONFIG_BLOCK
    assert ref_report.table() == expected
    assert str(ref_report) == expected


# Header and rows of the rich report; "10" / "7" is the Name column's width (with or without
# the ten-dash separator row).
HDR10 = "Name        Duration (us)  Percent  Device  Count  Argument Shapes  Bytes Read  Hit Rate··"
HDR7 = "Name     Duration (us)  Percent  Device  Count  Argument Shapes  Bytes Read  Hit Rate··"
MMAGG10 = "matmul              18.00    72.00    cpu0      2   float32[1, 64]        3072       0.4··"
MMAGG7 = "matmul           18.00    72.00    cpu0      2   float32[1, 64]        3072       0.4··"
MM10_10 = "matmul              10.00    40.00    cpu0      1   float32[1, 64]        1024       0.5··"
MM10_7 = "matmul           10.00    40.00    cpu0      1   float32[1, 64]        1024       0.5··"
MM8_10 = "matmul               8.00    32.00    cpu0      1   float32[1, 64]        2048       0.3··"
MM8_7 = "matmul            8.00    32.00    cpu0      1   float32[1, 64]        2048       0.3··"
RELU10 = "relu                 2.50    10.00    cpu0      1   float32[1, 64]                      ··"
RELU7 = "relu              2.50    10.00    cpu0      1   float32[1, 64]                      ··"
RESHAPE10 = "reshape              1.00     4.00    cpu0      1      float32[64]                      ··"
RESHAPE7 = "reshape           1.00     4.00    cpu0      1      float32[64]                      ··"
SEP = "----------                                                                              ··"
SUM = "Sum                 21.50    86.00              4                         3072          ··"
TOTAL10 = "Total               25.00             cpu0      1                                       ··"
TOTAL7 = "Total            25.00             cpu0      1                                       ··"

TABLES = {
    # (sort, aggregate, col_sums): lines
    (True, True, True): [HDR10, MMAGG10, RELU10, RESHAPE10, SEP, SUM, TOTAL10],
    (True, True, False): [HDR7, MMAGG7, RELU7, RESHAPE7, TOTAL7],
    (False, True, True): [HDR10, RESHAPE10, MMAGG10, RELU10, SEP, SUM, TOTAL10],
    (False, True, False): [HDR7, RESHAPE7, MMAGG7, RELU7, TOTAL7],
    (True, False, True): [HDR10, MM10_10, MM8_10, RELU10, RESHAPE10, SEP, SUM, TOTAL10],
    (True, False, False): [HDR7, MM10_7, MM8_7, RELU7, RESHAPE7, TOTAL7],
    (False, False, True): [HDR10, RESHAPE10, MM10_10, RELU10, MM8_10, SEP, SUM, TOTAL10],
    (False, False, False): [HDR7, RESHAPE7, MM10_7, RELU7, MM8_7, TOTAL7],
}


@pytest.mark.parametrize("sort,aggregate,col_sums", sorted(TABLES))
def test_table_every_combination(report, sort, aggregate, col_sums):
    expected = text("".join(line + "\n" for line in TABLES[sort, aggregate, col_sums]))
    got = report.table(sort=sort, aggregate=aggregate, col_sums=col_sums)
    assert got == expected + CONFIG_BLOCK


def test_table_groups_by_hash_shapes_and_device():
    def call(name, dur, shapes, dev, **extra):
        return {"Name": name, "Duration (us)": Duration(dur), "Count": Count(1),
                "Device": dev, "Argument Shapes": shapes, **extra}

    r = Report([
        call("add", 3.0, "int8[2]", "cpu0"),
        call("add", 2.0, "int8[4]", "cpu0"),            # other shapes: own row
        call("add", 1.0, "int8[2]", "cpu1"),            # other device: own row
        call("f1", 4.0, "", "cpu0", Hash="h"),         # same Hash, different names: one row
        call("f2", 5.0, "", "cpu0", Hash="h"),         # whose Name becomes ""
    ], {}, {})
    expected = text("""\
Name  Duration (us)  Percent  Device  Count  Argument Shapes  Hash··
               9.00             cpu0      2                      h··
add            3.00             cpu0      1          int8[2]      ··
add            2.00             cpu0      1          int8[4]      ··
add            1.00             cpu1      1          int8[2]      ··
""") + "\nConfiguration\n-------------\n"
    assert r.table(col_sums=False) == expected


def test_table_cell_formats():
    # Duration/Percent: two decimals; Ratio: %.2g; Count: plain integer (C locale).
    r = Report([{"Name": "k", "Duration (us)": Duration(1376783.0), "Percent": Percent(99.999),
                 "Count": Count(1234567), "R": Ratio(123.0)}], {}, {"ratio": Ratio(0.000123)})
    expected = text("""\
Name  Duration (us)  Percent  Device    Count  Argument Shapes        R··
k        1376783.00   100.00          1234567                   1.2e+02··
""") + "\nConfiguration\n-------------\nratio: 0.00012\n"
    assert r.table(col_sums=False) == expected


def test_table_without_duration_cannot_sort():
    r = Report([{"Name": "k", "Count": Count(1)}], {}, {})
    with pytest.raises(ValueError, match=r"row 0 \('k'\) has no Duration"):
        r.table()
    assert r.table(sort=False, col_sums=False).startswith("Name  Duration (us)")


def test_table_rejects_non_bool_flags(report):
    with pytest.raises(TypeError, match="sort must be a bool"):
        report.table(sort="yes")


def test_json_exact_layout(ref_report):
    expected = (
        '{"calls":['
        '{"Name":{"string":"matmul"},"Duration (us)":{"microseconds":10.0},"Count":{"count":1},'
        '"Device":{"string":"cpu0"},"Argument Shapes":{"string":"float32[1, 64], float32[64, 64], '
        'float32[1, 64]"},"Percent":{"percent":40.0}},'
        '{"Name":{"string":"relu"},"Duration (us)":{"microseconds":2.5},"Count":{"count":1},'
        '"Device":{"string":"cpu0"},"Argument Shapes":{"string":"float32[1, 64], float32[1, 64]"},'
        '"Percent":{"percent":10.0}},'
        '{"Name":{"string":"matmul"},"Duration (us)":{"microseconds":8.0},"Count":{"count":1},'
        '"Device":{"string":"cpu0"},"Argument Shapes":{"string":"float32[1, 64], float32[64, 64], '
        'float32[1, 64]"},"Percent":{"percent":32.0}}],'
        '"device_metrics":{"cpu0":{"Name":{"string":"Total"},"Duration (us)":{"microseconds":25.0},'
        '"Count":{"count":1},"Device":{"string":"cpu0"}}},'
        '"configuration":{"Number of threads":{"count":8},"Executor":{"string":"VM"}}}'
    )
    assert ref_report.json() == expected


def test_json_ratio_empty_parts_and_escaping():
    r = Report([{"q": 'say "hi"\\ ü', "r": Ratio(0.25)}], {}, {})
    assert r.json() == ('{"calls":[{"q":{"string":"say \\"hi\\"\\\\ ü"},"r":{"ratio":0.25}}],'
                        '"device_metrics":{},"configuration":{}}')
    assert Report([], {}, {}).json() == '{"calls":[],"device_metrics":{},"configuration":{}}'


def test_json_reads_tvm_output():
    # TVM writes 17 fixed decimals and raw strings (reference section 1.4 example).
    tvm = ('{"calls":[{"Name":{"string":"matmul"},"Duration (us)":{"microseconds":10.00000000000000000},'
           '"Count":{"count":1},"Device":{"string":"cpu0"},"Argument Shapes":{"string":"float32[1, 64], '
           'float32[64, 64], float32[1, 64]"},"Percent":{"percent":40.00000000000000000}}],'
           '"device_metrics":{"cpu0":{"Name":{"string":"Total"},"Duration (us)":{"microseconds":'
           '25.00000000000000000},"Count":{"count":1},"Device":{"string":"cpu0"}}},'
           '"configuration":{"Number of threads":{"count":8},"Executor":{"string":"VM"}}}')
    r = Report.from_json(tvm)
    assert r.calls[0]["Duration (us)"] == Duration(10.0)
    assert type(r.calls[0]["Count"].value) is int
    assert type(r.device_metrics["cpu0"]["Duration (us)"].value) is float
    assert r.configuration == {"Number of threads": Count(8), "Executor": "VM"}


def test_csv_exact(report):
    expected = (
        "Argument Shapes,Bytes Read,Count,Device,Duration (us),Hit Rate,Name,Percent\n"
        '"float32[64]",,1,"cpu0",1,,"reshape",4\n'
        '"float32[1, 64]",1024,1,"cpu0",10,0.5,"matmul",40\n'
        '"float32[1, 64]",,1,"cpu0",2.5,,"relu",10\n'
        '"float32[1, 64]",2048,1,"cpu0",8,0.3,"matmul",32\n'
    )
    assert report.csv() == expected


def test_csv_number_format_is_percent_g():
    r = Report([{"a": Duration(1234567.0), "b": Duration(12.3456789), "c": Percent(0.0001),
                 "d": Ratio(1e-05), "e": Count(-3), "f": 'x"y'}], {}, {})
    assert r.csv() == 'a,b,c,d,e,f\n1.23457e+06,12.3457,0.0001,1e-05,-3,"x""y"\n'


def test_csv_empty_report():
    assert Report([], {}, {}).csv() == "\n"

"""workbench/runtime/peak_loops.py and bench_peak's bookkeeping: every peak loop the host can run
compiles and runs on one and two threads (AMX after the OS permission), and each row is
compared with the right peak. No timing is asserted."""
from __future__ import annotations

import os
import sys

import pytest

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "benchmarks"))

import bench_peak  # noqa: E402

from workbench.runtime import peak_loops  # noqa: E402
from workbench.target import Target  # noqa: E402

HOST = Target("llvm")


@pytest.mark.parametrize("kind", sorted(peak_loops.PEAK_KINDS) +
                         sorted(peak_loops.NARROW_FP32_KINDS))
def test_peak_loop_runs_where_the_cpu_has_the_instruction(kind):
    why = peak_loops.available(kind, HOST)
    if why is not None:
        assert "lacks" in why or "cannot enable" in why
        pytest.skip(why)
    peak = peak_loops.measure(kind, 2, budget=0.01, min_rounds=2)
    assert peak.cores == 2 and peak.per_core > 0 and peak.all_cores > 0


def test_measure_alone_runs_or_says_why_in_a_fresh_process():
    """A user's script that calls measure() without available() first: every loop either
    runs (AMX after the OS's permission, asked by measure itself) or raises a RuntimeError
    naming why -- never a SIGILL that kills the interpreter."""
    import subprocess
    code = ("from workbench.runtime import peak_loops as p\n"
            "for k in sorted(p.PEAK_KINDS):\n"
            "    try:\n"
            "        print(k, 'ok', p.measure(k, 1, budget=0.01, min_rounds=1).per_core > 0)\n"
            "    except RuntimeError as e:\n"
            "        print(k, 'refused', e)\n")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          timeout=300)
    assert done.returncode == 0, done.stderr[-2000:]
    lines = dict(line.split(" ", 1) for line in done.stdout.splitlines())
    assert sorted(lines) == sorted(peak_loops.PEAK_KINDS)
    for kind, said in lines.items():
        if peak_loops.available(kind, HOST) is None:
            assert said == "ok True", (kind, said)
        else:
            assert said.startswith("refused") and ("lacks" in said or "cannot enable" in said)
    with pytest.raises(ValueError, match="unknown peak kind"):
        peak_loops.measure("fp64", 1)


def test_the_widest_fp32_loop_the_target_has_is_chosen():
    assert peak_loops.fp32_kind(Target("llvm -mcpu=skylake-avx512")) == "fp32"
    assert peak_loops.fp32_kind(Target("llvm -mcpu=haswell")) == "fp32-avx2"
    assert peak_loops.fp32_kind(Target("llvm -mattr=+sse2")) is None
    with pytest.raises(ValueError, match="unknown peak kind 'fp64'"):
        peak_loops.available("fp64", HOST)


def test_a_cpu_without_the_feature_is_reported():
    why = peak_loops.available("amx-int8", Target("llvm -mcpu=cascadelake"))
    assert why is not None and "amx-tile" in why


def test_rows_are_compared_with_the_peak_of_the_instructions_they_use():
    p = peak_loops.Peak(1.0, 2.0, 2)
    peaks = {"fp32": p, "int8": p, "bf16": p,
             "amx-int8": peak_loops.Peak(10.0, 20.0, 2), "amx-bf16": peak_loops.Peak(5.0, 9.0, 2)}
    kind = bench_peak.peak_kind
    assert kind("ours fp32", ["avx512_fp32_mk_4x64x256"], peaks) == "fp32"
    assert kind("ours int8", ["avx512_vnni_mk_4x64x256"], peaks) == "int8"
    assert kind("ours int8", ["amx_int8_mk_32x32x512"], peaks) == "amx-int8"
    assert kind("ours bf16", ["avx512_bf16_mk_4x64x64"], peaks) == "bf16"
    assert kind("torch bf16", [], peaks) == "amx-bf16"        # the CPU's best bf16 peak
    assert kind("numpy fp32", [], peaks) == "fp32"
    assert kind("torch int8 (_int_mm)", [], {"int8": p}) == "int8"
    assert kind("ours bf16", ["amx_bf16_mk_16x32x512"], {"fp32": p}) is None

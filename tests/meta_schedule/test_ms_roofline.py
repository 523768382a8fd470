"""Where to tune next (issue 27): a small Relax model (convolution + ReLU, matmul + ReLU) built
with relax.build and profiled by the VM, each kernel held against a roofline; the FLOPs and
bytes of the matmul kernel checked against hand-computed values, the ranking against its
scores, and tune_relax / select_tasks taking the ranking as op_names."""
from __future__ import annotations

import math
import os
import sys

import numpy as np
import pandas as pd
import pytest

import workbench as wb
from workbench import relax
from workbench.meta_schedule.relax_integration import extract_tasks, select_tasks, tune_relax
from workbench.meta_schedule.roofline import (
    KERNEL_INDEX, argument_bytes, kernel_funcs, roofline, tune_next,
)
from workbench.relax.frontend import nn
from workbench.runtime.machine_limits import MachineLimits
from workbench.runtime.profiling import Report

M, K, N = 64, 256, 32
LIMITS = MachineLimits(peak_gflops=100.0, per_core_gflops=50.0, bandwidth_gbs=10.0, cores=2,
                       cpu="test CPU", kind="fp32", measured_at="2026-01-01T00:00:00Z",
                       key="test")


class ConvAndMatmul(nn.Module):
    def __init__(self) -> None:
        self.conv = nn.Conv2D(4, 8, 3, padding=1)
        self.w = nn.Parameter((K, N))

    def forward(self, x: nn.Tensor, y: nn.Tensor):
        return nn.relu(self.conv(x)), nn.relu(nn.op.matmul(y, self.w))


@pytest.fixture(scope="module")
def model():
    mod, _ = ConvAndMatmul().export_tvm({"forward": {
        "x": nn.spec.Tensor((1, 4, 16, 16), "float32"), "y": nn.spec.Tensor((M, K), "float32")}})
    exe = relax.build(mod, "llvm")
    vm = relax.VirtualMachine(exe, wb.cpu(), profile=True)
    rng = np.random.default_rng(0)
    shapes = [(1, 4, 16, 16), (M, K), (8, 4, 3, 3), (8,), (K, N)]
    args = [wb.nd.array(rng.standard_normal(s).astype("float32")) for s in shapes]
    out = vm["forward"](*args)
    y, w = args[1].numpy(), args[4].numpy()
    np.testing.assert_allclose(out[1].numpy(), np.maximum(y @ w, 0), rtol=1e-4, atol=1e-4)
    return mod, exe, vm.profile("forward", *args)


def _matmul_name(exe) -> str:
    (name,) = [n for n in exe.kernel_names if "matmul" in n]
    return name


def test_matmul_kernel_flops_and_bytes_are_the_hand_counted_ones(model):
    _, exe, report = model
    frame = roofline(report, exe, LIMITS)
    assert frame.index.name == KERNEL_INDEX
    assert set(frame.index) == {n for n in exe.kernel_names
                                if any(c["Name"] == n for c in report.calls)}
    row = frame.loc[_matmul_name(exe)]
    # 2 ops per multiply-add, plus the fused ReLU's max once per output (TVM's estimator).
    assert row["FLOP"] == 2 * M * K * N + M * N
    assert row["Bytes"] == 4 * (M * K + K * N + M * N)      # each argument once
    secs = row["Time (us)"] * 1e-6
    assert row["GFLOPS"] == pytest.approx(row["FLOP"] / secs / 1e9)
    assert row["GB/s"] == pytest.approx(row["Bytes"] / secs / 1e9)
    intensity = row["FLOP"] / row["Bytes"]
    assert row["Intensity"] == pytest.approx(intensity)
    bound = min(LIMITS.peak_gflops, intensity * LIMITS.bandwidth_gbs)   # no cache level known
    assert row["Bound (GFLOPS)"] == pytest.approx(bound)
    assert row["Limit"] == ("compute" if intensity >= LIMITS.ridge_intensity else "memory")
    assert row["% of bound"] == pytest.approx(row["GFLOPS"] / bound * 100)
    assert row["Headroom"] == pytest.approx(bound / row["GFLOPS"])
    assert row["Calls"] == 1
    assert frame.attrs["peak_gflops"] == 100.0 and frame.attrs["limits"]["key"] == "test"


class Depthwise(nn.Module):
    def __init__(self) -> None:
        self.conv = nn.Conv2D(DW_C, DW_C, 3, stride=2, padding=1, groups=DW_C)

    def forward(self, x: nn.Tensor):
        return nn.relu(self.conv(x))


DW_C, DW_H = 32, 24


def test_a_depthwise_convolution_counts_its_multiply_adds_not_its_bounds_checks():
    """The padding of a blocked depthwise convolution is inlined into its kernel as a guarded
    load (``if_then_else(oh * 2 + kh >= 1 and ..., x[...], 0)``); the guard's index math is
    not arithmetic on data. Counted, it made MobileNetV2's depthwise kernels 4-6x their FLOPs
    and put them at 140-220% of the peak, so the ranking never proposed them."""
    mod, _ = Depthwise().export_tvm({"forward": {
        "x": nn.spec.Tensor((1, DW_C, DW_H, DW_H), "float32")}})
    exe = relax.build(mod, "llvm -num-cores=2")
    vm = relax.VirtualMachine(exe, wb.cpu(), profile=True)
    rng = np.random.default_rng(1)
    args = [wb.nd.array(rng.standard_normal(s).astype("float32"))
            for s in [(1, DW_C, DW_H, DW_H), (DW_C, 1, 3, 3), (DW_C,)]]
    frame = roofline(vm.profile("forward", *args), exe, LIMITS)
    outputs = DW_C * (DW_H // 2) ** 2
    # 9 multiply-adds per output, then the bias add and the ReLU's max: whatever the layout
    # pass and the fusion made of it, the kernels hold exactly that arithmetic.
    assert frame["FLOP"].sum() == outputs * (2 * 9 + 2)
    conv = [n for n in frame.index if "conv2d" in n]
    assert conv and frame.loc[conv, "FLOP"].sum() >= outputs * 2 * 9


def test_conditions_choose_and_cost_nothing():
    from workbench import te, tir
    from workbench.meta_schedule.utils import estimate_tir_flops
    a = te.placeholder((16,), name="a")
    # index math in a guard (as inlined padding has), in a select's condition, and on data
    guarded = te.compute((16,), lambda i: tir.if_then_else(i * 2 + 1 < 16, a[i] * 2.0, 0.0))
    chosen = te.compute((16,), lambda i: tir.Select(a[i] * 3.0 > 1.0, a[i] + 1.0, a[i] - 1.0,
                                                    "float32"))
    assert estimate_tir_flops(te.create_prim_func([a, guarded])) == 16      # the product only
    assert estimate_tir_flops(te.create_prim_func([a, chosen])) == 2 * 16   # both branches


def test_a_kernel_whose_data_fits_the_cache_meets_the_cache_roof(model):
    """With the last-level cache measured, a call moving no more than it holds is held
    against the cache's bandwidth (a tuning candidate reruns on warm data); one moving more
    reads what the cache holds at its bandwidth and the rest at memory's."""
    _, exe, report = model
    name = _matmul_name(exe)
    nbytes = 4 * (M * K + K * N + M * N)
    fits = MachineLimits(**dict(LIMITS.to_dict(), cache_bandwidth_gbs=40.0, cache_bytes=nbytes))
    half = MachineLimits(**dict(fits.to_dict(), cache_bytes=nbytes // 2))
    row_in, row_out = roofline(report, exe, fits).loc[name], roofline(report, exe, half).loc[name]
    intensity = row_in["Intensity"]
    assert row_in["Bound (GFLOPS)"] == pytest.approx(min(100.0, intensity * 40.0))
    blend = nbytes / ((nbytes // 2) / 40.0 + (nbytes - nbytes // 2) / 10.0)   # 16 GB/s
    assert row_out["Bound (GFLOPS)"] == pytest.approx(min(100.0, intensity * blend))
    secs = row_in["Time (us)"] * 1e-6
    want = max(row_in["FLOP"] / 100e9, nbytes / 40e9) / secs * 100
    assert row_in["% of bound"] == pytest.approx(want)
    assert row_in["Limit"] == ("compute" if intensity >= 100.0 / 40.0 else "memory")


def test_ranking_is_ordered_by_the_time_tuning_could_save(model):
    _, exe, report = model
    frame = roofline(report, exe, LIMITS)
    fraction = frame["% of bound"] / 100
    np.testing.assert_allclose(frame["Score"], frame["Time (us)"] * (1 - fraction).clip(0))
    assert list(frame["Score"]) == sorted(frame["Score"], reverse=True)
    # A kernel that only moves data (the bias reshape) is held against the bandwidth.
    copy = frame.loc["reshape"]
    assert copy["FLOP"] == 0 and copy["Limit"] == "memory"
    assert copy["% of bound"] == pytest.approx(
        copy["Bytes"] / 10e9 / (copy["Time (us)"] * 1e-6) * 100)
    positive = [n for n in frame.index if frame.loc[n, "Score"] > 0]
    assert list(tune_next(frame, 2)) == positive[:2]
    assert tune_next(frame, 2).name == KERNEL_INDEX


def test_kernels_at_the_roof_or_without_a_score_are_not_proposed(model):
    _, exe, report = model
    frame = roofline(report, exe, LIMITS).copy()
    names = list(frame.index)
    # Scores set by hand: on a fast machine a small kernel beats this test's made-up 100
    # GFLOPS roof and scores 0 by itself (CI saw it).
    frame["Score"] = np.arange(len(names), 0, -1, dtype=float)
    frame.loc[names[0], "Score"] = 0.0           # already at the roof
    frame.loc[names[1], "Score"] = math.nan      # symbolic shapes: FLOPs unknown
    assert list(tune_next(frame, 5)) == names[2:]


def test_bad_inputs_give_clear_errors(model):
    _, exe, report = model
    builtins_only = Report([c for c in report.calls if c["Name"].startswith("vm.")], {}, {})
    with pytest.raises(ValueError, match="calls none of the executable's kernels"):
        roofline(builtins_only, exe, LIMITS)
    with pytest.raises(TypeError, match="report must be a profiling Report"):
        roofline(report.json(), exe, LIMITS)
    with pytest.raises(TypeError, match="limits must be MachineLimits"):
        roofline(report, exe, {"peak_gflops": 1})
    with pytest.raises(ValueError, match="carries no lowered module"):
        roofline(report, object(), LIMITS)
    with pytest.raises(TypeError, match="ranking must be the DataFrame"):
        tune_next(report.to_dataframe(), 1)
    with pytest.raises(ValueError, match="n must be an int >= 1"):
        tune_next(roofline(report, exe, LIMITS), 0)
    assert set(kernel_funcs(exe.lowered_mod)) >= set(exe.kernel_names)


def test_argument_bytes_reads_the_report_shapes():
    assert argument_bytes("float32[64, 512], float32[512, 64]") == 2 * 64 * 512 * 4
    assert argument_bytes("bfloat16[2, 3], int8[4], bool[5], float32[]") == 12 + 4 + 5 + 4


def test_the_ranking_selects_exactly_its_kernels_tasks(model):
    mod, exe, report = model
    frame = roofline(report, exe, LIMITS).copy()
    frame["Score"] = np.arange(len(frame), 0, -1, dtype=float)   # none at the roof (see above)
    tasks = extract_tasks(mod, "llvm")
    # Report kernel names are task names: the ranking picks exactly those tasks, in its order.
    for ranking in (frame.head(2), frame.head(2).index, tune_next(frame, 2), frame["Score"][:2]):
        chosen = select_tasks(tasks, ranking)
        assert [t.task_name for t in chosen] == list(frame.index[:2])
    with pytest.raises(ValueError, match=r"no task computes the kernel\(s\) \['fused_nope'\]"):
        select_tasks(tasks, pd.Index(["fused_nope"], name=KERNEL_INDEX))
    with pytest.raises(TypeError, match="roofline ranking"):
        select_tasks(tasks, report.to_dataframe())
    with pytest.raises(TypeError, match="op_names must be a list of str"):
        select_tasks(tasks, "matmul")
    # Plain strings keep TVM's rule: a part of the name.
    assert [t.task_name for t in select_tasks(tasks, ["matmul"])] == [_matmul_name(exe)]


def test_a_kernel_called_by_several_layers_selects_its_one_task():
    sys.path.insert(0, os.path.dirname(__file__))
    from test_ms_relax_integration import deep_mlp
    mod, params = deep_mlp()
    exe = relax.build(mod, "llvm")
    vm = relax.VirtualMachine(exe, wb.cpu(), profile=True)
    x = np.ones((4, 16), "float32")
    report = vm.profile("forward", wb.nd.array(x), *[wb.nd.array(p) for p in params])
    frame = roofline(report, exe, LIMITS)
    # One transpose kernel, called for each of the three layers: one row, one task.
    assert frame.loc["transpose", "Calls"] == 3
    tasks = extract_tasks(mod, "llvm")
    (task,) = select_tasks(tasks, frame.loc[["transpose"]])
    assert task.task_name == "transpose" and task.weight == 3
    assert task.kernel_names == ["transpose"]
    relu = select_tasks(tasks, frame.loc[["fused_matmul_add_relu"]])
    assert [t.weight for t in relu] == [2]


@pytest.mark.tuning
def test_tune_relax_tunes_the_ranked_kernels(model, tmp_path):
    from ms_tuning_workloads import fast_runner, xgb_1thread
    mod, exe, report = model
    frame = roofline(report, exe, LIMITS)
    first = frame.index[0]
    db = tune_relax(mod, None, "llvm -num-cores=2", str(tmp_path), max_trials_global=2,
                    num_trials_per_iter=2, op_names=frame.head(1), strategy="replay-trace",
                    runner=fast_runner(), cost_model=xgb_1thread(), seed=0,
                    dashboard="text")
    tuned = {r.workload.mod["main"].attrs.get("global_symbol") for r in
             db.get_all_tuning_records()}
    assert len(db) == 2 and len(tuned) == 1
    (task,) = [t for t in extract_tasks(mod, "llvm") if t.task_name == first]
    assert db.has_workload(task.dispatched[0])
    assert not math.isnan(frame.loc[first, "Score"])

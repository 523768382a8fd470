"""Workloads and small configurations for the tuner (search side) tests."""
from __future__ import annotations

import numpy as np

import workbench as wb
from workbench import te, topi


def matmul(n: int = 64, m: int | None = None, k: int | None = None):
    m = m or n
    k = k or n
    A = te.placeholder((n, k), "float32", name="A")
    B = te.placeholder((k, m), "float32", name="B")
    r = te.reduce_axis((0, k), name="k")
    C = te.compute((n, m), lambda i, j: te.sum(A[i, r] * B[r, j], axis=r), name="C")
    return te.create_prim_func([A, B, C])


def matmul_relu(n: int = 32):
    A = te.placeholder((n, n), "float32", name="A")
    B = te.placeholder((n, n), "float32", name="B")
    r = te.reduce_axis((0, n), name="k")
    C = te.compute((n, n), lambda i, j: te.sum(A[i, r] * B[r, j], axis=r), name="C")
    D = te.compute((n, n), lambda i, j: te.max(C[i, j], 0.0), name="D")
    return te.create_prim_func([A, B, D])


def conv2d():
    data = te.placeholder((1, 8, 10, 10), "float32", name="data")
    kernel = te.placeholder((16, 8, 3, 3), "float32", name="kernel")
    out = topi.nn.conv2d_nchw(data, kernel, 1, 1, 1)
    return te.create_prim_func([data, kernel, out])


def softmax():
    x = te.placeholder((32, 64), "float32", name="x")
    return te.create_prim_func([x, topi.nn.softmax(x)])


def elementwise(n: int = 256):
    A = te.placeholder((n, n), "float32", name="A")
    B = te.compute((n, n), lambda i, j: A[i, j] * 2.0 + 1.0, name="B")
    return te.create_prim_func([A, B])


def run(mod, arrays):
    """Compile ``mod`` and run it on copies of ``arrays``; returns the numpy results."""
    rt = wb.build(mod)
    nds = [wb.nd.array(a) for a in arrays]
    rt["main"](*nds)
    return [x.numpy() for x in nds]


def random_args(func):
    rng = np.random.RandomState(0)
    out = []
    for p in func.params:
        buf = func.buffer_map[p]
        out.append(rng.rand(*[int(s.value) for s in buf.shape]).astype(buf.dtype))
    return out


def fast_runner():
    """A LocalRunner that measures briefly (tests check results, not speed)."""
    from workbench.meta_schedule.runner import EvaluatorConfig, LocalRunner
    return LocalRunner(evaluator_config=EvaluatorConfig(number=1, repeat=1, min_repeat_ms=1))


def small_evolutionary(**overrides):
    """TVM's EvolutionarySearch with a test-sized population."""
    from workbench.meta_schedule.search_strategy import EvolutionarySearch
    cfg = dict(population_size=16, init_min_unmeasured=4, genetic_num_iters=2)
    cfg.update(overrides)
    return EvolutionarySearch(**cfg)


def xgb_1thread():
    """The XGB model with one thread: multi-threaded xgboost crawls on a loaded 2-core box."""
    from workbench.meta_schedule.cost_model import XGBModel
    return XGBModel(num_tuning_cores=1)


#: A target whose rule kind is "llvm" (TVM's DefaultLLVM rules and postprocs) on any x86-64
#: host: tests of that space pin it, because the host target ("llvm") gets the x86 tensorizing
#: rule lists where the CPU has AVX-512 (``rule_kind_from_target``).
LLVM_SPACE_TARGET = "llvm -num-cores=2 -mcpu=haswell"


def tensorized_only_space(kind: str = "vnni"):
    """The x86 ``kind`` design space without the untensorized space the tensorizing rules keep
    (TVM's MultiLevelTilingWithIntrin): for tests that check what tuning does with the
    tensorized spaces in a few trials."""
    from workbench.meta_schedule.schedule_rule import MultiLevelTilingWithIntrin, ScheduleRule
    from workbench.meta_schedule.space_generator import PostOrderApply
    rules = ScheduleRule.create(kind)
    for rule in rules:
        if isinstance(rule, MultiLevelTilingWithIntrin):
            rule.keep_untensorized = False
    return PostOrderApply(sch_rules=rules)

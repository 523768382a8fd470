"""Search quality: on the same trial budget and seed, the cost-model-guided evolutionary
search finds a better schedule than replaying random traces.

Measurements are replaced by a deterministic *synthetic* latency: a builder that "builds" a
candidate by computing an analytic latency from its loop nest (parallel / vectorized extents
and the innermost tile shape of the reduction store) and a runner that reports it. So the
test exercises the whole tuning loop (spaces, replay, postprocs, mutators, XGB cost model,
database, task scheduler) without the noise of real timings on a loaded machine. The
evolutionary search gets an oracle cost model (1 / synthetic latency): with only 32 trials
XGB never leaves its 100-sample warm-up, so the test checks that the search exploits a good
model. ``evaluate_rank_correlation`` (cost-model accuracy) is tested at the end.
"""
from __future__ import annotations

import math
import os
import sys

import numpy as np
import pytest

from workbench import meta_schedule as ms
from workbench.meta_schedule.builder import BuilderResult, PyBuilder
from workbench.meta_schedule.cost_model import PyCostModel
from workbench.meta_schedule.measure_callback import AddToDatabase, UpdateCostModel
from workbench.meta_schedule.runner import PyRunner, RunnerFuture, RunnerResult
from workbench.meta_schedule.utils import derived_object
from workbench.tir.functor import IRVisitor
from workbench.tir.stmt import ForKind

sys.path.insert(0, os.path.dirname(__file__))
from ms_tuning_workloads import LLVM_SPACE_TARGET, matmul  # noqa: E402

pytestmark = pytest.mark.tuning

_PREFIX = "synthetic-latency:"


class _Nest(IRVisitor):
    """For every BufferStore: the (kind, extent) of the loops around it, outermost first."""

    def __init__(self) -> None:
        super().__init__()
        self.stack: list[tuple[str, int]] = []
        self.stores: list[list[tuple[str, int]]] = []

    def visit_For(self, loop) -> None:
        ext = getattr(loop.extent, "value", 1)
        self.stack.append((loop.kind, int(ext)))
        self.visit(loop.body)
        self.stack.pop()

    def visit_BufferStore(self, store) -> None:
        self.stores.append(list(self.stack))


def synthetic_latency(mod) -> float:
    """Seconds, a smooth function of the schedule with a single narrow optimum: the three
    innermost loops of the reduction store of extents 8 x 4 x 16, a parallel extent of 32,
    and vectorization."""
    v = _Nest()
    v.visit(mod["main"].body)
    nest = max(v.stores, key=len)  # the deepest store: the reduction update
    extents = [e for _, e in nest] + [1, 1, 1]
    inner0, inner1, inner2 = extents[-4], extents[-5] if len(extents) > 4 else 1, \
        extents[-6] if len(extents) > 5 else 1
    loops = [lp for s in v.stores for lp in s]
    par = math.prod(e for k, e in loops if k == ForKind.PARALLEL) if loops else 1
    vec = max([e for k, e in loops if k == ForKind.VECTORIZED] or [1])
    cost = 1.0 + 0.3 * (math.log2(max(inner0, 1)) - 4) ** 2 \
        + 0.3 * (math.log2(max(inner1, 1)) - 2) ** 2 \
        + 0.2 * (math.log2(max(inner2, 1)) - 3) ** 2 \
        + 0.1 * (math.log2(max(par, 1)) - 5) ** 2
    cost *= 1.0 if vec >= 4 else 1.5
    return 1e-3 * cost


@derived_object
class SyntheticBuilder(PyBuilder):
    def build(self, build_inputs):
        return [BuilderResult(f"{_PREFIX}{synthetic_latency(b.mod)!r}", None)
                for b in build_inputs]


@derived_object
class SyntheticRunner(PyRunner):
    def run(self, runner_inputs):
        out = []
        for r in runner_inputs:
            secs = float(r.artifact_path[len(_PREFIX):])
            res = RunnerResult([secs], None)
            out.append(RunnerFuture(lambda: True, lambda res=res: res))
        return out


@derived_object
class OracleCostModel(PyCostModel):
    """Scores = 1 / synthetic latency: a perfect model, so the test checks that the search
    (evolution, deduplication, eps-greedy picking) exploits a good model."""

    def update(self, context, candidates, results):
        pass

    def predict(self, context, candidates):
        return np.array([1e-3 / synthetic_latency(c.sch.mod) for c in candidates])

    def load(self, path):
        pass

    def save(self, path):
        pass


def _best_latency(strategy, cost_model, work_dir: str) -> float:
    scheduler = ms.TaskScheduler.create("round-robin")
    scheduler.check_outputs = False  # nothing is really built
    db = ms.tune_tir(matmul(256), LLVM_SPACE_TARGET, work_dir, max_trials_global=32,
                     num_trials_per_iter=8, builder=SyntheticBuilder(),
                     runner=SyntheticRunner(), database="memory", cost_model=cost_model,
                     measure_callbacks=[AddToDatabase(), UpdateCostModel()],
                     task_scheduler=scheduler, strategy=strategy, seed=7)
    secs = [r.run_secs[0] for r in db.get_all_tuning_records() if r.run_secs]
    assert len(secs) == 32
    return min(secs)


def test_synthetic_latency_is_deterministic():
    mod = ms.tir_integration.task_module(matmul(256))
    assert synthetic_latency(mod) == synthetic_latency(mod) > 0


def test_evolutionary_beats_replay_trace(tmp_path):
    replay = _best_latency("replay-trace", "random", str(tmp_path / "replay"))
    # search_share=None: measuring is instant here, so the default budget (a share of the
    # measuring time) would leave the least population and no generation to evolve
    evo = _best_latency(ms.search_strategy.EvolutionarySearch(population_size=128,
                                                              search_share=None),
                        OracleCostModel(), str(tmp_path / "evo"))
    print(f"best synthetic latency: replay-trace {replay * 1e3:.4f} ms, "
          f"evolutionary {evo * 1e3:.4f} ms")
    assert evo <= 1.1 * replay


def test_rank_correlation_matches_scipy():
    stats = pytest.importorskip("scipy.stats")
    from workbench.meta_schedule.cost_model import rank_correlation
    rng = np.random.RandomState(0)
    a = rng.randint(0, 6, 40).astype(float)
    b = a + rng.randn(40)
    got = rank_correlation(a, b)
    assert got.n == 40
    assert got.spearman == pytest.approx(stats.spearmanr(a, b)[0])
    assert got.kendall == pytest.approx(stats.kendalltau(a, b)[0])


def test_evaluate_rank_correlation_skips_failures():
    from workbench.meta_schedule.cost_model import evaluate_rank_correlation

    class Fixed:
        def predict(self, context, candidates):
            return np.array([c for c in candidates], dtype="float64")

    secs = [1.0, 2.0, 4.0, 8.0]
    results = [RunnerResult([s], None) for s in secs] + [RunnerResult(None, "boom")]
    good = evaluate_rank_correlation(Fixed(), None, [4.0, 3.0, 2.0, 1.0, 9.0], results)
    assert good.n == 4 and good.spearman == pytest.approx(1.0) and good.kendall == pytest.approx(1.0)
    bad = evaluate_rank_correlation(Fixed(), None, [1.0, 2.0, 3.0, 4.0, 0.0], results)
    assert bad.spearman == pytest.approx(-1.0) and bad.kendall == pytest.approx(-1.0)

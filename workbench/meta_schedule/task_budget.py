"""Trials a database already holds for a model's tasks, and per-task trial caps (Workbench).

``tune_relax`` counts the records a database holds for each task (valid or failed: every
measured trial is one record, ``AddToDatabase``) as trials already spent. Calling it again on
the same work directory therefore resumes a stopped run, and a kernel that an earlier model
tuned starts from that model's records (the evolutionary search seeds its population with the
database's best of the task) instead of a fresh budget.

The task scheduler gives every task the same ``max_trials_per_task``; a task resumed with
``k`` trials done may run only ``max_trials_per_task - k`` more. :class:`CappedStrategy` wraps
that task's search strategy and passes the smaller cap to its ``pre_tuning``: the strategy
then ends its search there (``generate_measure_candidates`` returns None) and the scheduler
terminates the task, as it does for any finished search.

A kernel nobody tuned is built with its default schedule (``workbench.dlight``), so a tuning
record only helps when it beats that. :func:`default_schedule_candidates` makes the default
schedule and its neighbouring register tiles measure candidates of the task, and
:class:`SeededStrategy` measures such seeds as the task's first batch (trials like any
other, recorded in the database, seen by the cost model) before its search starts: the task's
best record is then never a schedule that measured slower than the default one.
"""
from __future__ import annotations

import logging
from typing import TYPE_CHECKING, Any, Sequence

from workbench import options
from workbench.meta_schedule.database.database import trace_key
from workbench.meta_schedule.database.module_equality import ModuleEquality
from workbench.meta_schedule.search_strategy import SearchStrategy

if TYPE_CHECKING:  # pragma: no cover
    from workbench.ir.module import IRModule
    from workbench.meta_schedule.database import Database
    from workbench.meta_schedule.search_strategy import MeasureCandidate
    from workbench.meta_schedule.tune_context import TuneContext
    from workbench.target import Target

logger = logging.getLogger("workbench.meta_schedule")

options.register("ms_default_variants", int, 8, env="WORKBENCH_MS_DEFAULT_VARIANTS",
                 doc="tune_relax and tune_tir measure each task's default schedule first and then its "
                     "neighbouring register tiles (workbench.dlight.default_schedule_variants):"
                     " this many candidates in all, at most half the task's trials; 1: the "
                     "default schedule only.",
                 validate=options.positive)

__all__ = ["trials_done", "CappedStrategy", "SeededStrategy", "default_schedule_candidate",
           "default_schedule_candidates", "default_schedule_seeds", "open_database",
           "seed_budget"]


def trials_done(database: "Database", mods: Sequence["IRModule"],
                module_equality: str = "structural") -> list[int]:
    """How many schedules (valid or failed) ``database`` holds records of for each module of
    ``mods``, matched as the database matches workloads (``module_equality``). A schedule
    measured several times (the confirmation re-measures the leaders, each measurement a
    record of its own) counts once: it was one trial."""
    equality = ModuleEquality(module_equality)
    # Records share their Workload object; hash each workload once, not each record.
    traces: dict[int, set[str]] = {}
    workloads: dict[int, Any] = {}
    for record in database.get_all_tuning_records():
        key = id(record.workload)
        workloads.setdefault(key, record.workload)
        traces.setdefault(key, set()).add(trace_key(record))
    by_hash: dict[int, list[tuple["IRModule", int]]] = {}
    for key, workload in workloads.items():
        by_hash.setdefault(equality.hash(workload.mod), []).append(
            (workload.mod, len(traces[key])))
    done = []
    for mod in mods:
        done.append(sum(n for other, n in by_hash.get(equality.hash(mod), ())
                        if other is mod or equality.equal(other, mod)))
    return done


class CappedStrategy(SearchStrategy):
    """``inner`` searching at most ``cap`` trials, whatever ``max_trials`` the scheduler
    passes (the smaller of the two). Everything else is the inner strategy's."""

    def __init__(self, inner: SearchStrategy, cap: int) -> None:
        if not isinstance(inner, SearchStrategy):
            raise TypeError(f"CappedStrategy: inner must be a SearchStrategy, got "
                            f"{type(inner).__name__}")
        if isinstance(cap, bool) or not isinstance(cap, int) or cap < 0:
            raise ValueError(f"CappedStrategy: cap must be an int >= 0, got {cap!r}")
        self.inner, self.cap = inner, cap

    def _initialize_with_tune_context(self, context: "TuneContext") -> None:
        self.inner._initialize_with_tune_context(context)

    def pre_tuning(self, max_trials: int, num_trials_per_iter: int, design_spaces: list,
                   database: Any = None, cost_model: Any = None) -> None:
        self.inner.pre_tuning(min(max_trials, self.cap), num_trials_per_iter, design_spaces,
                              database, cost_model)

    def post_tuning(self) -> None:
        self.inner.post_tuning()

    def generate_measure_candidates(self) -> Any:
        return self.inner.generate_measure_candidates()

    def notify_runner_results(self, measure_candidates: list, results: list) -> None:
        self.inner.notify_runner_results(measure_candidates, results)

    def clone(self) -> "CappedStrategy":
        return CappedStrategy(self.inner.clone(), self.cap)

    def __getattr__(self, name: str) -> Any:
        # The inner strategy's state (logger, population settings) reads through; "inner"
        # itself is looked up here only before __init__ set it (copy, pickle).
        if name == "inner":
            raise AttributeError(name)
        return getattr(self.inner, name)


def default_schedule_candidate(mod: "IRModule", target: "Target") -> "MeasureCandidate | None":
    """The default CPU schedule (``workbench.dlight``) of the task module ``mod`` (its
    function ``main``) as a measure candidate: a schedule of ``mod`` that replayed the rule's
    trace, so the database stores a trace ``MetaScheduleApplyDatabase`` can replay. None when
    no rule fits the kernel."""
    cands = default_schedule_candidates(mod, target, 1)
    return cands[0] if cands else None


def default_schedule_candidates(mod: "IRModule", target: "Target", limit: int
                                ) -> list["MeasureCandidate"]:
    """:func:`default_schedule_candidate` first, then up to ``limit - 1`` candidates with the
    neighbouring register tiles of the same rule (``workbench.dlight.default_schedule_variants``):
    the kernels a tuned model is most likely to gain from, measured before the generic search.
    Each replays its rule's trace on ``mod``. Empty when no rule fits the kernel."""
    from workbench.dlight import default_schedule_variants
    from workbench.meta_schedule.arg_info import ArgInfo
    from workbench.meta_schedule.search_strategy import MeasureCandidate
    from workbench.tir.schedule import Schedule

    out = []
    for variant in default_schedule_variants(mod["main"], target, limit):
        sch = Schedule(mod)
        variant.trace.apply_to_schedule(sch, remove_postproc=False)
        # a rule may pack a weight in a preproc block: measured with the kernel's own arguments
        out.append(MeasureCandidate(sch, ArgInfo.from_entry_func(sch.mod, remove_preproc=True)))
    return out


class SeededStrategy(SearchStrategy):
    """``inner`` after ``seeds``: the first calls of ``generate_measure_candidates`` return the
    seeds (as many as ``max_trials`` allows, ``num_trials_per_iter`` a batch), then the inner
    search runs with what is left of ``max_trials``. The seeds' results are not passed to
    ``inner`` (it did not make them); the database and cost model see them through the
    scheduler's callbacks."""

    def __init__(self, inner: SearchStrategy, seeds: Sequence["MeasureCandidate"]) -> None:
        if not isinstance(inner, SearchStrategy):
            raise TypeError(f"SeededStrategy: inner must be a SearchStrategy, got "
                            f"{type(inner).__name__}")
        self.inner, self.seeds = inner, list(seeds)
        self._pending: list = []
        self._batch = 1 << 30
        self._sent: list | None = None

    def _initialize_with_tune_context(self, context: "TuneContext") -> None:
        self.inner._initialize_with_tune_context(context)

    def pre_tuning(self, max_trials: int, num_trials_per_iter: int, design_spaces: list,
                   database: Any = None, cost_model: Any = None) -> None:
        self._pending = self.seeds[:max(0, max_trials)]
        self._batch = max(1, int(num_trials_per_iter))
        self._sent = None
        self.inner.pre_tuning(max_trials - len(self._pending), num_trials_per_iter,
                              design_spaces, database, cost_model)

    def post_tuning(self) -> None:
        self._pending, self._sent = [], None
        self.inner.post_tuning()

    def generate_measure_candidates(self) -> Any:
        if self._pending:
            # batches of at most num_trials_per_iter, as the search's own
            self._sent = self._pending[:self._batch]
            self._pending = self._pending[self._batch:]
            return list(self._sent)
        return self.inner.generate_measure_candidates()

    def notify_runner_results(self, measure_candidates: list, results: list) -> None:
        if self._sent is not None and len(measure_candidates) == len(self._sent) and all(
                a is b for a, b in zip(measure_candidates, self._sent)):
            self._sent = None
            return
        self.inner.notify_runner_results(measure_candidates, results)

    def clone(self) -> "SeededStrategy":
        return SeededStrategy(self.inner.clone(), self.seeds)

    def __getattr__(self, name: str) -> Any:
        if name == "inner":
            raise AttributeError(name)
        return getattr(self.inner, name)


def seed_budget(max_trials_per_task: int, max_trials_global: int, n_tasks: int) -> int:
    """The trials a task of ``n_tasks`` may count on: its cap, or its even share of the
    global budget if that is smaller. Its seeds take at most half of it: 8 neighbouring
    tiles for each of ResNet-18's 28 tasks would spend 224 trials of a 200-trial run before
    any search (they took 147 of 200, the search ran on 7 tasks)."""
    return max(1, min(max_trials_per_task, max_trials_global // max(1, n_tasks)))


def default_schedule_seeds(ctx: "TuneContext", max_trials: int, caller: str) -> list:
    """The task's default schedule and its neighbouring tiles (option ``ms_default_variants``
    in all, at most half of ``max_trials``, the task's :func:`seed_budget`), or just the
    default schedule; none (with a warning naming ``caller`` and the task) when they cannot
    be made."""
    limit = max(1, min(int(options.get("ms_default_variants")), max_trials // 2))
    try:
        return default_schedule_candidates(ctx.mod, ctx.target, limit)
    except Exception as err:  # noqa: BLE001 - a missing seed costs speed, never the run
        logger.warning("%s: no default-schedule trial for %s: %s: %s", caller, ctx.task_name,
                       type(err).__name__, err)
        return []


def open_database(database: Any, work_dir: str, module_equality: str, caller: str
                  ) -> "Database":
    """``tune_tasks``'s resolution of ``database`` (a kind or a Database), done early: the
    records it holds decide what is left to tune."""
    from workbench.meta_schedule.database import Database
    if isinstance(database, str):
        if database == "json":
            return Database.create("json", work_dir=work_dir, module_equality=module_equality)
        return Database.create(database, module_equality=module_equality)
    if not callable(getattr(database, "get_all_tuning_records", None)):
        raise TypeError(f"{caller}: database must be a Database or a kind such as 'json', "
                        f"got {type(database).__name__}")
    return database

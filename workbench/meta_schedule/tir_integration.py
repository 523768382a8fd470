"""``tune_tir`` / ``compile_tir``: tune the PrimFuncs of a module (TVM's
``tir_integration.py``, reference section 1.1).

Every PrimFunc (sorted by name) becomes one task ``IRModule({"main": func})`` with its own
``TuneContext`` (seed forked from ``seed``, logger under ``work_dir/logs``), cloned so each
has independent generator and strategy state; ``tune_tasks`` then does the work.
``compile_tir(database, mod, target)`` returns the best schedule of ``mod`` in the database
(its trace replayed, postprocessing included); where TVM returns None when the database has
no valid record for the workload, it raises :class:`NoValidRecordError` saying so (a None
handed on to ``build`` hid the cause).
"""
from __future__ import annotations

from typing import Any, Mapping

from workbench.ir.module import IRModule
from workbench.meta_schedule.database import Database
from workbench.meta_schedule.logging import get_loggers_from_work_dir
from workbench.meta_schedule.task_budget import (
    SeededStrategy, default_schedule_seeds, open_database, seed_budget, trials_done,
)
from workbench.meta_schedule.tune import tune_tasks
from workbench.meta_schedule.tune_context import TuneContext
from workbench.meta_schedule.utils import fork_seed, normalize_mod
from workbench.target import Target
from workbench.tir.function import PrimFunc
from workbench.tir.schedule import Schedule

__all__ = ["tune_tir", "compile_tir", "NoValidRecordError"]


class NoValidRecordError(LookupError):
    """``compile_tir``: the database holds no valid record of the workload."""


def task_module(func: PrimFunc) -> IRModule:
    """The module a tuning task holds for ``func``: one PrimFunc named ``main`` with
    ``tir.noalias``, the form databases key workloads on (relax's tasks use it too)."""
    func = func.with_attr("global_symbol", "main")
    if "tir.noalias" not in func.attrs:
        func = func.with_attr("tir.noalias", True)
    return IRModule({"main": func})


def _named_tasks(mod: Any) -> list[tuple[str, IRModule]]:
    mod = normalize_mod(mod)
    funcs = sorted((name, f) for name, f in mod.items() if isinstance(f, PrimFunc))
    if not funcs:
        raise ValueError("tune_tir: the module has no PrimFunc to tune")
    return [(name, task_module(f)) for name, f in funcs]


def tune_tir(mod: IRModule | PrimFunc, target: str | Target, work_dir: str,
             max_trials_global: int, *, max_trials_per_task: int | None = None,
             num_trials_per_iter: int = 64, builder: Any = "local", runner: Any = "local",
             database: Any = "json", cost_model: Any = "xgb",
             measure_callbacks: Any = "default", task_scheduler: Any = "gradient",
             space: Any = "post-order-apply", strategy: Any = "evolutionary",
             num_tuning_cores: int | str = "physical", seed: int | None = None,
             module_equality: str = "structural",
             special_space: Mapping[str, Any] | None = None,
             post_optimization: bool | None = False, dashboard: Any = False,
             rpc_config: Any = None, default_schedule_first: bool | None = None) -> Database:
    """Tune every PrimFunc of ``mod`` for ``target``; return the database of records.

    Files land in ``work_dir``: ``database_workload.json``, ``database_tuning_record.json``
    and ``logs/``. ``measure_callbacks`` may be a list mixing callbacks and ``"default"``.
    ``dashboard`` (Workbench): live progress, see :func:`tune_tasks`. ``runner="rpc"`` /
    ``builder="dask"`` measure / compile on the Dask cluster of ``rpc_config`` (an
    ``RPCConfig``), see :func:`tune_tasks`.

    ``default_schedule_first`` (Workbench; default: the option ``default_schedule``): a task
    the database holds no record of measures its default schedule (``workbench.dlight``) and
    the same rule's neighbouring register tiles first (option ``ms_default_variants``
    candidates in all, at most half the task's budget: its cap or its even share of the
    global one), as ``tune_relax`` does, so its best record is never slower than what
    ``build`` gives the function untuned. Only with the default ``space``; a function no rule
    fits starts with the search. ``False``: the search alone (what TVM does; the cost model's
    evaluations use it).
    """
    if not isinstance(target, Target):
        target = Target(target)
    if default_schedule_first is None:
        from workbench import options
        default_schedule_first = bool(options.get("default_schedule"))
    named = _named_tasks(mod)
    if default_schedule_first:
        database = open_database(database, work_dir, module_equality, "tune_tir")
        done = trials_done(database, [m for _, m in named], module_equality)
        budget = seed_budget(max_trials_per_task or max_trials_global, max_trials_global,
                             len(named))
    loggers = get_loggers_from_work_dir(work_dir, [name for name, _ in named])
    rand_states = fork_seed(seed, len(named))
    tasks, weights = [], []
    for i, ((name, task_mod), logger, rand_state) in enumerate(zip(named, loggers,
                                                                   rand_states)):
        space_i = space
        if special_space is not None and name in special_space:
            space_i = special_space[name]
            if space_i is None:
                continue
        ctx = TuneContext(task_mod, target=target, space_generator=space_i,
                          search_strategy=strategy, task_name=name, rand_state=rand_state,
                          num_threads=num_tuning_cores, logger=logger)
        ctx = ctx.clone()
        if default_schedule_first and space_i == "post-order-apply" and not done[i]:
            seeds = default_schedule_seeds(ctx, budget, "tune_tir")
            if seeds:
                ctx.search_strategy = SeededStrategy(ctx.search_strategy, seeds)
        tasks.append(ctx)
        weights.append(1.0)
    return tune_tasks(tasks=tasks, task_weights=weights, work_dir=work_dir,
                      max_trials_global=max_trials_global,
                      max_trials_per_task=max_trials_per_task,
                      num_trials_per_iter=num_trials_per_iter, builder=builder, runner=runner,
                      database=database, cost_model=cost_model,
                      measure_callbacks=measure_callbacks, task_scheduler=task_scheduler,
                      module_equality=module_equality, post_optimization=post_optimization,
                      dashboard=dashboard, rpc_config=rpc_config)


def compile_tir(database: Database, mod: IRModule | PrimFunc,
                target: str | Target) -> Schedule:
    """The best schedule of ``mod`` recorded in ``database``.

    Raises :class:`NoValidRecordError` when the database holds no valid record of the
    workload (never tuned, or tuning found no valid candidate: ``tune_tir`` warned then)."""
    if not isinstance(target, Target):
        target = Target(target)
    named = _named_tasks(mod)
    if len(named) != 1:
        raise ValueError(f"compile_tir: expected one PrimFunc, the module has "
                         f"{[n for n, _ in named]}")
    name, task_mod = named[0]
    sch = database.query_schedule(task_mod, target, "main")
    if sch is None:
        raise NoValidRecordError(
            f"compile_tir: the database has no valid tuning record of {name!r} for {target} "
            f"({len(database)} record(s) in all): tune it first, or build the function "
            "unscheduled / with workbench.dlight.default_schedule")
    return sch

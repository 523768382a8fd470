"""``tune_tasks``: tune a list of TuneContexts with a task scheduler (TVM's ``tune.py``).

String arguments are resolved as TVM does (reference section 1.1): the builder is a
``LocalBuilder(max_workers=num_cores)`` ("dask": a ``DaskBuilder``), the runner a
``LocalRunner()`` ("rpc": an ``RPCRunner`` on ``rpc_config``'s cluster), the database a
``JSONDatabase(work_dir=work_dir)``, the cost model ``XGBModel(num_tuning_cores=num_cores)``,
the callbacks ``MeasureCallback.create("default")`` and the scheduler ``GradientBased()``,
where ``num_cores = tasks[0].num_threads``. Objects are used as given.

Worker processes: a builder or runner made here from a string is shut down when the call
returns. When the call ends by an exception -- a ``KeyboardInterrupt`` above all -- the
workers of *every* builder and runner it used, and the replay pool's, are stopped too (a
builder or runner passed in starts new ones when used again), after the task scheduler has
stored every measured candidate; running the same call again resumes from the database.
"""
from __future__ import annotations

import inspect
import logging
from typing import TYPE_CHECKING, Any, Sequence

from workbench.meta_schedule.builder import Builder
from workbench.meta_schedule.cost_model import CostModel
from workbench.meta_schedule.database import Database
from workbench.meta_schedule.measure_callback import MeasureCallback
from workbench.meta_schedule.runner import Runner
from workbench.meta_schedule.task_scheduler import TaskScheduler
from workbench.meta_schedule.task_scheduler.rivals import check_rivals

if TYPE_CHECKING:  # pragma: no cover
    from workbench.meta_schedule.tune_context import TuneContext

__all__ = ["tune_tasks", "normalize_callbacks"]

logger = logging.getLogger("workbench.meta_schedule")


def normalize_callbacks(measure_callbacks: Any) -> list[MeasureCallback]:
    """"default" | one callback | a list (which may itself contain "default")."""
    if measure_callbacks is None:
        return []
    if isinstance(measure_callbacks, str):
        return MeasureCallback.create(measure_callbacks)
    if isinstance(measure_callbacks, MeasureCallback):
        return [measure_callbacks]
    out: list[MeasureCallback] = []
    for cb in measure_callbacks:
        out.extend(normalize_callbacks(cb))
    return out


def tune_tasks(*, tasks: Sequence["TuneContext"], task_weights: Sequence[float],
               work_dir: str, max_trials_global: int, max_trials_per_task: int | None = None,
               num_trials_per_iter: int = 64, builder: Any = "local", runner: Any = "local",
               database: Any = "json", cost_model: Any = "xgb",
               measure_callbacks: Any = "default", task_scheduler: Any = "gradient",
               module_equality: str = "structural",
               post_optimization: bool | None = False, dashboard: Any = False,
               rpc_config: Any = None,
               task_rivals: Sequence[Sequence[int]] | None = None) -> Database:
    """Tune ``tasks`` and return the database holding every record (see module docstring).

    ``runner="rpc"`` measures on a Dask cluster and ``builder="dask"`` compiles there, both
    as ``rpc_config`` (an ``RPCConfig``; None reads the options ``rpc_address`` and
    ``rpc_key``) says; ``runner=RPCConfig(...)`` is short for both of ``runner="rpc"`` and
    ``rpc_config=``.

    ``dashboard`` (Workbench): True / "widget" / "text" / a ``TuningDashboard`` shows live
    progress (a widget in a notebook, a line per batch elsewhere) with a Stop button; the
    notebook widgets build it and attach it after the other callbacks (:mod:`.dashboard_hook`).

    ``post_optimization``: after the search, a Droplet search around each task's best record
    (:mod:`workbench.meta_schedule.post_optimization`; budget: option
    ``ms_post_opt_trials`` per task), measured and recorded like the search's trials.

    ``task_rivals`` (Workbench; ``tune_relax`` passes it): per task, the indices of the tasks
    that compute its layers another way (a convolution direct and Winograd); a task whose
    best its rivals outrun is tuned only when no other task is left, and not confirmed
    (:mod:`workbench.meta_schedule.task_scheduler.rivals`).

    Last (Workbench), each task's leading schedules are measured again until each has
    ``ms_confirm_rounds`` measurements (:mod:`workbench.meta_schedule.confirm`), so that the
    database's best is not just the luckiest single measurement; 0 turns this off."""
    if not tasks:
        raise ValueError("tune_tasks: no tasks to tune")
    if len(tasks) != len(task_weights):
        raise ValueError(f"tune_tasks: {len(tasks)} tasks but {len(task_weights)} weights")
    rivals = check_rivals(task_rivals, len(tasks)) if task_rivals is not None else None
    if max_trials_per_task is None:
        max_trials_per_task = max_trials_global
    num_cores = tasks[0].num_threads
    builder, runner, owned = _builder_and_runner(builder, runner, rpc_config, num_cores)
    if isinstance(database, str):
        if database == "json":
            database = Database.create("json", work_dir=work_dir,
                                       module_equality=module_equality)
        else:
            database = Database.create(database, module_equality=module_equality)
    if isinstance(cost_model, str):
        cost_model = CostModel.create(cost_model, num_tuning_cores=num_cores)
    callbacks = normalize_callbacks(measure_callbacks)
    scheduler = TaskScheduler.create(task_scheduler)
    kwargs = _accepted(scheduler.tune, work_dir=work_dir, rivals=rivals)
    try:
        with _dashboard(callbacks, dashboard, max_trials_global,
                        max_trials_per_task) as callbacks:
            scheduler.tune(list(tasks), [float(w) for w in task_weights], max_trials_global,
                           max_trials_per_task, num_trials_per_iter, builder, runner,
                           callbacks, database, cost_model, **kwargs)
            if post_optimization:
                _begin_phase(callbacks, "post-optimization")
                _post_optimize(scheduler, callbacks)
            _begin_phase(callbacks, "confirmation")
            _confirm_best(scheduler, callbacks)
    except BaseException:
        _stop_workers([builder, runner], replay_pool=True)
        raise
    finally:
        _stop_workers(owned)
    return database


def _accepted(method: Any, **extras: Any) -> dict[str, Any]:
    """The Workbench keywords (not None) that ``method`` takes: a user's scheduler written
    to TVM's signature gets none of them."""
    params = inspect.signature(method).parameters
    open_kwargs = any(p.kind is inspect.Parameter.VAR_KEYWORD for p in params.values())
    return {k: v for k, v in extras.items()
            if v is not None and (k in params or open_kwargs)}


def _begin_phase(callbacks: list[MeasureCallback], phase: str) -> None:
    """Tell the callbacks that count measurements (a dashboard's ``begin_phase``) that those
    from now on are ``phase``'s, not the search's: they do not spend the trial budget."""
    for cb in callbacks:
        begin = getattr(cb, "begin_phase", None)
        if callable(begin):
            begin(phase)


def _post_optimize(scheduler: TaskScheduler, callbacks: list[MeasureCallback]) -> None:
    """The Droplet search around each task's best record (``post_optimization=True``); a
    dashboard's Stop ends it too."""
    from workbench.meta_schedule.post_optimization import post_optimize

    def stop() -> bool:
        return any(getattr(cb, "stop_requested", False) for cb in callbacks)

    post_optimize(scheduler, should_stop=stop)


def _confirm_best(scheduler: TaskScheduler, callbacks: list[MeasureCallback]) -> None:
    """Each task's leaders measured again (:mod:`workbench.meta_schedule.confirm`; option
    ``ms_confirm_rounds``, 0: off); a dashboard's Stop ends it too."""
    from workbench.meta_schedule.confirm import confirm_best

    confirm_best(scheduler, should_stop=lambda: any(
        getattr(cb, "stop_requested", False) for cb in callbacks))


def _stop_workers(components: Sequence[Any], replay_pool: bool = False) -> None:
    """Shut down the worker processes of ``components`` (those that have any), and those of
    the replay pool. Never raises: it runs while another exception is on its way."""
    for component in components:
        stop = getattr(component, "shutdown", None)
        if callable(stop):
            try:
                stop()
            except Exception as err:  # noqa: BLE001
                logger.warning("Could not stop the workers of %r: %s", component, err)
    if replay_pool:
        from workbench.meta_schedule.search_strategy.replay_pool import shutdown_replay_pool
        shutdown_replay_pool()


def _builder_and_runner(builder: Any, runner: Any, rpc_config: Any,
                        num_cores: int) -> tuple[Any, Any, list[Any]]:
    """TVM's string forms, plus "dask" / "rpc" on the cluster of ``rpc_config``; also the
    components made here (their workers are stopped when tuning ends). The "rpc" runner gets
    no ``max_workers`` (TVM passes the local core count): Dask already gives each worker of
    the key one candidate at a time, and the workers are not this machine."""
    from workbench.rpc.config import RPCConfig

    if isinstance(runner, RPCConfig):
        rpc_config, runner = runner, "rpc"
    owned = []
    if isinstance(builder, str):
        builder = Builder.create("dask", rpc_config=rpc_config) if builder == "dask" else \
            Builder.create(builder, max_workers=num_cores)
        owned.append(builder)
    if isinstance(runner, str):
        runner = Runner.create("rpc", rpc_config=rpc_config) if runner == "rpc" else \
            Runner.create(runner, max_workers=num_cores)
        owned.append(runner)
    return builder, runner, owned


def _dashboard(callbacks: list[MeasureCallback], dashboard: Any, max_trials_global: int,
               max_trials_per_task: int) -> Any:
    """The callbacks with the dashboard appended, as a context that draws its final state.
    The dashboard is a callback a higher floor builds (:mod:`.dashboard_hook`)."""
    from workbench.meta_schedule.dashboard_hook import attach_dashboard
    return attach_dashboard(callbacks, dashboard, max_trials_global, max_trials_per_task)

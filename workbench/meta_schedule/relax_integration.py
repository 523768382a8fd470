"""Tuning whole Relax models (TVM's ``meta_schedule/relax_integration.py``, reference
section 12).

- :func:`extract_tasks` runs the Relax pipeline up to and including ``FuseOps`` + ``FuseTIR``,
  so the tasks are the fused kernels the VM will call; every ``call_tir`` site's PrimFunc is
  normalised to ``IRModule({"main": f})`` and deduplicated with the module equality; a task's
  ``weight`` is the number of call sites of equal kernels and its name is the first kernel's
  name (``fused_matmul_add_relu``, ...). Tasks are in order of first call.
- :func:`tune_relax` tunes the extracted tasks with ``tune_tasks`` (weights from the call
  counts) and returns the database; ``dashboard=True`` shows all the model's tasks at once,
  with the model layers each task runs for (``ExtractedTask.layers``, for imported models).
- Trials already in the database count (Workbench, :mod:`.task_budget`): a task's records
  there -- from a run of this model that was stopped, or from another model with the same
  kernel -- are part of its ``max_trials_per_task`` and of ``max_trials_global``. Calling
  ``tune_relax`` again with the same ``work_dir`` resumes a stopped run instead of starting
  over, and a task shared with an earlier model starts from that model's records (the
  evolutionary search seeds from the database's best). A model whose budget is used up is not
  tuned again.
- :func:`compile_relax` builds the model with ``relax.build(..., database=db)``: the pass
  :class:`MetaScheduleApplyDatabase` swaps each fused kernel for the database's best schedule
  of it (trace replayed, postprocs included) before lowering to the VM.
- Implementations (Workbench, :mod:`.conv_implementations`): a 3x3 convolution that can be a
  Winograd one is tuned as a Winograd and as a direct convolution, and the build takes the
  one whose best record ran faster.

Kernels with symbolic shapes cannot be measured (the runner needs concrete inputs):
``tune_relax`` skips them with a warning, and they stay unscheduled in the compiled model.
"""
from __future__ import annotations

import logging
from typing import Any, Mapping, Sequence

from workbench.ir.module import IRModule
from workbench.ir.structural import StructuralSet
from workbench.meta_schedule.database import Database
from workbench.meta_schedule.database.module_equality import ModuleEquality
from workbench.meta_schedule.extracted_task import ExtractedTask
from workbench.meta_schedule.logging import get_loggers_from_work_dir
from workbench.meta_schedule.task_budget import (
    CappedStrategy, SeededStrategy, default_schedule_seeds, open_database, seed_budget,
    trials_done,
)
from workbench.meta_schedule.relax_passes import MetaScheduleApplyDatabase
from workbench.meta_schedule.tir_integration import task_module
from workbench.meta_schedule.tune import tune_tasks
from workbench.meta_schedule.tune_context import TuneContext
from workbench.meta_schedule.utils import fork_seed
from workbench.target import Target
from workbench.tir.function import PrimFunc

__all__ = ["extract_tasks", "extracted_tasks_to_tune_contexts", "tune_relax", "compile_relax",
           "select_tasks", "MetaScheduleApplyDatabase"]

logger = logging.getLogger("workbench.meta_schedule")


def _as_relax_module(mod: Any, params: Mapping[str, Any] | None) -> IRModule:
    from workbench.relax.expr import Function
    from workbench.relax.transform.bind_params import BindParams
    from workbench.relax.vm_build import entry_function
    if isinstance(mod, Function):
        mod = IRModule({"main": mod})
    if not isinstance(mod, IRModule):
        raise TypeError(f"expected a Relax IRModule or Function, got {type(mod).__name__}")
    if not any(isinstance(f, Function) for _, f in mod.items()):
        raise ValueError("the module has no Relax function")
    if params:
        mod = BindParams(entry_function(mod), params)(mod)
    return mod


def _fuse(mod: IRModule, target: Any, choose_winograd: Any = None) -> IRModule:
    """The default Relax pipeline up to and including FuseTIR (``choose_winograd``: the
    Winograd choice, see ``get_default_pipeline``)."""
    from workbench.relax.pipeline import get_default_pipeline
    for p in get_default_pipeline(target, choose_winograd=choose_winograd):
        mod = p(mod)
        if p.name == "FuseTIR":
            break
    return mod


def _call_sites(mod: IRModule) -> list[tuple[str, str, str]]:
    """``(Relax function name, PrimFunc name, layer label)`` of every ``call_tir`` in the Relax
    functions, in program order; the label is ``""`` for a call without a source span."""
    from workbench.relax.call_origins import origin_of
    from workbench.relax.expr import Function
    from workbench.relax.expr_functor import ExprVisitor
    from workbench.relax.op.base import is_call_tir
    sites: list[tuple[str, str, str]] = []

    class _Visitor(ExprVisitor):
        def __init__(self, func_name: str) -> None:
            super().__init__()
            self.func_name = func_name

        def visit_Call_(self, c: Any) -> None:
            if is_call_tir(c):
                layer = origin_of(c.span).layer if c.span is not None else ""
                sites.append((self.func_name, c.args[0].name_hint, layer))
            super().visit_Call_(c)

    for fname, func in list(mod.items()):
        if isinstance(func, Function):
            _Visitor(fname).visit_expr(func)
    return sites


def extract_tasks(mod: Any, target: str | Target, params: Mapping[str, Any] | None = None,
                  module_equality: str = "structural", *, alternatives: bool = False,
                  choose_winograd: Any = None) -> list[ExtractedTask]:
    """The tuning tasks of a Relax model: one per distinct fused kernel (see module
    docstring).

    ``alternatives`` (Workbench): also the kernels of the implementations the build could
    choose instead -- each 3x3 convolution that can be a Winograd one, as a Winograd and as
    a direct convolution (:mod:`.conv_implementations`); a task's weight is then its call
    count in the compilation where it is called most, and a kernel the model's build does
    not call is named ``<its name in that compilation>_alt``, its ``alternative_of`` the
    model's kernels it would replace. ``choose_winograd``: the tasks of the
    build making these Winograd choices (``ConvertLayoutNCHWc``'s ``choose``)."""
    if not isinstance(target, Target):
        target = Target(target)
    relax_mod = _as_relax_module(mod, params)
    fused = [_fuse(relax_mod, target, choose_winograd)]
    if alternatives:
        from workbench.meta_schedule.conv_implementations import implementation_variants
        variants = implementation_variants(relax_mod, target)
        if variants and variants["all"][1].candidates:
            fused += [m for m, _ in variants.values()]
    equality = ModuleEquality(module_equality)
    tasks = StructuralSet(key=lambda task: task.dispatched[0], hash=equality.hash,
                          equal=equality.equal)
    names: set[str] = set()
    model_sites = [name for _, name, _ in _call_sites(fused[0])]
    for k, one in enumerate(fused):
        counterparts = _counterparts(one, model_sites) if k else {}
        if k and not counterparts:
            logger.warning("extract_tasks: an alternative compilation does not line up with "
                           "the model's; its kernels are left out")
            continue
        for task in _tasks_of(one, target, equality):
            task_mod = task.dispatched[0]
            shash = equality.hash(task_mod)
            seen = tasks.find(task_mod, shash)
            if seen is not None:
                seen.weight = max(seen.weight, task.weight)
                continue
            if k:   # an alternative: the model's build has no kernel of this name
                task.alternative_of = list(dict.fromkeys(
                    r for n in task.kernel_names for r in counterparts.get(n, ())))
                task.task_name = _unused_name(task.task_name, names)
                task.kernel_names = [task.task_name]
            names.update(task.kernel_names)
            tasks.add(task, shash)
    return list(tasks)


def _counterparts(fused: IRModule, model_sites: list[str]) -> dict[str, list[str]]:
    """For each kernel ``fused`` calls, the model's kernels at the same call sites (the two
    compilations differ only in implementations, so their call sites line up)."""
    sites = [name for _, name, _ in _call_sites(fused)]
    out: dict[str, list[str]] = {}
    if len(sites) == len(model_sites):
        for mine, model in zip(sites, model_sites):
            if model not in out.setdefault(mine, []):
                out[mine].append(model)
    return out


def _unused_name(name: str, names: set[str]) -> str:
    """``name_alt``, ``name_alt2``, ...: the first not in ``names`` (another compilation's
    kernels are numbered on their own, so its names may be the model's for other kernels)."""
    out, k = f"{name}_alt", 1
    while out in names:
        k += 1
        out = f"{name}_alt{k}"
    return out


def _tasks_of(fused: IRModule, target: Target, equality: ModuleEquality
              ) -> list[ExtractedTask]:
    """The distinct kernels a fused module calls, weighted by their call counts."""
    tasks = StructuralSet(key=lambda task: task.dispatched[0], hash=equality.hash,
                          equal=equality.equal)
    for _, name, layer in _call_sites(fused):
        func = fused[name]
        if not isinstance(func, PrimFunc):
            continue
        task_mod = task_module(func)
        shash = equality.hash(task_mod)
        task = tasks.find(task_mod, shash)
        if task is None:
            task = ExtractedTask(name, task_mod, target, [task_mod], 1)
            tasks.add(task, shash)
        else:
            task.weight += 1
            if name not in task.kernel_names:
                task.kernel_names.append(name)
        if layer:
            task.layers.append(layer)
    return list(tasks)


def _ranking_names(op_names: Any) -> list[str] | None:
    """The kernel names of a roofline ranking: the ``Kernel`` index of a DataFrame or Series
    cut from it, or that index itself (``tune_next``); None for anything else (plain
    strings)."""
    module = type(op_names).__module__ or ""
    if not module.startswith("pandas"):
        return None
    from workbench.meta_schedule.roofline import KERNEL_INDEX
    index = getattr(op_names, "index", None)
    if index is not None and getattr(index, "name", None) == KERNEL_INDEX:
        return [str(n) for n in index]
    if hasattr(op_names, "columns"):
        raise TypeError(f"op_names: a DataFrame must be a roofline ranking (index named "
                        f"{KERNEL_INDEX!r}), got an index named {index.name!r}")
    if getattr(op_names, "name", None) == KERNEL_INDEX:
        return [str(n) for n in op_names]
    return None


def select_tasks(tasks: Sequence[ExtractedTask], op_names: Any) -> list[ExtractedTask]:
    """The tasks ``op_names`` asks for (``tune_relax``'s filter).

    - None: all of them;
    - a roofline ranking (a DataFrame with a ``Kernel`` index, a column of it, that index,
      or ``tune_next(...)``): exactly the tasks of those kernels, in ranking order; a name
      that is no task's kernel raises ValueError naming it and the kernels there are;
    - strings: tasks whose name, or one of whose kernels' names, contains one of them (TVM's
      rule); a string matching nothing is logged as a warning.

    An alternative implementation's task (``alternative_of``, from ``extract_tasks(...,
    alternatives=True)``) is chosen with the model's kernels it would replace, never by its
    own name.
    """
    if op_names is None:
        return list(tasks)
    model_tasks = [t for t in tasks if not t.alternative_of]
    chosen = _select_model_tasks(model_tasks, op_names)
    picked = {k for t in chosen for k in t.kernel_names}
    return chosen + [t for t in tasks if set(t.alternative_of) & picked]


def rival_tasks(tasks: Sequence[ExtractedTask]) -> list[list[int]]:
    """Per task, the indices of the tasks in ``tasks`` that compute its layers another way: an
    alternative's (``alternative_of``) are the model's tasks whose kernels it would replace,
    and a model task's are the alternatives of its kernels (``tune_tasks(task_rivals=)``)."""
    out = []
    for task in tasks:
        mine = set(task.alternative_of) if task.alternative_of else set(task.kernel_names)
        out.append([j for j, other in enumerate(tasks)
                    if bool(other.alternative_of) != bool(task.alternative_of)
                    and mine & set(other.kernel_names if task.alternative_of
                                   else other.alternative_of)])
    return out


def _select_model_tasks(tasks: Sequence[ExtractedTask], op_names: Any) -> list[ExtractedTask]:
    """:func:`select_tasks` among the model's own kernels."""
    exact = _ranking_names(op_names)
    if exact is not None:
        by_kernel = {k: t for t in tasks for k in t.kernel_names}
        unknown = [n for n in exact if n not in by_kernel]
        if unknown:
            raise ValueError(f"op_names: no task computes the kernel(s) {unknown}; the "
                             f"model's kernels are {sorted(by_kernel)} (was the ranking made "
                             "from a profile of this model, built for this target?)")
        if not exact:
            raise ValueError("op_names: the ranking names no kernel (empty)")
        return list({id(by_kernel[n]): by_kernel[n] for n in exact}.values())
    if isinstance(op_names, str) or not all(isinstance(o, str) for o in op_names):
        raise TypeError(f"op_names must be a list of str or a roofline ranking, got "
                        f"{op_names!r}")
    chosen = [t for t in tasks
              if any(op in k for op in op_names for k in t.kernel_names)]
    unmatched = [op for op in op_names
                 if not any(op in k for t in tasks for k in t.kernel_names)]
    if unmatched:
        logger.warning("tune_relax: op_names %s match no task (tasks: %s)", unmatched,
                       ", ".join(t.task_name for t in tasks))
    return chosen


def _is_scheduled(task: ExtractedTask) -> bool:
    """Is the task's kernel scheduled already (nothing to tune)?"""
    return bool(task.dispatched[0]["main"].attrs.get("tir.is_scheduled"))


def _is_static(task_mod: IRModule) -> bool:
    from workbench.tir.expr import IntImm
    func = task_mod["main"]
    return all(isinstance(d, (int, IntImm)) for b in func.buffers for d in b.shape)


def extracted_tasks_to_tune_contexts(tasks: Sequence[ExtractedTask], work_dir: str,
                                     space: Any = "post-order-apply",
                                     strategy: Any = "evolutionary",
                                     num_threads: int | str = "physical",
                                     seed: int | None = None) -> tuple[list[TuneContext],
                                                                       list[float]]:
    """One cloned TuneContext per task (skipping already-scheduled ones), and the weights."""
    tasks = [t for t in tasks if not _is_scheduled(t)]
    loggers = get_loggers_from_work_dir(work_dir, [t.task_name for t in tasks])
    contexts, weights = [], []
    for task, task_logger, rand_state in zip(tasks, loggers, fork_seed(seed, len(tasks))):
        ctx = TuneContext(task.dispatched[0], target=task.target, space_generator=space,
                          search_strategy=strategy, task_name=task.task_name,
                          rand_state=rand_state, num_threads=num_threads, logger=task_logger)
        contexts.append(ctx.clone())
        weights.append(float(task.weight))
    return contexts, weights


def tune_relax(mod: Any, params: Mapping[str, Any] | None, target: str | Target, work_dir: str,
               max_trials_global: int, *, max_trials_per_task: int | None = None,
               op_names: Any = None, num_trials_per_iter: int = 64,
               builder: Any = "local", runner: Any = "local", database: Any = "json",
               cost_model: Any = "xgb", measure_callbacks: Any = "default",
               task_scheduler: Any = "gradient", space: Any = "post-order-apply",
               strategy: Any = "evolutionary", seed: int | None = None,
               module_equality: str = "structural", num_tuning_cores: int | str = "physical",
               dashboard: Any = False, rpc_config: Any = None,
               default_schedule_first: bool | None = None) -> Database:
    """Tune the fused kernels of a Relax model; return the database (see module docstring).

    ``op_names`` keeps only tasks whose name contains one of the given strings (TVM), or,
    given a ranking of :func:`workbench.meta_schedule.roofline.roofline` (the DataFrame, a
    part of it such as ``ranking.head(3)``, its index, or ``tune_next(ranking, n)``), exactly
    the tasks of those kernels (:func:`select_tasks`).
    Kernels with symbolic shapes are skipped with a warning. ``runner="rpc"`` /
    ``builder="dask"`` with ``rpc_config`` as in :func:`tune_tasks`. ``dashboard`` as in
    :func:`tune_tasks` (one row per task, with its layers). Records already in the database
    count towards both budgets (module docstring): the same call again resumes.

    ``default_schedule_first`` (Workbench; default: the option ``default_schedule``, which
    decides whether builds give untuned kernels default schedules): a task without records
    measures its default schedule (``workbench.dlight``) as its first trial, so its best
    record never measured slower than what the build would use without one, then the same
    rule's neighbouring register tiles (option ``ms_default_variants`` candidates in all, at
    most half the task's budget: its cap or its even share of the global one) before its
    search starts.

    A 3x3 convolution that can be a Winograd one is tuned both ways (``extract_tasks(...,
    alternatives=True)``, when the option ``winograd`` is on); ``compile_relax`` then builds
    each with the implementation whose best record ran faster. The two are rivals
    (:func:`rival_tasks`): once one runs clearly faster, the other is tuned only when no
    other task is left."""
    if not isinstance(target, Target):
        target = Target(target)
    from workbench import options
    tasks = extract_tasks(mod, target, params, module_equality=module_equality,
                          alternatives=bool(options.get("winograd")))
    tasks = select_tasks(tasks, op_names)
    static = [t for t in tasks if _is_static(t.dispatched[0])]
    skipped = [t.task_name for t in tasks if t not in static]
    if skipped:
        logger.warning("tune_relax: skipping kernels with symbolic shapes: %s",
                       ", ".join(skipped))
    if not static:
        raise ValueError("tune_relax: no tunable task (all kernels filtered out or symbolic)")
    if max_trials_per_task is None:
        max_trials_per_task = max_trials_global
    database = open_database(database, work_dir, module_equality, "tune_relax")
    done = trials_done(database, [t.dispatched[0] for t in static], module_equality)
    left_global = max_trials_global - sum(min(d, max_trials_per_task) for d in done)
    todo = [(t, max_trials_per_task - d) for t, d in zip(static, done)
            if d < max_trials_per_task and not _is_scheduled(t)]
    if left_global <= 0 or not todo:
        logger.warning("tune_relax: the database holds %d trial(s) of these %d task(s): the "
                       "trial budget is used up; nothing to tune", sum(done), len(static))
        return database
    contexts, weights = extracted_tasks_to_tune_contexts(
        [t for t, _ in todo], work_dir, space, strategy, num_threads=num_tuning_cores,
        seed=seed)
    if any(done):   # logged once the loggers write to this work dir
        logger.info("tune_relax: the database holds %d trial(s) of these %d task(s); %d of "
                    "the global budget left for %d task(s)", sum(done), len(static),
                    left_global, len(todo))
    if default_schedule_first is None:
        default_schedule_first = bool(options.get("default_schedule"))
    share = seed_budget(max_trials_per_task, left_global, len(todo))
    for ctx, (_, cap) in zip(contexts, todo):
        if cap < max_trials_per_task:   # resumed: its first trials (the seed among them) ran
            ctx.search_strategy = CappedStrategy(ctx.search_strategy, cap)
        elif default_schedule_first:
            seeds = default_schedule_seeds(ctx, share, "tune_relax")
            if seeds:
                ctx.search_strategy = SeededStrategy(ctx.search_strategy, seeds)
    if dashboard:
        dashboard = _dashboard_with_layers(dashboard, [t for t, _ in todo])
    return tune_tasks(tasks=contexts, task_weights=weights, work_dir=work_dir,
                      max_trials_global=left_global,
                      max_trials_per_task=max_trials_per_task,
                      num_trials_per_iter=num_trials_per_iter, builder=builder, runner=runner,
                      database=database, cost_model=cost_model,
                      measure_callbacks=measure_callbacks, task_scheduler=task_scheduler,
                      module_equality=module_equality, dashboard=dashboard,
                      rpc_config=rpc_config, task_rivals=rival_tasks([t for t, _ in todo]))


def _dashboard_with_layers(dashboard: Any, tasks: Sequence[ExtractedTask]) -> Any:
    """The dashboard ``tune_tasks`` will attach, told which layers each task runs for (the
    callback object is built by a higher floor: :mod:`.dashboard_hook`)."""
    layers = {t.task_name: t.layers for t in tasks if t.layers}
    if not layers:
        return dashboard
    from workbench.meta_schedule.dashboard_hook import as_dashboard
    dashboard = as_dashboard(dashboard)
    dashboard.set_task_layers(layers)
    return dashboard


def compile_relax(database: Database, mod: Any, target: str | Target,
                  params: Mapping[str, Any] | None = None, *,
                  check_inputs: Sequence[Any] | None = None, **build_kwargs: Any) -> Any:
    """``relax.build`` with every fused kernel that has a record in ``database`` replaced by
    its best schedule; returns the VM Executable (``exe.lowered_mod`` shows the kernels).
    With ``params`` bound, weights that a tuned kernel re-lays out (RewriteLayout) are packed
    once here (PrepackConstantWeights) instead of on every call. Each 3x3 convolution that
    can be a Winograd one takes the implementation whose kernel's record ran faster
    (:mod:`.conv_implementations`); ``exe.conv_implementations`` is the table of those
    choices (with the default pipeline).

    ``check_inputs`` (Workbench): the entry function's arguments; each tuned kernel is then
    timed inside the model against its default schedule first and the records that lose there
    are not used (:func:`workbench.meta_schedule.in_model.check_in_model`; its table is
    ``exe.in_model_check``). Not with ``build_kwargs``."""
    if not isinstance(target, Target):
        target = Target(target)
    if check_inputs is not None:
        if build_kwargs:
            raise ValueError(f"compile_relax: check_inputs takes the default build; got "
                             f"build arguments {sorted(build_kwargs)}")
        from workbench.meta_schedule.in_model import check_in_model
        from workbench.relax.vm_build import entry_function
        relax_mod = _as_relax_module(mod, params)
        check = check_in_model(database, relax_mod, target, check_inputs,
                               func_name=entry_function(relax_mod))
        check.exe.in_model_check = check
        return check.exe
    return build_tuned(database, _as_relax_module(mod, params), target, **build_kwargs)


def build_tuned(database: Database, mod: IRModule, target: Target, choose_winograd: Any = None,
                **build_kwargs: Any) -> Any:
    """``relax.build(mod, target, database=database, **build_kwargs)``, the default pipeline's
    Winograd choices made by ``choose_winograd`` (default: a new
    :class:`~.conv_implementations.WinogradFromRecords` of ``database``, whose table becomes
    ``exe.conv_implementations``)."""
    from workbench.meta_schedule.conv_implementations import WinogradFromRecords
    from workbench.relax.pipeline import get_default_pipeline
    from workbench.relax.vm_build import build
    with database:
        if build_kwargs.get("relax_pipeline") not in (None, "default"):
            return build(mod, target, database=database, **build_kwargs)
        build_kwargs.pop("relax_pipeline", None)
        chooser = choose_winograd if choose_winograd is not None else \
            WinogradFromRecords(database, target)
        pipeline = get_default_pipeline(
            target, fuse=build_kwargs.pop("fuse", True),
            plan_memory=build_kwargs.pop("plan_memory", True), database=database,
            default_schedule=build_kwargs.pop("default_schedule", None),
            choose_winograd=chooser)
        exe = build(mod, target, relax_pipeline=pipeline, **build_kwargs)
    if isinstance(chooser, WinogradFromRecords):
        exe.conv_implementations = chooser.table
    return exe

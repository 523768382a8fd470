"""TVM's named Relax pipelines: ``relax.get_pipeline(name, **kwargs)`` and
``@relax.register_pipeline(name)``, with TVM's contents mapped onto Workbench's passes.

- ``"zero"`` (``enable_warning=False``): LegalizeOps, AnnotateTIROpPattern, FoldConstant,
  FuseOps, FuseTIR, then ``MetaScheduleApplyDatabase`` if a tuning database is in scope
  (``with database:``). The graph stays a graph: ``relax.build`` lowers it after.
- ``"default"``: Workbench's whole build pipeline (:func:`workbench.relax.pipeline
  .get_default_pipeline`: graph rewrites, legalization, fusion, tuned or default schedules,
  lowering to VM form). Every pass leaves alone what an earlier run (``"zero"``) already did.
  Keyword arguments go to ``get_default_pipeline`` (``target``, ``fuse``, ...).
- ``"default_build"``: TVM's build pipeline without fusion (LegalizeOps, then lowering to VM
  form), plus Workbench's default schedules for the kernels (the option ``default_schedule``).
  In TVM ``"default"`` is this same list; Workbench's ``"default"`` fuses as well.
- ``"static_shape_tuning"`` (``total_trials``, ``target``, ``work_dir="tuning_logs"``,
  ``cpu_weight_prepack=False``): under ``with target:``, CanonicalizeBindings, the zero
  pipeline, ``MetaScheduleTuneIRMod({}, work_dir, total_trials)`` (skipped when 0 trials) and
  ``MetaScheduleApplyDatabase(work_dir)``; ``cpu_weight_prepack=True`` adds
  PrepackConstantWeights (constant weights of layout-rewritten kernels packed at compile time;
  TVM's ``main_transform_params`` function is not made).

The tuner's passes come from ``relax.transform`` by attribute, so this module does not import
the tuner (floor 5) until a tuning pipeline is built.
"""
from __future__ import annotations

from typing import Any, Callable

from workbench.ir.module import IRModule
from workbench.ir.transform import Pass, PassContext, Sequential, module_pass
from workbench.relax.pipeline import Pipeline, _current_database, get_default_pipeline
from workbench.target import Target

__all__ = ["get_pipeline", "register_pipeline", "zero_pipeline", "default_build_pipeline",
           "static_shape_tuning_pipeline", "PIPELINE_MAP"]


def zero_pipeline(*, enable_warning: bool = False) -> Pass:
    """Legalize and fuse, then apply the database in scope, if any (module docstring)."""
    from workbench.relax import transform as T
    seq = Pipeline([T.LegalizeOps(enable_warning=enable_warning), T.AnnotateTIROpPattern(),
                    T.FoldConstant(Target.current()), T.FuseOps(), T.FuseTIR()], "zero")

    def f_zero_pipeline(mod: IRModule, ctx: PassContext) -> IRModule:
        mod = seq(mod)
        if _current_database() is not None:  # decided when it runs, as in TVM
            mod = T.MetaScheduleApplyDatabase(enable_warning=enable_warning)(mod)
        return mod

    return module_pass(f_zero_pipeline, opt_level=0)


def default_build_pipeline() -> Pass:
    """TVM's build pipeline (no fusion) mapped onto Workbench's passes (module docstring)."""
    from workbench import options
    from workbench.relax import transform as T
    passes: list[Pass] = [T.LegalizeOps()]
    if options.get("default_schedule"):
        from workbench.dlight import DefaultCPUSchedule
        passes.append(DefaultCPUSchedule(Target.current()))
    passes += [T.PrepackConstantWeights(), T.ToNonDataflow(), T.CallTIRRewrite(),
               T.StaticPlanBlockMemory(), T.LowerAllocTensor(), T.VMShapeLower(),
               T.AttachGlobalSymbol()]
    return Pipeline(passes, "default_build")


def _default_pipeline(**kwargs: Any) -> Pass:
    kwargs.setdefault("target", Target.current())
    return get_default_pipeline(**kwargs)


def static_shape_tuning_pipeline(total_trials: int, target: Any,
                                 work_dir: str = "tuning_logs",
                                 cpu_weight_prepack: bool = False) -> Pass:
    """Tune every kernel of a static-shape model and apply the records (module docstring)."""
    if not isinstance(total_trials, int) or total_trials < 0:
        raise ValueError(f"static_shape_tuning: total_trials must be an int >= 0, got "
                         f"{total_trials!r}")
    if target is None:
        raise ValueError("static_shape_tuning: target is required (e.g. target='llvm')")
    target = target if isinstance(target, Target) else Target(target)

    def f_static_shape_tuning(mod: IRModule, ctx: PassContext) -> IRModule:
        from workbench.relax import transform as T
        with target:  # the tuning passes read the target when they are made
            post = [T.PrepackConstantWeights()] if cpu_weight_prepack else []
            tune = T.MetaScheduleTuneIRMod({}, work_dir, total_trials) if total_trials > 0 \
                else Sequential([])
            return Sequential([T.CanonicalizeBindings(), zero_pipeline(), tune,
                               T.MetaScheduleApplyDatabase(work_dir), *post],
                              name="static_shape_tuning")(mod)

    return module_pass(f_static_shape_tuning, opt_level=0)


PIPELINE_MAP: dict[str, Callable[..., Pass]] = {
    "zero": zero_pipeline,
    "default": _default_pipeline,
    "default_build": default_build_pipeline,
    "static_shape_tuning": static_shape_tuning_pipeline,
}


def get_pipeline(name: str = "zero", **kwargs: Any) -> Pass:
    """The pipeline registered as ``name``, made with ``kwargs``."""
    if name not in PIPELINE_MAP:
        raise ValueError(f"unknown pipeline {name!r}; the registered pipelines are "
                         f"{list(PIPELINE_MAP)} (add one with @relax.register_pipeline)")
    return PIPELINE_MAP[name](**kwargs)


def register_pipeline(name: str) -> Callable[[Callable[..., Pass]], Callable[..., Pass]]:
    """Decorator: register a function making a pipeline under ``name`` (a name may be
    registered once)."""
    if not isinstance(name, str) or not name:
        raise TypeError(f"register_pipeline: name must be a non-empty string, got {name!r}")
    if name in PIPELINE_MAP:
        raise ValueError(f"pipeline {name!r} is already registered")

    def register(func: Callable[..., Pass]) -> Callable[..., Pass]:
        if not callable(func):
            raise TypeError(f"register_pipeline({name!r}): expected a function, got "
                            f"{type(func).__name__}")
        PIPELINE_MAP[name] = func
        return func

    return register

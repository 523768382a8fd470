"""Workbench: a tensor-program compiler, runtime and auto-tuner for Jupyter, with TVM's names.

Typical use::

    import workbench as wb
    from workbench import te
    A = te.placeholder((1024,), name="A")
    B = te.compute(A.shape, lambda i: A[i] * 2.0, name="B")
    rt = wb.compile(te.create_prim_func([A, B]), target="llvm")
    a = wb.nd.array(np.ones(1024, "float32")); b = wb.nd.empty((1024,), "float32")
    rt["main"](a, b)
"""
from workbench import nd, options, runtime
from workbench.runtime import Device, cpu, device, get_global_func, register_func
from workbench.ir import IRModule
from workbench import instrument, transform
from workbench import ir, target, te, tir, topi, relax
from workbench import rpc  # Dask is imported only when a cluster is used
from workbench import script  # TVMScript: tvm.script.ir_module, tvm.script.from_source
from workbench.target import Target
from workbench.driver import build, compile, lower

__version__ = "0.1.0"


def _load_widgets_on_first_use(name: str) -> None:
    """Register, under the global function ``name``, a loader that imports the notebook
    widgets (whose import registers the real ``name``) and calls it. This package is the one
    place above every floor: the tuner (floor 5) looks its dashboard up by name
    (``meta_schedule.dashboard_hook``) and never imports the widgets (floor 7) itself."""
    def load(*args: object) -> object:
        import workbench.widgets  # noqa: F401 - its import replaces this loader
        real = get_global_func(name)
        if real is wrapper:
            raise RuntimeError(f"importing workbench.widgets did not register {name!r}")
        return real(*args)

    register_func(name, load)
    wrapper = get_global_func(name)


for _name in ("meta_schedule.as_dashboard", "meta_schedule.attach_dashboard"):
    _load_widgets_on_first_use(_name)
del _name

# Modules that register options and are not imported above: imported when an option of
# theirs is looked up, or all options are listed (tests/runtime/test_options.py keeps this
# list complete).
options.declared_in(
    "workbench.codegen.isolation", "workbench.rpc.cluster", "workbench.rpc.config",
    "workbench.meta_schedule.confirm", "workbench.meta_schedule.cost_model.pretrained",
    "workbench.meta_schedule.database.json_database",
    "workbench.meta_schedule.post_optimization.post_opt",
    "workbench.meta_schedule.runner.utils", "workbench.meta_schedule.task_budget",
    "workbench.meta_schedule.task_scheduler.rivals")


def __getattr__(name: str) -> object:
    """``workbench.testing`` and ``workbench.contrib`` on first use: ``testing`` imports
    pytest, so it is not loaded with the package (TVM's ``import tvm.testing`` works too)."""
    if name in ("testing", "contrib"):
        import importlib
        return importlib.import_module(f"workbench.{name}")
    raise AttributeError(f"module 'workbench' has no attribute {name!r}")


__all__ = [
    "nd", "options", "runtime", "Device", "cpu", "device", "get_global_func", "register_func",
    "IRModule", "instrument", "transform", "ir", "target", "te", "tir", "topi", "relax", "rpc", "Target", "build",
    "compile", "lower",
]

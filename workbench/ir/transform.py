"""The pass infrastructure (TVM's ``tvm.transform`` / ``tvm.ir.transform``).

A :class:`Pass` maps an IRModule to an IRModule. Calling it (``pass_(mod)``) runs it under the
current :class:`PassContext` (the innermost ``with PassContext(...)``, else a default one with
``opt_level=2``): every instrument of the context is asked ``should_run`` (skipped for passes
the context requires), then sees ``run_before_pass``, the pass runs, and every instrument sees
``run_after_pass``. A :class:`Sequential` runs its passes in order and is where optimisation
levels apply, as in TVM: a member pass runs when it is not in ``disabled_pass`` and either is
in ``required_pass`` or has ``opt_level <=`` the context's; the passes a member names in its
``required`` list run before it. A pass called on its own is not gated by its level.

Passes are written three ways:

- a class deriving :class:`Pass` with a ``name`` (and optionally ``opt_level`` / ``required``)
  class attribute and ``transform_module(mod, ctx)`` -- how the library's passes are written;
- ``@module_pass(opt_level=...)`` on a function ``(mod, ctx) -> mod``;
- ``@module_pass(opt_level=...)`` on a class with ``transform_module(self, mod, ctx)``: the
  decorated class's instances are passes.

``relax.transform.function_pass`` and ``tir.transform.prim_func_pass`` are the per-function
forms, built on :func:`make_pass_decorator`.
"""
from __future__ import annotations

import functools
import inspect
import re
import threading
from dataclasses import dataclass, field
from typing import Any, Callable, Iterable, Mapping, Sequence

from workbench.ir.module import IRModule

__all__ = ["PassInfo", "PassContext", "Pass", "ModulePass", "Sequential", "module_pass",
           "PrintIR", "ApplyPassToFunction", "make_pass_decorator", "register_pass_config"]


@dataclass(frozen=True)
class PassInfo:
    """What the infrastructure knows of a pass: its optimisation level, name, and the names of
    the passes that must run before it (inside a :class:`Sequential`)."""

    opt_level: int
    name: str
    required: tuple[str, ...] = ()
    traceable: bool = False

    def __init__(self, opt_level: int, name: str, required: Iterable[str] | None = None,
                 traceable: bool = False) -> None:
        if not isinstance(opt_level, int) or isinstance(opt_level, bool):
            raise TypeError(f"PassInfo {name!r}: opt_level must be an int, got {opt_level!r}")
        object.__setattr__(self, "opt_level", opt_level)
        object.__setattr__(self, "name", str(name))
        object.__setattr__(self, "required", _names(required, f"pass {name!r}: required"))
        object.__setattr__(self, "traceable", bool(traceable))

    def __str__(self) -> str:
        return (f"The meta data of the pass - pass name: {self.name}, opt_level: "
                f"{self.opt_level}, required passes: {list(self.required)}")


def _names(value: Any, what: str) -> tuple[str, ...]:
    if value is None:
        return ()
    if isinstance(value, str) or not isinstance(value, (list, tuple, set, frozenset)):
        raise TypeError(f"{what} must be a list, tuple or set of pass names, got {value!r}")
    return tuple(str(v) for v in value)


# ---- configuration ------------------------------------------------------------------------

# Config keys a PassContext accepts (TVM rejects unknown keys too): name -> type. TVM's common
# keys are listed so that code written for TVM runs; the ones Workbench reads are marked.
_CONFIGS: dict[str, type] = {
    "tir.disable_vectorize": bool, "tir.disable_assert": bool, "tir.noalias": bool,
    "tir.enable_debug": bool, "tir.instrument_bound_checkers": bool,
    "tir.UnrollLoop": dict, "tir.LoopPartition": dict, "tir.HoistIfThenElse": dict,
    "tir.Simplify": dict, "tir.disable_storage_rewrite": bool, "tir.is_entry_func": bool,
    "tir.add_lower_pass": list, "tir.debug_keep_trivial_loop": bool,
    "tir.enable_equiv_terms_in_cse_tir": bool, "tir.disable_cse_tir": bool,
    "tir.ptx_ldg32": bool, "tir.use_async_copy": bool, "tir.merge_static_smem": bool,
    "relax.backend.use_cuda_graph": bool, "relax.FuseOps.max_depth": int,
    "relax.fallback_device_type": int, "relax.remove_unused_parameters": bool,
    "testing.immutable_module": bool,
}


def register_pass_config(key: str, value_type: type) -> None:
    """Let ``PassContext(config={key: ...})`` accept ``key`` (values of ``value_type``)."""
    _CONFIGS[key] = value_type


# ---- the context ---------------------------------------------------------------------------

_local = threading.local()


def _stack() -> list["PassContext"]:
    stack = getattr(_local, "stack", None)
    if stack is None:
        stack = _local.stack = []
    return stack


class PassContext:
    """The settings passes run under (``with PassContext(opt_level=3): ...``).

    ``opt_level``: the highest level a :class:`Sequential` runs; ``required_pass`` /
    ``disabled_pass``: names always / never run by a Sequential (disabled wins);
    ``instruments``: :class:`workbench.instrument.PassInstrument` objects that see every pass
    run in the context (``enter_pass_ctx`` on ``with``, ``exit_pass_ctx`` on leaving);
    ``config``: options by TVM's names (unknown keys raise, listing the known ones)."""

    def __init__(self, opt_level: int = 2, required_pass: Iterable[str] | None = None,
                 disabled_pass: Iterable[str] | None = None,
                 instruments: Sequence[Any] | None = None,
                 config: Mapping[str, Any] | None = None, trace: Any = None,
                 trace_stack: Any = None, make_traceable: Any = None,
                 num_evals: int = 0, tuning_api_database: Any = None) -> None:
        if not isinstance(opt_level, int) or isinstance(opt_level, bool):
            raise TypeError(f"PassContext: opt_level must be an int, got {opt_level!r}")
        self.opt_level = opt_level
        self.required_pass = _names(required_pass, "PassContext: required_pass")
        self.disabled_pass = _names(disabled_pass, "PassContext: disabled_pass")
        self.instruments = _check_instruments(instruments)
        self.config = _check_config(config)

    # -- scope ------------------------------------------------------------------------------
    def __enter__(self) -> "PassContext":
        self._enter_instruments()
        _stack().append(self)
        return self

    def __exit__(self, *exc: Any) -> None:
        stack = _stack()
        if not stack or stack[-1] is not self:
            raise RuntimeError("PassContext: exited out of order (not the innermost context)")
        stack.pop()
        self._exit_instruments()

    @staticmethod
    def current() -> "PassContext":
        """The innermost ``with PassContext`` in this thread, else the default context."""
        stack = _stack()
        if stack:
            return stack[-1]
        default = getattr(_local, "default", None)
        if default is None:
            default = _local.default = PassContext()
        return default

    @staticmethod
    def list_configs() -> dict[str, dict[str, str]]:
        """The config keys a PassContext accepts, with their types."""
        return {k: {"type": t.__name__} for k, t in sorted(_CONFIGS.items())}

    def override_instruments(self, instruments: Sequence[Any] | None) -> None:
        """Replace the instruments: the old ones see ``exit_pass_ctx``, the new ones
        ``enter_pass_ctx``."""
        new = _check_instruments(instruments)
        self._exit_instruments()
        self.instruments = new
        self._enter_instruments()

    # -- what runs --------------------------------------------------------------------------
    def pass_enabled(self, info: PassInfo) -> bool:
        """Would a Sequential run a pass with ``info`` under this context?"""
        if info.name in self.disabled_pass:
            return False
        if info.name in self.required_pass:
            return True
        return info.opt_level <= self.opt_level

    def _enter_instruments(self) -> None:
        entered: list[Any] = []
        try:
            for inst in self.instruments:
                inst.enter_pass_ctx()
                entered.append(inst)
        except BaseException:
            # TVM's rule: an instrument that fails to enter disables instrumentation; the
            # ones already entered are exited (in reverse) so they can release what they hold.
            for inst in reversed(entered):
                inst.exit_pass_ctx()
            self.instruments = []
            raise

    def _exit_instruments(self) -> None:
        try:
            for inst in self.instruments:
                inst.exit_pass_ctx()
        except BaseException:
            self.instruments = []
            raise

    def _before(self, mod: IRModule, info: PassInfo) -> bool:
        if not self.instruments:
            return True
        should_run = True
        if info.name not in self.required_pass:
            for inst in self.instruments:  # every instrument is asked (no short cut), as TVM
                should_run = bool(inst.should_run(mod, info)) and should_run
        if should_run:
            for inst in self.instruments:
                inst.run_before_pass(mod, info)
        return should_run

    def _after(self, mod: IRModule, info: PassInfo) -> None:
        for inst in self.instruments:
            inst.run_after_pass(mod, info)

    def __repr__(self) -> str:
        return (f"PassContext(opt_level={self.opt_level}, required_pass="
                f"{list(self.required_pass)}, disabled_pass={list(self.disabled_pass)}, "
                f"instruments={self.instruments!r}, config={self.config!r})")


def _check_instruments(instruments: Any) -> list[Any]:
    if instruments is None:
        return []
    if not isinstance(instruments, (list, tuple, set)):
        raise TypeError("PassContext: instruments must be a list/tuple/set of PassInstrument, "
                        f"got {type(instruments).__name__}")
    from workbench.ir.instrument import PassInstrument
    out = list(instruments)
    for i, inst in enumerate(out):
        if not isinstance(inst, PassInstrument):
            raise TypeError(f"PassContext: instruments[{i}] is a {type(inst).__name__}, not a "
                            "PassInstrument (derive from workbench.instrument.PassInstrument or "
                            "decorate the class with @workbench.instrument.pass_instrument)")
    return out


def _check_config(config: Any) -> dict[str, Any]:
    if config is None:
        return {}
    if not isinstance(config, Mapping):
        raise TypeError(f"PassContext: config must be a dict, got {type(config).__name__}")
    for key in config:
        if key not in _CONFIGS:
            raise AttributeError(f"PassContext: invalid config option {key!r}; the known "
                                 f"options are {sorted(_CONFIGS)} (add one with "
                                 "register_pass_config)")
    return dict(config)


# Passes a ``required`` list can name: every Pass class with a ``name`` and a constructor that
# takes no arguments registers itself; others register with register_pass.
_REGISTRY: dict[str, Callable[[], Pass]] = {}


def register_pass(name: str, factory: Callable[[], Pass]) -> None:
    """Let a pass's ``required`` list name ``name`` (``factory()`` makes the pass)."""
    _REGISTRY[name] = factory


def get_pass(name: str) -> Pass:
    """The registered pass called ``name`` (for ``required`` lists)."""
    if name not in _REGISTRY:
        raise ValueError(f"required pass {name!r} is not registered; known: "
                         f"{sorted(_REGISTRY)}")
    return _REGISTRY[name]()


def _register_subclass(cls: type) -> None:
    name = cls.__dict__.get("name")
    if isinstance(name, str) and name:
        try:
            params = inspect.signature(cls).parameters.values()
        except (TypeError, ValueError):
            return
        if all(p.default is not p.empty or p.kind in (p.VAR_POSITIONAL, p.VAR_KEYWORD)
               for p in params):
            _REGISTRY.setdefault(name, cls)


# ---- passes --------------------------------------------------------------------------------

class Pass:
    """The base of all passes: ``pass_(mod) -> mod`` under :meth:`PassContext.current`.

    A subclass sets ``name`` (and ``opt_level``, ``required`` if not 0 / none) and implements
    :meth:`transform_module`; ``info`` is built from them."""

    name: str = ""
    opt_level: int = 0
    required: tuple[str, ...] = ()

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        _register_subclass(cls)

    @property
    def info(self) -> PassInfo:
        return PassInfo(self.opt_level, self.name or type(self).__name__, self.required)

    def transform_module(self, mod: IRModule, ctx: PassContext) -> IRModule:
        raise NotImplementedError(f"{type(self).__name__} does not implement transform_module")

    def __call__(self, mod: IRModule) -> IRModule:
        return self._run(mod, PassContext.current(), self.transform_module)

    def _run(self, mod: IRModule, ctx: PassContext,
             body: Callable[[IRModule, PassContext], IRModule]) -> IRModule:
        """Run ``body`` as this pass: instruments before, the body, instruments after."""
        info = self.info
        if not isinstance(mod, IRModule):
            raise TypeError(f"{info.name} expects an IRModule, got {type(mod).__name__}")
        if not ctx._before(mod, info):
            return mod
        out = body(mod, ctx)
        if not isinstance(out, IRModule):
            raise TypeError(f"pass {info.name} returned a {type(out).__name__}, not an "
                            "IRModule")
        ctx._after(out, info)
        return out

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.info.name!r}, opt_level={self.info.opt_level})"


class ModulePass(Pass):
    """A pass made from a function ``(mod, ctx) -> mod`` (see :func:`module_pass`)."""

    def __init__(self, pass_func: Callable[[IRModule, PassContext], IRModule],
                 info: PassInfo) -> None:
        self.pass_func = pass_func
        self._info = info

    @property
    def info(self) -> PassInfo:
        return self._info

    @property
    def name(self) -> str:  # type: ignore[override]
        return self._info.name

    def transform_module(self, mod: IRModule, ctx: PassContext) -> IRModule:
        return self.pass_func(mod, ctx)


class Sequential(Pass):
    """Run ``passes`` in order, each gated by the context (see the module docstring). A
    Sequential is itself a pass: instruments see it, then each member it runs."""

    def __init__(self, passes: Iterable[Pass] | None = None, opt_level: int = 0,
                 name: str = "sequential", required: Iterable[str] | None = None,
                 traceable: bool = False) -> None:
        passes = [] if passes is None else passes
        if isinstance(passes, Pass):
            passes = [passes]
        if not isinstance(passes, (list, tuple)):
            raise TypeError(f"Sequential {name!r}: passes must be a list of Pass objects, got "
                            f"{type(passes).__name__}")
        for i, p in enumerate(passes):
            if not isinstance(p, Pass):
                raise TypeError(f"Sequential {name!r}: passes[{i}] is a {type(p).__name__}, "
                                "not a Pass")
        self.passes = list(passes)
        self._info = PassInfo(opt_level, name, required, traceable)

    @property
    def info(self) -> PassInfo:
        return self._info

    @property
    def name(self) -> str:  # type: ignore[override]
        return self._info.name

    def transform_module(self, mod: IRModule, ctx: PassContext) -> IRModule:
        return self._run_members(mod, ctx)

    def _run_members(self, mod: IRModule, ctx: PassContext,
                     after: Callable[[Pass, IRModule], None] | None = None) -> IRModule:
        for p in self.passes:
            if not ctx.pass_enabled(p.info):
                continue
            for req in p.info.required:
                dep = get_pass(req)
                mod = dep._run(mod, ctx, dep.transform_module)
            mod = p._run(mod, ctx, p.transform_module)
            if after is not None:
                after(p, mod)
        return mod

    def __iter__(self):
        return iter(self.passes)

    def __len__(self) -> int:
        return len(self.passes)

    def __repr__(self) -> str:
        return f"Sequential({self.name!r}, [{', '.join(p.info.name for p in self.passes)}])"


# ---- decorators -----------------------------------------------------------------------------

def make_pass_decorator(kind: str, pass_type: Callable[[Callable, PassInfo], Pass],
                        method: str, pass_func: Any, opt_level: int | None, name: str | None,
                        required: Iterable[str] | None, traceable: bool) -> Any:
    """The shared logic of ``module_pass`` / ``function_pass`` / ``prim_func_pass``: with
    ``pass_func`` the pass (or pass class) for it, else a decorator making one. A class is
    wrapped so that each instance is a pass calling the instance's ``method``."""
    if opt_level is None:
        raise ValueError(f"{kind}: opt_level is required (e.g. @{kind}(opt_level=0))")
    required = _names(required, f"{kind}: required")

    def create(arg: Any) -> Any:
        info = PassInfo(opt_level, name or getattr(arg, "__name__", kind), required, traceable)
        if inspect.isclass(arg):
            return _wrap_class(arg, info, pass_type, method, kind)
        if not callable(arg):
            raise TypeError(f"{kind}: expected a function or a class with {method}, got "
                            f"{type(arg).__name__}")
        return pass_type(arg, info)

    return create(pass_func) if pass_func is not None else create


def _wrap_class(cls: type, info: PassInfo, pass_type: Callable, method: str,
                kind: str) -> type:
    if not callable(getattr(cls, method, None)):
        raise TypeError(f"{kind}: class {cls.__name__} has no method {method}")
    base = pass_type if inspect.isclass(pass_type) else ModulePass

    class Wrapped(base):  # type: ignore[misc, valid-type]
        def __init__(self, *args: Any, **kwargs: Any) -> None:
            inst = cls(*args, **kwargs)
            base.__init__(self, getattr(inst, method), info)
            self._inst = inst

        def __getattr__(self, attr: str) -> Any:
            # Only reached for names the pass itself lacks: the user's attributes.
            if attr == "_inst":
                raise AttributeError(attr)
            return getattr(self._inst, attr)

    functools.update_wrapper(Wrapped.__init__, cls.__init__)
    Wrapped.__name__ = Wrapped.__qualname__ = cls.__name__
    Wrapped.__doc__ = cls.__doc__
    Wrapped.__module__ = cls.__module__
    return Wrapped


def module_pass(pass_func: Any = None, opt_level: int | None = None, name: str | None = None,
                required: Iterable[str] | None = None, traceable: bool = False) -> Any:
    """Make a module pass from ``pass_func(mod, ctx) -> mod``, or from a class with
    ``transform_module(self, mod, ctx)`` (then the result is a class whose instances are
    passes). Without ``pass_func``, a decorator. ``opt_level`` is required; ``name`` defaults
    to the function's or class's name."""
    return make_pass_decorator("module_pass", ModulePass, "transform_module", pass_func,
                               opt_level, name, required, traceable)


class _PrintIR(Pass):
    name = "PrintIR"

    def __init__(self, header: str = "", show_meta_data: bool = False) -> None:
        self.header = header

    def transform_module(self, mod: IRModule, ctx: PassContext) -> IRModule:
        print(f"PrintIR({self.header}):\n{mod.script()}")
        return mod


def PrintIR(header: str = "", show_meta_data: bool = False) -> Pass:  # noqa: N802 - TVM's
    """A pass that prints ``header`` and the module, and changes nothing."""
    return _PrintIR(header, show_meta_data)


@dataclass
class _ApplyToFunction(Pass):
    inner: Pass
    regex: str
    error_if_none: bool
    name: str = field(default="ApplyPassToFunction")

    def transform_module(self, mod: IRModule, ctx: PassContext) -> IRModule:
        pattern = re.compile(self.regex)
        chosen = [n for n in mod if pattern.fullmatch(n)]
        if not chosen:
            if self.error_if_none:
                raise ValueError(f"ApplyPassToFunction: no function of the module matches "
                                 f"{self.regex!r}; functions: {list(mod)}")
            return mod
        sub = IRModule({n: mod[n] for n in chosen})
        done = self.inner(sub)
        out = mod.copy()
        for n in chosen:
            if n not in done:
                del out[n]
        for n, f in done.items():
            out[n] = f
        return out


def ApplyPassToFunction(transform: Pass, func_name_regex: str,  # noqa: N802 - TVM's name
                        error_if_no_function_matches_regex: bool = False) -> Pass:
    """Run ``transform`` on the functions whose name matches ``func_name_regex`` (whole
    name) only; the other functions are left as they are."""
    if not isinstance(transform, Pass):
        raise TypeError(f"ApplyPassToFunction: expected a Pass, got {type(transform).__name__}")
    return _ApplyToFunction(transform, func_name_regex, error_if_no_function_matches_regex)

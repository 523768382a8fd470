"""``VirtualMachine``: runs an :class:`Executable` with TVM's Python contract.

Reference: runtime_vm_profiling.md section 3. Summary of the behaviour:

- ``vm["main"](*args)`` calls a VM function directly: arguments go to registers unconverted;
  a wrong count raises :class:`InternalError` (a ``RuntimeError``) naming the parameters;
  everything else is checked by the ``vm.builtin.check_*`` calls the compiler emits.
- Name lookup order: built-in methods (``invoke_stateful``, ``set_input``, ...), saved
  closures (``save_function``; they shadow functions of the same name, as observed in TVM),
  then the executable's VM functions; else ``AttributeError``.
- Stateful API: ``set_input`` / ``invoke_stateful`` / ``get_outputs`` with TVM's errors.
- ``set_instrument``: called before and after every Call instruction executed in any frame.
- ``time_evaluator``: ``runtime.time_evaluator`` on whatever ``vm[func_name]`` resolves to.
- ``profile`` (with ``profile=True``): a :class:`Report` of every call that had tensor
  arguments, after one un-profiled warm-up run.

Lifetime: what the VM owns refers to it weakly (the builtins' context register holds a weak
proxy, an instrument is shown the VM itself; built-in methods are bound on lookup), so dropping
the last reference frees the VM, and its replay plans' memory, at once rather than at the next
cyclic collection; a function taken from it (``vm["main"]``, a saved closure) keeps it alive.

Packed functions in the executable are resolved when the VM is created: first in the
executable's kernel libraries (in import order), then in the global function registry; a
missing one is an error here rather than at the first call.
"""
from __future__ import annotations

import enum
import warnings
import weakref
from typing import Any, Callable, Mapping, Sequence

import numpy as np

from ..device import Device, cpu
from ..evaluator import TimeEvaluator, time_evaluator as _time_evaluator
from ..module import Module
from ..ndarray import NDArray, tensor
from ..packed_func import PackedFunc
from ..profiling.profiler import Profiler
from ..profiling.report import Report
from ..registry import get_global_func
from . import builtins as _builtins
from .executable import Executable
from .interpreter import CallSite, Interpreter
from .objects import InternalError, ShapeTuple, Storage, VMClosure

__all__ = ["VirtualMachine", "VMInstrumentReturnKind"]

_builtins.register_builtins()


class VMInstrumentReturnKind(enum.IntEnum):
    """What an instrument's before-call return value asks for."""

    NO_OP = 0
    SKIP_RUN = 1


_ALLOCATORS = {"naive": 1, "pooled": 2}

# ``vm[name]`` for TVM's built-in method names: the VirtualMachine method that answers it.
_METHODS = {
    "vm_initialization": "_vm_initialization",
    "save_function": "_save_function_native",
    "invoke_closure": "invoke_closure",
    "invoke_stateful": "invoke_stateful",
    "set_instrument": "set_instrument",
    "get_output_arity": "_get_output_arity",
    "get_output": "_get_output",
    "set_input": "_set_input_native",
    "get_function_arity": "_get_function_arity",
    "get_function_param_name": "_get_function_param_name",
}


class VirtualMachine:
    """VirtualMachine(rt_mod, device, memory_cfg=None, profile=False).

    ``rt_mod`` is an :class:`Executable`; ``device`` a Device or a list of them (the host CPU
    is appended when the last one is not a CPU; index 0 is the default device). ``memory_cfg``
    ("naive", "pooled", or {Device: kind}) is validated and recorded; both kinds allocate
    fresh memory, since numpy's allocator already pools. ``profile=True`` enables
    :meth:`profile`.
    """

    NAIVE_ALLOCATOR = 1
    POOLED_ALLOCATOR = 2

    def __new__(cls, rt_mod: Any = None, *args: Any, **kwargs: Any) -> Any:
        # A module of a remote session (workbench.rpc) makes its own VM, which runs there:
        # ``relax.VirtualMachine(remote_module, session.cpu())`` as in TVM.
        factory = None if isinstance(rt_mod, Executable) else \
            getattr(rt_mod, "_make_virtual_machine", None)
        if factory is not None:
            return factory(*args, **kwargs)
        return super().__new__(cls)

    def __init__(self, rt_mod: Executable, device: Device | Sequence[Device],
                 memory_cfg: str | Mapping[Device, str] | None = None,
                 profile: bool = False) -> None:
        if not isinstance(rt_mod, Executable):
            raise ValueError(f"VirtualMachine: expect the rt_mod to be an Executable (from "
                             f"ExecBuilder.get(), the relax compiler or Executable.load), got "
                             f"{type(rt_mod).__name__}")
        self.devices: list[Device] = _device_list(device)
        self.allocators: list[int] = _allocator_kinds(memory_cfg, self.devices)
        self._exe = rt_mod
        self._profile_enabled = bool(profile)
        self._saved: dict[str, Callable[..., Any]] = {}
        self._inputs: dict[str, tuple] = {}
        self._outputs: dict[str, Any] = {}
        # What the VM owns refers back to it weakly (the builtins' context register is a
        # proxy, methods are bound on lookup), so a dropped VM, and its plans' intermediates,
        # is freed at once rather than by the cyclic collector; a function taken from it
        # (``vm["main"]``) keeps it alive.
        context = weakref.proxy(self)
        self._interp = Interpreter(rt_mod, context, self._resolve_packed)
        self._interp.hooks.context = (context, weakref.ref(self))
        self._methods: dict[str, str] = dict(_METHODS)
        if self._profile_enabled:
            self._methods["profile"] = "_profile_json"

    # -- construction helpers --------------------------------------------------------------------
    def _resolve_packed(self, name: str) -> Any:
        for lib in self._exe.imported_modules:
            if name in lib:
                return lib[name]
        func = get_global_func(name, allow_missing=True)
        if func is None:
            libs = ", ".join(f"{lib!r}" for lib in self._exe.imported_modules) or "none"
            raise RuntimeError(
                f"Cannot find PackedFunc {name} in either Relax VM kernel library, or in the "
                f"runtime PackedFunc registry, or in global Relax functions of the VM "
                f"executable (kernel libraries: {libs}; import one with "
                f"Executable.import_module, or register a function with register_func)")
        return func

    # -- properties ------------------------------------------------------------------------------
    @property
    def executable(self) -> Executable:
        return self._exe

    @property
    def module(self) -> "VirtualMachine":
        """TVM code writes ``vm.module[name]``; the VM is its own module here."""
        return self

    @property
    def imported_modules(self) -> list[Module]:
        return self._exe.imported_modules

    # -- lookup ----------------------------------------------------------------------------------
    def _get_closure(self, name: str) -> Callable[..., Any]:
        """Saved closures first, then VM functions; ``ValueError`` if neither."""
        saved = self._saved.get(name)
        if saved is not None:
            return saved
        closure = self._interp.closures.get(name)
        if closure is None:
            raise ValueError(f"Unknown function: {name}")
        return closure.impl

    def __getitem__(self, name: str) -> Callable[..., Any]:
        if not isinstance(name, str):
            raise TypeError(f"VirtualMachine[...] takes a function name, got {name!r}")
        method = self._methods.get(name)
        if method is not None:
            return getattr(self, method)
        saved = self._saved.get(name)
        if saved is not None:
            return self._owned(PackedFunc(saved, name))
        closure = self._interp.closures.get(name)
        if closure is not None:
            return self._owned(PackedFunc(closure.impl, name))
        idx = self._exe.func_map.get(name)
        if idx is not None:
            kind = self._exe.func_table[idx].kind
            raise InternalError(f"Cannot support closure with function kind {int(kind)}: "
                                f"{name!r} is a packed function the executable calls, not a "
                                "VM function")
        funcs = ", ".join(self._interp.closures) or "none"
        raise AttributeError(f"Module has no function '{name}' (VM functions: {funcs})")

    def get_function(self, name: str) -> Callable[..., Any]:
        return self[name]

    def _owned(self, func: PackedFunc) -> PackedFunc:
        """``func`` keeping this VM alive (its code refers to the VM weakly)."""
        func._keepalive = (self, func._keepalive)
        return func

    def _vm_initialization(self, *args: Any) -> None:
        return None

    def _profile_json(self, func_name: str, *args: Any) -> str:
        return self._profile(func_name, args).json()

    def _get_function_arity(self, func_name: str) -> int:
        return self._exe.get_function_arity(func_name)

    def _get_function_param_name(self, func_name: str, index: int) -> str:
        return self._exe.get_function_param_name(func_name, index)

    # -- closures --------------------------------------------------------------------------------
    def invoke_closure(self, closure: Any, *args: Any) -> Any:
        """Call a closure (e.g. returned by a VM function) or a packed function with ``args``
        (no conversion); captured values follow ``args``."""
        if not callable(closure):
            raise TypeError(f"invoke_closure: expected a closure or function, got "
                            f"{type(closure).__name__}")
        return closure(*args)

    def save_function(self, func_name: str, saved_name: str, *args: Any,
                      include_return: bool = True, **kwargs: Any) -> None:
        """Save ``func_name`` with ``args`` bound (converted as TVM does) under
        ``saved_name``; ``vm[saved_name]()`` then runs it. ``include_return=False`` makes the
        saved function return None."""
        args = self._named_args(func_name, args, kwargs)
        self._save_function_native(func_name, saved_name, int(include_return),
                                   *[_convert(a) for a in args])

    def _save_function_native(self, func_name: str, saved_name: str, include_return: int,
                              *args: Any) -> None:
        closure = self._get_closure(func_name)
        bound = tuple(args)
        if include_return:
            def saved(*call_args: Any) -> Any:
                return closure(*call_args, *bound)
        else:
            def saved(*call_args: Any) -> Any:
                closure(*call_args, *bound)
                return None
        saved.__name__ = saved_name
        self._saved[saved_name] = saved

    # -- stateful API ----------------------------------------------------------------------------
    def set_input(self, func_name: str, *args: Any, **kwargs: Any) -> None:
        """Store (converted) inputs for :meth:`invoke_stateful`, replacing earlier ones."""
        args = self._named_args(func_name, args, kwargs)
        self._set_input_native(func_name, *[_convert(a) for a in args])

    def _set_input_native(self, func_name: str, *args: Any) -> None:
        if func_name not in self._interp.closures:
            raise ValueError(f"Unknown function: {func_name}")
        info = self._exe.function_info(func_name)
        if len(args) != info.num_args:
            raise InternalError(
                f"The number of provided parameters doesn't match the number of arguments for "
                f"{func_name}: expected {info.num_args}, got {len(args)}")
        self._inputs[func_name] = tuple(args)

    def invoke_stateful(self, func_name: str) -> None:
        """Run ``func_name`` on the inputs given to :meth:`set_input`; keep its result for
        :meth:`get_outputs`. Inputs stay set."""
        closure = self._interp.closures.get(func_name)
        if closure is None:
            raise ValueError(f"Unknown function: {func_name}")
        inputs = self._inputs.get(func_name)
        if inputs is None:
            raise ValueError(f"No inputs set for stateful call of {func_name}; use `set_input` "
                             "first.")
        self._outputs[func_name] = closure.impl(*inputs)

    def _saved_output(self, func_name: str) -> Any:
        if func_name not in self._outputs:
            raise ValueError(f'No output saved for call of "{func_name}"; use `invoke_stateful` '
                             "to call it first.")
        return self._outputs[func_name]

    def _walk(self, func_name: str, path: Sequence[int]) -> Any:
        obj = self._saved_output(func_name)
        for i in path:
            if type(obj) is not tuple:
                raise ValueError(f"output of {func_name!r} at index path {list(path)} goes "
                                 f"through a {type(obj).__name__}, which cannot be indexed")
            if not 0 <= i < len(obj):
                raise IndexError(f"Invalid index ({i} >= {len(obj)}).")
            obj = obj[i]
        return obj

    def _get_output_arity(self, func_name: str, *path: int) -> int:
        obj = self._walk(func_name, path)
        return len(obj) if type(obj) is tuple else -1

    def _get_output(self, func_name: str, *path: int) -> Any:
        obj = self._walk(func_name, path)
        if type(obj) is tuple:
            raise ValueError("`get_output` cannot return a tuple for RPC compatibility. Please "
                             "specify another index argument.")
        return obj

    def get_outputs(self, func_name: str) -> Any:
        """The result of the last :meth:`invoke_stateful`; tuples come back as (nested) Python
        tuples."""
        def rebuild(path: tuple[int, ...]) -> Any:
            arity = self._get_output_arity(func_name, *path)
            if arity == -1:
                return self._get_output(func_name, *path)
            return tuple(rebuild(path + (i,)) for i in range(arity))
        return rebuild(())

    # -- instrument ------------------------------------------------------------------------------
    def static_replay(self) -> dict[str, str]:
        """How each VM function's calls run (not in TVM): "replayed" (recorded once, then
        replayed as native calls: ``workbench.runtime.relax_vm.replay``), "capture pending"
        (replayable; its next call records it) or "interpreted" (control flow, calls other
        than kernels and memory builtins, symbolic shapes, outputs it did not allocate, or
        the option ``vm_static_replay`` off). Calls with an instrument or the profiler active
        are always interpreted."""
        return {name: closure.impl.replay_status()
                for name, closure in self._interp.closures.items()}

    def set_instrument(self, instrument: Callable[..., Any] | str | None) -> None:
        """Call ``instrument(func, func_symbol, before_run, ret_value, *args)`` before and after
        every Call instruction. Returning ``VMInstrumentReturnKind.SKIP_RUN`` before a call
        skips it (its destination gets None, and no after-event fires). A string names a global
        factory function that returns the instrument; None removes it (not in TVM)."""
        if isinstance(instrument, str):
            instrument = get_global_func(instrument)()
        if instrument is not None and not callable(instrument):
            raise TypeError(f"set_instrument: expected a callable, got "
                            f"{type(instrument).__name__}")
        hooks = self._interp.hooks
        hooks.instrument = instrument
        hooks.update()

    @property
    def instrument_position(self) -> CallSite | None:
        """Inside an instrument callback: the ``CallSite(function, index, pc)`` of the Call it
        is called for (VM function name, instruction index in it, global instruction index).
        Not in TVM; meaningful only during a callback, and only for the thread running the
        VM (one position per VM)."""
        return self._interp.hooks.position

    # -- timing and profiling --------------------------------------------------------------------
    def time_evaluator(self, func_name: str, dev: Device, number: int = 10, repeat: int = 1,
                       min_repeat_ms: float = 0, cooldown_interval_ms: float = 0,
                       repeats_to_cooldown: int = 1,
                       f_preproc: str = "") -> TimeEvaluator:
        """An evaluator ``(*args) -> BenchmarkResult`` for ``vm[func_name]``: a VM function
        (``vm.time_evaluator("main", dev)(x, y)``), a saved closure
        (``vm.time_evaluator("saved_main", dev)()``) or a built-in method
        (``vm.time_evaluator("invoke_stateful", dev)("main")``). Runs the target
        ``1 + number * repeat`` times per call (with ``min_repeat_ms == 0``)."""
        try:
            func = self[func_name]
        except (AttributeError, InternalError) as err:
            raise AttributeError(f"time_evaluator: cannot find {func_name!r} in the VM: "
                                 f"{err}") from None
        return _time_evaluator(func, dev, number, repeat, min_repeat_ms, 100,
                               cooldown_interval_ms, repeats_to_cooldown, 0, f_preproc)

    def profile(self, func_name: str, *args: Any) -> Report:
        """Run ``func_name`` once to warm up, then once under the profiler; returns the
        :class:`Report` (one row per call with tensor arguments: Name, Duration (us), Count,
        Device, Argument Shapes, Percent). Uses inputs from :meth:`set_input` when no ``args``
        are given. Needs ``VirtualMachine(..., profile=True)``."""
        if not self._profile_enabled:
            raise AttributeError("Module has no function 'profile': create the VM with "
                                 "VirtualMachine(exe, dev, profile=True) to profile")
        return self._profile(func_name, tuple(_convert(a) for a in args))

    def _profile(self, func_name: str, args: tuple) -> Report:
        closure = self._get_closure(func_name)
        if func_name in self._inputs:
            if args:
                raise ValueError(f"profile({func_name!r}): inputs are already provided by "
                                 "set_input; call profile without arguments")
            inputs = self._inputs[func_name]
        else:
            info = self._exe.func_map.get(func_name)
            expected = self._exe.func_table[info].num_args if info is not None else len(args)
            if expected and not args:
                raise ValueError(f"profile({func_name!r}): No input is provided; pass the "
                                 "arguments or call set_input first")
            inputs = args
        closure(*inputs)  # warm-up, un-profiled
        profiler = Profiler(self.devices, (), {"Executor": "VM"})
        hooks = self._interp.hooks
        hooks.profiler = profiler
        profiler.start()
        hooks.update()
        try:
            closure(*inputs)
            profiler.stop()
        finally:
            hooks.profiler = None
            hooks.update()
        return profiler.report()

    # -- helpers ---------------------------------------------------------------------------------
    def _named_args(self, func_name: str, args: tuple, kwargs: dict[str, Any]) -> tuple:
        """Place keyword arguments at their parameter positions (TVM's
        ``_convert_func_named_args``); unknown names warn and are dropped."""
        if not kwargs:
            return args
        names = (self._exe.function_info(func_name).param_names
                 if func_name in self._exe.func_map else [])
        slots: list[Any] = [None] * len(names)
        filled = [False] * len(names)
        for key, value in kwargs.items():
            if key in names:
                slots[names.index(key)] = value
                filled[names.index(key)] = True
            else:
                warnings.warn(f'Keyword argument "{key}" is unused in {func_name}',
                              stacklevel=3)
        positional = iter(args)
        n_pos = 0
        for i, done in enumerate(filled):
            if not done:
                try:
                    slots[i] = next(positional)
                    n_pos += 1
                except StopIteration:
                    raise TypeError(f"{func_name}: missing a value for parameter "
                                    f"{names[i]!r}") from None
        if n_pos != len(args):
            raise TypeError(f"{func_name}: {len(args)} positional and {sum(filled)} keyword "
                            f"arguments given for {len(names)} parameters ({', '.join(names)})")
        return tuple(slots)

    def __repr__(self) -> str:
        funcs = list(self._interp.closures)
        return f"<VirtualMachine functions={funcs} devices={self.devices}>"


# -- argument conversion (TVM's _convert, used by save_function / set_input / profile) ---------

def _scalar_tensor(dtype: str) -> Callable[[Any], NDArray]:
    return lambda x: tensor(np.array(x, dtype=dtype))


_PASS_THROUGH = (NDArray, ShapeTuple, VMClosure, Storage, PackedFunc, Device, str)
_CONVERTERS: list[tuple[tuple[type, ...], Callable[[Any], Any]]] = [
    (_PASS_THROUGH, lambda x: x),
    ((np.ndarray,), tensor),
    ((tuple, list), lambda x: tuple(_convert(a) for a in x)),
    ((bool, int, np.bool_, np.integer), _scalar_tensor("int32")),
    ((np.float16,), _scalar_tensor("float16")),
    ((float, np.floating), _scalar_tensor("float32")),
]


def _convert(arg: Any) -> Any:
    for types, convert in _CONVERTERS:
        if isinstance(arg, types):
            return convert(arg)
    if callable(arg):
        return arg
    raise TypeError(f"Unsupported type: {type(arg).__name__} (VM arguments are NDArrays, numpy "
                    "arrays, numbers, strings, shapes, tuples/lists of these, or functions)")


def _device_list(device: Any) -> list[Device]:
    if isinstance(device, Device):
        devices = [device]
    elif isinstance(device, (list, tuple)) and device and all(
            isinstance(d, Device) for d in device):
        devices = list(device)  # a copy: TVM appends to the caller's list, we do not
    else:
        raise TypeError(f"VirtualMachine: device must be a Device or a non-empty list of "
                        f"Devices, got {device!r}")
    if not devices[-1].is_cpu:
        devices.append(cpu(0))  # the host, for shape computations
    return devices


def _allocator_kinds(memory_cfg: Any, devices: list[Device]) -> list[int]:
    if memory_cfg is None:
        return [_ALLOCATORS["pooled"]] * len(devices)
    if isinstance(memory_cfg, str):
        if memory_cfg not in _ALLOCATORS:
            raise ValueError(f"VirtualMachine: memory_cfg must be 'naive' or 'pooled', got "
                             f"{memory_cfg!r}")
        return [_ALLOCATORS[memory_cfg]] * len(devices)
    if isinstance(memory_cfg, Mapping):
        kinds = []
        for dev in devices:
            kind = memory_cfg.get(dev, "pooled")
            if kind not in _ALLOCATORS:
                raise ValueError(f"VirtualMachine: memory_cfg[{dev}] must be 'naive' or "
                                 f"'pooled', got {kind!r}")
            kinds.append(_ALLOCATORS[kind])
        return kinds
    raise TypeError(f"VirtualMachine: memory_cfg must be None, a str or a dict of Device to "
                    f"str, got {type(memory_cfg).__name__}")


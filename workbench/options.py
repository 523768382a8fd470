"""The one registry of Workbench options: name, type, default, environment variable, doc.

Every tunable knob of the project is declared here (or by a package through :func:`register`)
instead of being read from ``os.environ`` where it is used, so that a user can list them all
(:func:`describe`), and a test or notebook cell can change one for a scope::

    from workbench import options
    options.get("num_threads")                 # effective value
    with options.override(num_threads=1):      # scoped, restored on exit (even on error)
        ...
    options.set("cache_dir", "/tmp/wb-cache")  # process-wide until reset("cache_dir")

Resolution order of a value, first match wins:

1. the innermost active :func:`override` that names the option;
2. a value given with :func:`set`;
3. the option's environment variable, read at each :func:`get` (so a changed ``os.environ``
   is seen), parsed by the option's type;
4. the default (a callable default is called lazily, e.g. "the machine's cores").

Overrides and set values are process-wide, not per thread: a notebook's worker threads see the
same options as the cell that started them. Every change made through this module bumps
:func:`generation`, which lets hot paths (the runtime's thread-count check) notice a change
with one integer comparison instead of re-reading the registry.
"""
from __future__ import annotations

import contextlib
import os
import threading
from dataclasses import dataclass
from typing import Any, Callable, Iterator

__all__ = [
    "Option", "register", "get", "set", "reset", "override", "describe", "all_options",
    "explicit_values", "generation", "positive", "not_negative", "declared_in",
]

_TRUE = {"1", "true", "yes", "on"}
_FALSE = {"0", "false", "no", "off", ""}


@dataclass(frozen=True)
class Option:
    """One option. ``type`` is one of ``int``, ``float``, ``bool``, ``str``; ``default`` is a
    value of that type or a zero-argument callable producing one; ``validate`` (optional)
    raises ``ValueError`` for a value of the right type that is still not allowed."""

    name: str
    type: type
    default: Any
    env: str | None = None
    doc: str = ""
    validate: Callable[[Any], None] | None = None

    def default_value(self) -> Any:
        return self.default() if callable(self.default) else self.default

    def coerce(self, value: Any, source: str) -> Any:
        """Convert ``value`` to the option's type; ``source`` names where it came from."""
        if self.type is bool:
            if isinstance(value, str):
                low = value.strip().lower()
                if low in _TRUE:
                    value = True
                elif low in _FALSE:
                    value = False
                else:
                    raise ValueError(f"{source}: option {self.name!r} expects a boolean "
                                     f"(1/0, true/false, yes/no, on/off), got {value!r}")
            elif not isinstance(value, (bool, int)):
                raise TypeError(f"{source}: option {self.name!r} expects a bool, got {value!r}")
            value = bool(value)
        elif self.type is int:
            if isinstance(value, str):
                try:
                    value = int(value.strip())
                except ValueError:
                    raise ValueError(f"{source}: option {self.name!r} expects an integer, "
                                     f"got {value!r}") from None
            elif isinstance(value, bool) or not isinstance(value, int):
                raise TypeError(f"{source}: option {self.name!r} expects an int, got {value!r}")
        elif self.type is float:
            if isinstance(value, str):
                try:
                    value = float(value.strip())
                except ValueError:
                    raise ValueError(f"{source}: option {self.name!r} expects a number, "
                                     f"got {value!r}") from None
            elif isinstance(value, bool) or not isinstance(value, (int, float)):
                raise TypeError(f"{source}: option {self.name!r} expects a float, got {value!r}")
            value = float(value)
        elif self.type is str:
            if isinstance(value, os.PathLike):
                value = os.fspath(value)
            if not isinstance(value, str):
                raise TypeError(f"{source}: option {self.name!r} expects a str, got {value!r}")
        if self.validate is not None:
            try:
                self.validate(value)
            except ValueError as err:
                raise ValueError(f"{source}: option {self.name!r}: {err}") from None
        return value


_REGISTRY: dict[str, Option] = {}
_SET: dict[str, Any] = {}
_OVERRIDES: list[dict[str, Any]] = []
_LOCK = threading.RLock()
# A one-element list so other modules can hold a reference and read ``[0]`` cheaply.
_GENERATION = [0]


def _bump() -> None:
    _GENERATION[0] += 1


def generation() -> int:
    """A counter that changes whenever an option is set, reset or overridden."""
    return _GENERATION[0]


def register(name: str, type: type, default: Any, env: str | None = None, doc: str = "",
             validate: Callable[[Any], None] | None = None) -> Option:
    """Declare an option. Registering the same name twice with the same declaration is a
    no-op (module reloads); a different declaration raises ``ValueError``."""
    if not isinstance(name, str) or not name.isidentifier():
        raise ValueError(f"option name must be an identifier, got {name!r}")
    if type not in (int, float, bool, str):
        raise TypeError(f"option {name!r}: type must be int, float, bool or str, got {type!r}")
    opt = Option(name, type, default, env, doc, validate)
    with _LOCK:
        old = _REGISTRY.get(name)
        if old is not None:
            if (old.type, old.env, old.doc) == (opt.type, opt.env, opt.doc):
                return old
            raise ValueError(f"option {name!r} is already registered with a different "
                             f"declaration ({old})")
        _REGISTRY[name] = opt
    return opt


# Modules of higher floors that register options when imported and are not imported with the
# package (the tuner's ``ms_*`` options): ``workbench/__init__`` names them through
# :func:`declared_in`, and a lookup that misses, or the list of all options, imports them
# first -- so ``options.override(ms_confirm_rounds=0)`` works in a fresh session before the
# tuner was imported, and :func:`describe` lists every knob.
_DECLARING: list[str] = []


def declared_in(*modules: str) -> None:
    """Name modules that register options when imported (imported on demand, see above)."""
    with _LOCK:
        _DECLARING.extend(m for m in modules if m not in _DECLARING)


_IMPORTING = threading.Lock()   # another thread's lookup waits until the imports are done


def _import_declaring() -> None:
    import importlib
    with _IMPORTING:
        while _DECLARING:
            try:
                importlib.import_module(_DECLARING[0])
            finally:        # a module that fails to import says so once
                with _LOCK:
                    _DECLARING.pop(0)


def _lookup(name: str) -> Option:
    opt = _REGISTRY.get(name)
    if opt is None and _DECLARING:
        _import_declaring()
        opt = _REGISTRY.get(name)
    if opt is None:
        raise KeyError(f"unknown option {name!r}; known options: {', '.join(sorted(_REGISTRY))}")
    return opt


def get(name: str) -> Any:
    """The effective value of option ``name`` (see the module docstring for the order)."""
    opt = _lookup(name)
    with _LOCK:
        for layer in reversed(_OVERRIDES):
            if name in layer:
                return layer[name]
        if name in _SET:
            return _SET[name]
    if opt.env is not None:
        raw = os.environ.get(opt.env)
        if raw is not None and raw.strip() != "":
            return opt.coerce(raw, f"environment variable {opt.env}")
    return opt.default_value()


def set(name: str, value: Any) -> None:  # noqa: A001 - the module is used as ``options.set``
    """Set ``name`` process-wide (beats the environment variable) until :func:`reset`."""
    opt = _lookup(name)
    value = opt.coerce(value, "options.set")
    with _LOCK:
        _SET[name] = value
        _bump()


def reset(name: str | None = None) -> None:
    """Forget a value given with :func:`set` (all of them when ``name`` is None)."""
    if name is not None:
        _lookup(name)       # (outside the lock: a lookup may import declaring modules)
    with _LOCK:
        if name is None:
            _SET.clear()
        else:
            _SET.pop(name, None)
        _bump()


@contextlib.contextmanager
def override(**values: Any) -> Iterator[None]:
    """Override options for the duration of a ``with`` block; nests, and restores on error."""
    layer = {name: _lookup(name).coerce(value, "options.override")
             for name, value in values.items()}
    with _LOCK:
        _OVERRIDES.append(layer)
        _bump()
    try:
        yield
    finally:
        with _LOCK:
            # Remove this very layer even if overrides were exited out of order (threads).
            for i in range(len(_OVERRIDES) - 1, -1, -1):
                if _OVERRIDES[i] is layer:
                    del _OVERRIDES[i]
                    break
            _bump()


def explicit_values() -> dict[str, Any]:
    """The options given with :func:`set` or an active :func:`override`, with their effective
    values (what a job sent to another machine carries: defaults and environment variables
    are that machine's own)."""
    with _LOCK:
        names = list(_SET) + [name for layer in _OVERRIDES for name in layer]
    return {name: get(name) for name in dict.fromkeys(names)}


def all_options() -> list[Option]:
    """Every registered option, sorted by name (the declaring modules imported first)."""
    _import_declaring()
    return [_REGISTRY[k] for k in sorted(_REGISTRY)]


def describe() -> str:
    """A plain-text table of every option: name, type, env var, current value, doc."""
    rows = [("name", "type", "env", "value", "doc")]
    for opt in all_options():
        try:
            value = repr(get(opt.name))
        except (TypeError, ValueError) as err:
            value = f"<invalid: {err}>"
        rows.append((opt.name, opt.type.__name__, opt.env or "", value, opt.doc))
    widths = [max(len(r[i]) for r in rows) for i in range(4)]
    return "\n".join("  ".join(r[i].ljust(widths[i]) for i in range(4)) + "  " + r[4]
                     for r in rows)


# ---------------------------------------------------------------------------------------------
# The options of the core packages. Other packages register theirs where they are defined.

def _cpu_count() -> int:
    try:
        return len(os.sched_getaffinity(0)) or 1
    except (AttributeError, OSError):
        return os.cpu_count() or 1


def positive(value: int) -> None:
    """A ``validate`` for options that must be >= 1."""
    if value < 1:
        raise ValueError(f"must be >= 1, got {value}")


def _default_cache_dir() -> str:
    return os.path.join(os.path.expanduser("~"), ".cache", "workbench")


register("num_threads", int, _cpu_count, env="WORKBENCH_NUM_THREADS",
         doc="Threads for parallel loops when the kernel does not fix a count "
             "(default: the cores this process may run on).",
         validate=positive)
register("cache_dir", str, _default_cache_dir, env="WORKBENCH_CACHE_DIR",
         doc="Directory of the on-disk compile cache (default ~/.cache/workbench).")
register("cc", str, "", env="WORKBENCH_CC",
         doc="C compiler/linker used by export_library; empty means the first of cc, gcc, "
             "clang found on PATH.")


def not_negative(value: float) -> None:
    """A ``validate`` for options that must be >= 0."""
    if value < 0:
        raise ValueError(f"must be >= 0, got {value}")


def _spin_count(value: int) -> None:
    if value < -1:
        raise ValueError(f"must be >= 0, or -1 for libgomp's own default, got {value}")


register("timing_settle_ms", float, 250.0, env="WORKBENCH_TIMING_SETTLE_MS",
         doc="time_evaluator first waits up to this long for the process's other threads to "
             "stop running (e.g. OpenBLAS's pool spinning ~0.1 s after a numpy matmul); "
             "0 disables the wait.",
         validate=not_negative)
register("timing_team_settle_ms", float, 25.0, env="WORKBENCH_TIMING_TEAM_SETTLE_MS",
         doc="Before timing (time_evaluator after its warm-up call; the tuner's runner after "
             "each cache flush) our OpenMP team runs empty parallel regions until they are "
             "fast again, for at most this long (runtime.settle.settle_team): threads that "
             "slept can come back slowly for 10-35 ms on a VM. 0: one region, which only "
             "wakes the team.",
         validate=not_negative)
register("parallel_chunks", int, 4, env="WORKBENCH_PARALLEL_CHUNKS",
         doc="Chunks per thread of a parallel loop: each thread takes its own in order, "
             "then those others have not started (codegen.parallel; a thread the OS left "
             "waiting no longer holds the loop up by its whole share). 0: a static split "
             "by thread number.",
         validate=not_negative)
register("parallel_rows_first", bool, True, env="WORKBENCH_PARALLEL_ROWS_FIRST",
         doc="Default schedules of convolutions with small weights split their threads by "
             "output rows instead of output-channel blocks, so each core reads the rows the "
             "previous layer's kernel wrote on it (dlight.cpu.tiling._rows_first).")
register("parallel_finish_spin", int, 50000, env="WORKBENCH_PARALLEL_FINISH_SPIN",
         doc="Pause iterations (~20-40 ns each) a thread that ran out of chunks of a parallel "
             "loop spins waiting for the others to finish theirs before it enters libgomp's "
             "closing barrier, where after omp_spin_count spins it would sleep: waking a "
             "sleeping core costs 30-100+ us (more in a busy VM) and the next kernel, usually "
             "a short one, pays it. Bounded: a thread the OS descheduled is not waited for "
             "longer, and each kernel module adapts its budget below this (a wait that runs "
             "out quarters it, one that sees the others finish doubles it): on a machine busier "
             "than its cores the spin drops to a few microseconds. 0 disables (needs "
             "parallel_chunks > 0).",
         validate=not_negative)
register("omp_spin_count", int, 10000, env="WORKBENCH_OMP_SPIN_COUNT",
         doc="GOMP_SPINCOUNT given to libgomp when the runtime loads it (how long our idle "
             "threads spin before sleeping; less spinning leaves the cores to numpy & co. "
             "sooner); -1 keeps libgomp's default; OMP_WAIT_POLICY or GOMP_SPINCOUNT in the "
             "environment win.",
         validate=_spin_count)


def _loader_mode(value: str) -> None:
    if value not in ("auto", "mcjit", "linked"):
        raise ValueError(f"must be 'auto', 'mcjit' or 'linked', got {value!r}")


register("kernel_loader", str, "auto", env="WORKBENCH_KERNEL_LOADER",
         doc="How compiled object code is loaded: 'mcjit', 'linked' (linked into a shared "
             "library with the C compiler, then dlopen'ed) or 'auto' (linked when a C compiler "
             "is found and over 1 GiB of native libraries are mapped, e.g. after import torch, "
             "where MCJIT can place code and data too far apart and abort).",
         validate=_loader_mode)


register("kernel_heap", bool, True, env="WORKBENCH_KERNEL_HEAP",
         doc="Keep compiled kernels' scratch buffers mapped between calls: glibc's malloc "
             "thresholds are raised once, process-wide, when the first module is loaded "
             "(workbench.runtime.heap); off: glibc's defaults.")


register("vm_static_replay", bool, True, env="WORKBENCH_VM_STATIC_REPLAY",
         doc="A VM function of fixed shapes made only of kernel calls and memory builtins "
             "records its first call and replays it as a list of native calls, keeping its "
             "intermediates' storage between calls (workbench.runtime.relax_vm.replay); read "
             "when a VirtualMachine is created. Off: every call is interpreted.")


register("convert_layout", bool, True, env="WORKBENCH_CONVERT_LAYOUT",
         doc="relax.build runs convolutional graphs in a channel-blocked layout (NCHW16c with "
             "AVX-512, NCHW8c with AVX2; relax.transform.ConvertLayoutNCHWc); off: the "
             "layouts the model was written in.")


register("winograd", bool, True, env="WORKBENCH_WINOGRAD",
         doc="With convert_layout, 3x3 stride-1 convolutions of at least 64 channels on "
             "mid-sized images run as Winograd F(4x4, 3x3) convolutions (weights transformed "
             "at compile time); off: direct convolutions only.")


register("int8_conv", bool, True, env="WORKBENCH_INT8_CONV",
         doc="With convert_layout, on AVX-512 VNNI targets, a QDQ model's convolutions (a "
             "per-tensor dequantized input times a dequantized int8 weight) run as uint8 x "
             "int8 convolutions on the VNNI dot product (relax.nn.conv2d_nchwc_int8), "
             "rescaled to float32 after; off: float32 convolutions of the dequantized values.")


register("default_schedule", bool, True, env="WORKBENCH_DEFAULT_SCHEDULE",
         doc="relax.build gives every kernel without a tuned or hand-written schedule a "
             "default CPU schedule (workbench.dlight); off: plain loop nests.")

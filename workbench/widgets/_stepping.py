"""Step through a Relax VM run call by call, built on ``VirtualMachine.set_instrument``.

:class:`Stepper` runs ``vm[func_name](*args)`` in a worker thread. The instrument it installs
is called before every Call instruction; there the worker decides whether to pause, and a
pause blocks the worker on a condition variable until a command arrives (``step``, ``skip``,
``continue_``, ``run_to``, ``stop``) from any thread -- a button callback or code. So the
notebook kernel stays idle (and clickable) while the run is paused, and nothing here needs
ipywidgets; :mod:`workbench.widgets.vm_stepper` is the face.

Contracts:

- Commands are non-blocking: they hand the worker what to do and return. ``wait_paused``
  blocks until the worker pauses again or the run ends (and listeners were told).
- Pausing happens only *before* a call. ``continue_`` and ``run_to`` stop at breakpoints
  (symbols, ``fnmatch`` patterns such as ``"fused_*"``; for an imported model also layers,
  ``"layer2.*"``, matched against the call's origin) unless told to ignore them.
- ``skip`` answers ``SKIP_RUN`` for the pending call: it does not run, its destination
  register gets None, and destination-passing outputs keep whatever their memory held.
- ``stop`` (and ``close``) ends a run *by aborting it*: the next instrument event raises a
  private exception that unwinds the VM (no later call runs, nothing is half-done since
  calls are atomic at instruction granularity); ``status`` becomes "stopped" and ``result``
  stays None. Aborting rather than running to the end means a stop is immediate even before
  a long tail of kernels, and rather than skipping every remaining call it never feeds
  None to code that expects a value.
- An exception raised by the VM (a failed check, a kernel error) is caught in the worker and
  kept in ``error`` / ``error_traceback`` with status "error"; it never reaches the caller
  of a command, and never kills the session.
- While the run lasts the stepper owns the VM's instrument; when it ends the instrument is
  removed (``set_instrument(None)``). A new stepper on a VM that still has an unfinished one
  closes the old one first. Calls of the same VM from other threads while a run is paused
  are passed through untouched (the instrument only acts for its worker thread).
"""
from __future__ import annotations

import fnmatch
import threading
import time
import traceback
import weakref
from typing import Any, Callable, Iterable

import pandas as pd

from workbench.runtime.relax_vm import VirtualMachine, VMInstrumentReturnKind

from ._call_records import CallRecord, Trace, describe, records_frame

__all__ = ["Stepper", "trace", "IDLE", "RUNNING", "PAUSED", "FINISHED", "ERROR", "STOPPED"]

IDLE, RUNNING, PAUSED = "idle", "running", "paused"
FINISHED, ERROR, STOPPED = "finished", "error", "stopped"
ENDED = (FINISHED, ERROR, STOPPED)

_NO_OP = int(VMInstrumentReturnKind.NO_OP)
_SKIP_RUN = int(VMInstrumentReturnKind.SKIP_RUN)

# One running stepper per VM: the instrument is a per-VM slot.
_OWNERS: "weakref.WeakKeyDictionary[VirtualMachine, Stepper]" = weakref.WeakKeyDictionary()
_OWNERS_LOCK = threading.Lock()

Listener = Callable[[str, "Stepper"], None]


class _Stopped(BaseException):
    """Raised inside the instrument to abort the run; a BaseException so that no
    ``except Exception`` in a callee can swallow it."""


class _Mode:
    """Where the worker pauses next: at the next call ("step"), at a named call ("run_to"),
    or only at breakpoints ("continue"); ``ignore_breakpoints`` for trace / run-to-end."""

    __slots__ = ("kind", "target", "ignore_breakpoints")

    def __init__(self, kind: str, target: str | None = None,
                 ignore_breakpoints: bool = False) -> None:
        self.kind, self.target, self.ignore_breakpoints = kind, target, ignore_breakpoints


class Stepper:
    """Stepper(vm, func_name, *args, breakpoints=(), listener=None).

    Runs ``vm[func_name](*args)`` under the stepper's control once :meth:`start` is called
    (paused before the first call, or running to the first breakpoint with
    ``start(pause=False)``). State for code and widgets: ``status`` (idle, running, paused,
    finished, error, stopped), ``pending`` (the CallRecord the run is paused before) and
    ``pending_values`` (its live argument values), ``history`` (CallRecords in call order),
    ``result``, ``error``, ``error_traceback``, ``breakpoints``. ``listener(event, stepper)``
    is called from the worker thread with "paused", "call" (after each completed call) or
    "ended".
    """

    def __init__(self, vm: VirtualMachine, func_name: str, *args: Any,
                 breakpoints: Iterable[str] = (), listener: Listener | None = None) -> None:
        if not callable(getattr(vm, "set_instrument", None)):
            raise TypeError(f"Stepper: vm must be a VirtualMachine, got {type(vm).__name__}")
        if not isinstance(func_name, str):
            raise TypeError(f"Stepper: func_name must be a str, got {type(func_name).__name__}")
        self.vm, self.func_name, self.args = vm, func_name, args
        self._func = vm[func_name]   # an unknown name fails here, in the caller's thread
        exe = getattr(vm, "executable", None)
        self._origins = getattr(exe, "call_origins", {})   # (function, index) -> CallOrigin
        self.listener = listener
        self._cond = threading.Condition()
        self._breakpoints: frozenset[str] = frozenset()
        self.set_breakpoints(breakpoints)
        self._status = IDLE
        self._mode = _Mode("step")
        self._command: tuple | None = None
        self._settled = False          # paused/ended *and* listeners told (see wait_paused)
        self._stop_requested = False
        self._pause_requested = False
        self.history: list[CallRecord] = []
        self._open: list[tuple[CallRecord, float]] = []  # calls begun, not yet completed
        self._completed = 0
        self.pending: CallRecord | None = None
        self.pending_values: tuple | None = None
        self.result: Any = None
        self.error: BaseException | None = None
        self.error_traceback = ""
        self._thread: threading.Thread | None = None
        self._ident: int | None = None
        self.listener_error = ""       # traceback of the last listener failure, if any

    # ---- state -----------------------------------------------------------------------------

    @property
    def status(self) -> str:
        return self._status

    @property
    def paused(self) -> bool:
        return self._status == PAUSED

    @property
    def done(self) -> bool:
        return self._status in ENDED

    @property
    def breakpoints(self) -> frozenset[str]:
        return self._breakpoints

    def set_breakpoints(self, names: Iterable[str]) -> None:
        """Replace the breakpoints: call symbols or fnmatch patterns (``"matmul"``,
        ``"fused_*"``). Takes effect at the next call."""
        if isinstance(names, str):
            names = [names]
        names = frozenset(names)
        bad = [n for n in names if not isinstance(n, str) or not n]
        if bad:
            raise TypeError(f"breakpoints must be non-empty strings, got {bad!r}")
        self._breakpoints = names   # one reference swap: the worker reads it unlocked

    def add_breakpoint(self, name: str) -> None:
        self.set_breakpoints(self._breakpoints | {name})

    def remove_breakpoint(self, name: str) -> None:
        """Remove ``name``; KeyError naming the current breakpoints if it is not one."""
        if name not in self._breakpoints:
            raise KeyError(f"{name!r} is not a breakpoint (breakpoints: "
                           f"{sorted(self._breakpoints)})")
        self.set_breakpoints(self._breakpoints - {name})

    @property
    def frame(self) -> pd.DataFrame:
        """The history so far as a DataFrame (see ``_call_records.records_frame``)."""
        with self._cond:
            records = list(self.history)
        return records_frame(records)

    def first_nonfinite(self) -> pd.Series | None:
        """The frame row of the first completed call that left a NaN/Inf, or None."""
        with self._cond:
            records = list(self.history)
        return Trace(records, None, self._status).first_nonfinite()

    # ---- running ---------------------------------------------------------------------------

    def start(self, pause: bool = True) -> "Stepper":
        """Start the run in a daemon worker thread: paused before the first call, or with
        ``pause=False`` running until a breakpoint or the end. Returns self."""
        if self._status != IDLE:
            raise RuntimeError(f"Stepper.start: the run was already started (status "
                               f"{self._status})")
        self._mode = _Mode("step") if pause else _Mode("continue")
        self._status = RUNNING
        self._claim_vm()
        self._thread = threading.Thread(target=self._run, name=f"vm-stepper-{self.func_name}",
                                        daemon=True)
        self._thread.start()
        return self

    def run_inline(self) -> Trace:
        """Run to the end in the calling thread without pausing (breakpoints ignored);
        returns the :class:`Trace`. Errors are recorded, not raised."""
        if self._status != IDLE:
            raise RuntimeError(f"Stepper.run_inline: the run was already started (status "
                               f"{self._status})")
        self._mode = _Mode("continue", ignore_breakpoints=True)
        self._status = RUNNING
        self._claim_vm()
        self._run()
        return self.to_trace()

    def to_trace(self) -> Trace:
        """The records so far and the outcome as a :class:`Trace`."""
        with self._cond:
            records = list(self.history)
        return Trace(records, self.result, self._status, self.error, self.error_traceback)

    def _claim_vm(self) -> None:
        with _OWNERS_LOCK:
            previous = _OWNERS.get(self.vm)
        if previous is not None and previous is not self and not previous.done:
            previous.close()
        with _OWNERS_LOCK:
            _OWNERS[self.vm] = self
            self.vm.set_instrument(self._instrument)

    def _release_vm(self) -> None:
        with _OWNERS_LOCK:
            if _OWNERS.get(self.vm) is self:
                del _OWNERS[self.vm]
                self.vm.set_instrument(None)

    def _run(self) -> None:
        self._ident = threading.get_ident()
        status, error, text, result = FINISHED, None, "", None
        try:
            result = self._func(*self.args)
        except _Stopped:
            status = STOPPED
        except Exception as err:  # shown to the user, never propagated out of the worker
            status, error, text = ERROR, err, traceback.format_exc()
        finally:
            self._release_vm()
        with self._cond:
            for rec, _ in self._open:
                rec.status = "stopped" if status == STOPPED else "error"
            self._open.clear()
            self.pending = self.pending_values = None
            self.result, self.error, self.error_traceback = result, error, text
            self._status = status
        self._notify("ended")
        with self._cond:
            self._settled = True
            self._cond.notify_all()

    # ---- the instrument (runs in the worker) -----------------------------------------------

    def _instrument(self, func: Any, symbol: str, before_run: bool, ret_value: Any,
                    *args: Any) -> int:
        if threading.get_ident() != self._ident:
            return _NO_OP   # the same VM called from another thread: not this run
        if before_run:
            return self._before(str(symbol), args)
        self._after(ret_value, args)
        return _NO_OP

    def _before(self, symbol: str, args: tuple) -> int:
        if self._stop_requested:
            raise _Stopped
        site = getattr(self.vm, "instrument_position", None)
        origin = self._origins.get((site.function, site.index)) if site is not None else None
        record = CallRecord(index=len(self.history), symbol=symbol, site=site,
                            depth=len(self._open), args=tuple(describe(a) for a in args),
                            layer=origin.layer if origin is not None else "")
        with self._cond:
            self.history.append(record)
        action = _NO_OP
        if self._should_pause(symbol, record.layer):
            action = self._pause(record, args)
        if action == _SKIP_RUN:
            record.status = "skipped"
        else:
            self._open.append((record, time.perf_counter()))
        return action

    def _after(self, ret_value: Any, args: tuple) -> None:
        stop = time.perf_counter()
        if not self._open:
            return  # a call that began before this stepper's instrument was installed
        record, begun = self._open.pop()   # calls nest: the innermost open one just ended
        after = tuple(describe(a) if a_info.kind == "tensor" else a_info
                      for a, a_info in zip(args, record.args))
        with self._cond:
            record.finish(describe(ret_value), after, stop - begun, self._completed)
            self._completed += 1
        self._notify("call")

    def _should_pause(self, symbol: str, layer: str = "") -> bool:
        # A target or breakpoint names a symbol or, for an imported model, a layer
        # ("layer1.0.conv1*"), as a name or fnmatch pattern.
        def hit(pattern: str) -> bool:
            return fnmatch.fnmatchcase(symbol, pattern) or (
                bool(layer) and fnmatch.fnmatchcase(layer, pattern))

        mode = self._mode
        if mode.kind == "step" or self._pause_requested:
            return True
        if mode.kind == "run_to" and hit(mode.target):
            return True
        if mode.ignore_breakpoints:
            return False
        return any(hit(bp) for bp in self._breakpoints)

    def _pause(self, record: CallRecord, args: tuple) -> int:
        """Block until a command arrives; apply it; return the instrument's answer."""
        with self._cond:
            record.status = "pending"
            self.pending, self.pending_values = record, args
            self._pause_requested = False
            self._status = PAUSED
        self._notify("paused")
        with self._cond:
            if self._status == PAUSED and self.pending is record:
                self._settled = True     # no command raced the listener
                self._cond.notify_all()
            # stop() sent while we were still "running" towards this pause counts too
            while self._command is None and not self._stop_requested:
                self._cond.wait()
            command, self._command = self._command or ("stop",), None
            self.pending = self.pending_values = None
            record.status = "running"
        kind = command[0]
        if kind == "stop":
            record.status = "stopped"
            raise _Stopped
        if kind == "skip":
            self._mode = _Mode("step")
            return _SKIP_RUN
        self._mode = {"step": lambda: _Mode("step"),
                      "continue": lambda: _Mode("continue", ignore_breakpoints=command[1]),
                      "run_to": lambda: _Mode("run_to", target=command[1])}[kind]()
        return _NO_OP

    def _notify(self, event: str) -> None:
        listener = self.listener
        if listener is None:
            return
        try:
            listener(event, self)
        except Exception:  # a broken view must not break the run; keep the trace for it
            self.listener_error = traceback.format_exc()

    # ---- commands (any thread) -------------------------------------------------------------

    def _send(self, command: tuple) -> None:
        with self._cond:
            if self._status != PAUSED:
                raise RuntimeError(f"{command[0]}: the run is not paused (status "
                                   f"{self._status}); use wait_paused() first")
            self._command = command
            self._status = RUNNING
            self._settled = False
            self._cond.notify_all()

    def step(self) -> None:
        """Run the pending call, then pause before the next one."""
        self._send(("step",))

    def skip(self) -> None:
        """Do not run the pending call (``SKIP_RUN``), then pause before the next one."""
        self._send(("skip",))

    def continue_(self, ignore_breakpoints: bool = False) -> None:
        """Run until a breakpoint (unless ``ignore_breakpoints``) or the end."""
        self._send(("continue", bool(ignore_breakpoints)))

    def run_to(self, name: str) -> None:
        """Run until the next call whose symbol matches ``name`` (a symbol or fnmatch
        pattern) or a breakpoint, whichever comes first; the pending call runs first."""
        if not isinstance(name, str) or not name:
            raise TypeError(f"run_to: name must be a non-empty str, got {name!r}")
        self._send(("run_to", name))

    def pause(self) -> None:
        """Ask a running run to pause before its next call (no effect when paused/ended)."""
        with self._cond:
            if self._status == RUNNING:
                self._pause_requested = True

    def stop(self) -> None:
        """Abort the run (see the module docstring); a no-op once it has ended."""
        with self._cond:
            if self._status in ENDED:
                return
            self._stop_requested = True
            if self._status == PAUSED:
                self._command = ("stop",)
                self._status = RUNNING
                self._settled = False
            self._cond.notify_all()

    def close(self, timeout: float | None = 10.0) -> bool:
        """Stop the run and wait for the worker to end; True if it has ended (False only if
        a call still running after ``timeout`` seconds keeps it busy)."""
        if self._status == IDLE:
            return True
        self.stop()
        return self.wait_done(timeout)

    def wait_paused(self, timeout: float | None = None) -> bool:
        """Block until the run is paused (True) or has ended (False), after listeners have
        been told; ``TimeoutError`` if neither happens within ``timeout`` seconds."""
        with self._cond:
            if self._status == IDLE:
                raise RuntimeError("wait_paused: the run was not started (call start())")
            if not self._cond.wait_for(lambda: self._settled, timeout):
                raise TimeoutError(f"wait_paused: still {self._status} after {timeout} s")
            return self._status == PAUSED

    def wait_done(self, timeout: float | None = None) -> bool:
        """Block until the run has ended; False on timeout. A paused run never ends by
        itself: send ``continue_`` or ``stop`` first."""
        thread = self._thread
        if thread is not None:
            thread.join(timeout)
            if thread.is_alive():
                return False
        with self._cond:
            return self._cond.wait_for(lambda: self._status in ENDED and self._settled,
                                       0 if thread is not None else timeout)

    def run_trace(self, timeout: float | None = None) -> Trace:
        """Run the rest without pausing (breakpoints ignored), wait for the end, and return
        the :class:`Trace` of every call (including those stepped through before)."""
        if self._status == IDLE:
            self.start(pause=False)
        while self.wait_paused(timeout):    # paused at a breakpoint or by pause()
            self.continue_(ignore_breakpoints=True)
        if not self.wait_done(timeout):
            raise TimeoutError(f"run_trace: the run did not end within {timeout} s")
        return self.to_trace()

    def __repr__(self) -> str:
        where = f" before #{self.pending.index} {self.pending.symbol}" if self.pending else ""
        return (f"<Stepper {self.func_name}: {self._status}{where}, "
                f"{len(self.history)} calls>")


def trace(vm: VirtualMachine, func_name: str, *args: Any) -> Trace:
    """Run ``vm[func_name](*args)`` once in the calling thread, recording every call; errors
    are recorded in the returned :class:`Trace`, not raised."""
    return Stepper(vm, func_name, *args).run_inline()

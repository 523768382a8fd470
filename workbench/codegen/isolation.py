"""Crash isolation for LLVM: compile in long-lived helper processes, so that an LLVM abort or
segfault becomes a Python exception (:class:`LLVMCrashError`) instead of the end of the
user's process (a dead notebook kernel).

Only a compile that misses the on-disk object cache comes here (``LLVMCompiler`` looks the cache
up in-process first: a cache hit costs no IPC). The request goes to an idle helper, a fresh
interpreter running :mod:`workbench.codegen.llvm_stages` as a script (``python -P <file>``: it
imports llvmlite only, never Workbench and never the user's ``__main__``), which parses,
verifies, optimises and emits the module and sends the bytes back.

- Helpers start on demand, one per concurrent compile, up to option ``compile_helpers``; a
  thread takes a helper for one request at a time, so ``build`` is safe to call from threads.
- A helper that dies mid-request (a signal, an exit) is reaped and the caller gets
  :class:`LLVMCrashError` naming the signal, the stage (:data:`llvm_stages.STAGES`), the
  module's functions, what LLVM printed, and the file the LLVM IR was saved to
  (``<cache_dir>/crashes/``). The next compile starts a new helper. A helper found dead before
  it began a request (killed while idle) is replaced and the request re-sent, once.
- Past option ``compile_timeout`` seconds the helper is killed and the same error is raised.
- Helpers exit when their parent does: end of file on their stdin, and a watchdog on their
  parent pid for the case where a fork of the parent still holds that pipe.
- A fork of the parent forgets the parent's helpers (it starts its own).

Option ``compile_isolation`` off compiles in-process, as before.
"""
from __future__ import annotations

import atexit
import hashlib
import logging
import os
import re
import signal
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

from workbench import options
from workbench.codegen import llvm_stages
from workbench.codegen.llvm_stages import STAGES, TargetSpec, read_frame, write_frame

__all__ = ["LLVMCrashError", "run", "helpers", "stats", "shutdown"]


def _cpu_count() -> int:
    try:
        return len(os.sched_getaffinity(0)) or 1
    except (AttributeError, OSError):
        return os.cpu_count() or 1


options.register("compile_isolation", bool, True, env="WORKBENCH_COMPILE_ISOLATION",
                 doc="Run LLVM (on a compile-cache miss) in a helper process, so an LLVM crash "
                     "raises LLVMCrashError instead of killing this process; off compiles "
                     "in-process.")
options.register("compile_helpers", int, _cpu_count, env="WORKBENCH_COMPILE_HELPERS",
                 doc="Most compile helper processes alive at once (one per concurrent compile; "
                     "default: the cores this process may run on).", validate=options.positive)
options.register("compile_timeout", float, 0.0, env="WORKBENCH_COMPILE_TIMEOUT",
                 doc="Seconds an isolated LLVM compile may take before its helper is killed "
                     "and LLVMCrashError raised; 0 means no limit.", validate=options.not_negative)


class LLVMCrashError(RuntimeError):
    """LLVM died (or hung past ``compile_timeout``) while compiling a module; the calling
    process is unaffected.

    Attributes: ``reason`` ("crashed" or "timeout"), ``signal`` (e.g. "SIGABRT", or None),
    ``exitcode`` (the helper's, negative for a signal), ``stage`` (a key of
    ``llvm_stages.STAGES``, or None if the helper died before it started on the module),
    ``functions`` (names defined in the LLVM module), ``ir_path`` (the saved LLVM IR, or None
    if it could not be saved) and ``llvm_log`` (what the helper printed, LLVM's messages first).
    """

    def __init__(self, message: str, *, reason: str, signal: str | None, exitcode: int | None,
                 stage: str | None, functions: list[str], ir_path: str | None,
                 llvm_log: str) -> None:
        super().__init__(message)
        self.reason = reason
        self.signal = signal
        self.exitcode = exitcode
        self.stage = stage
        self.functions = functions
        self.ir_path = ir_path
        self.llvm_log = llvm_log


class _HelperDied(Exception):
    def __init__(self, exitcode: int | None, stage: str | None, log: str, started: bool,
                 ready: bool, timed_out: bool = False) -> None:
        super().__init__(exitcode)
        self.exitcode, self.stage, self.log = exitcode, stage, log
        self.started, self.ready, self.timed_out = started, ready, timed_out


_SCRIPT = os.path.abspath(llvm_stages.__file__)
# Errors the helper reports as text, raised again here with their own type.
_ERROR_TYPES = {t.__name__: t for t in (RuntimeError, ValueError, TypeError, MemoryError,
                                        OverflowError)}
_STATS = {"started": 0, "requests": 0, "crashes": 0, "timeouts": 0}
_STATS_LOCK = threading.Lock()


def _count(name: str) -> None:
    with _STATS_LOCK:
        _STATS[name] += 1


class _Helper:
    """One helper process; used by one thread at a time (the pool sees to that)."""

    def __init__(self) -> None:
        if not sys.executable:
            raise OSError("sys.executable is not known in this interpreter")
        self.log = tempfile.TemporaryFile(prefix="workbench-compile-helper-")
        try:
            self.proc = subprocess.Popen(
                [sys.executable, "-P", _SCRIPT, str(os.getpid())], stdin=subprocess.PIPE,
                stdout=subprocess.PIPE, stderr=self.log, close_fds=True)
        except BaseException:
            self.log.close()
            raise
        _count("started")
        self.ready = False
        self.healthy = True
        self.stage: str | None = None

    @property
    def pid(self) -> int:
        return self.proc.pid

    def request(self, kind: str, ll: str, spec: TargetSpec, timeout: float
                ) -> bytes | str | Exception:
        """The result, or the exception LLVM raised for the module (returned, not raised:
        the helper is still sound); raises ``_HelperDied`` if the helper died or timed out."""
        deadline = time.monotonic() + timeout if timeout > 0 else None
        self.stage = None
        try:
            write_frame(self.proc.stdin.fileno(), (kind, ll, spec), deadline)
        except TimeoutError:
            raise self._died(timed_out=True) from None
        except OSError:   # a broken pipe: the helper died while idle
            raise self._died() from None
        while True:
            try:
                frame = read_frame(self.proc.stdout.fileno(), deadline)
            except TimeoutError:
                raise self._died(timed_out=True) from None
            if frame is None:
                raise self._died()
            tag = frame[0]
            if tag == "stage":
                self.stage = frame[1]
            elif tag == "ready":
                self.ready = True
            elif tag == "ok":
                self.stage = None
                return frame[1]
            else:   # ("error", type name, message): LLVM refused the module; helper is fine
                self.stage = None
                _, name, message = frame
                err_type = _ERROR_TYPES.get(name)
                return err_type(message) if err_type else RuntimeError(f"{name}: {message}")

    def _died(self, timed_out: bool = False) -> _HelperDied:
        self.healthy = False
        if timed_out:
            self.proc.kill()
        try:
            code = self.proc.wait(timeout=5)
        except subprocess.TimeoutExpired:   # closed its pipe but lingers: make sure
            self.proc.kill()
            code = self.proc.wait()
        return _HelperDied(code, self.stage, self._read_log(), self.stage is not None,
                           self.ready, timed_out)

    def _read_log(self) -> str:
        try:
            self.log.seek(0)
            data = self.log.read()
        except (OSError, ValueError):
            return ""
        return data[-65536:].decode("utf-8", "replace")

    def kill(self) -> None:
        """Stop the process now (its state is unknown) and release its files."""
        self.healthy = False
        if self.proc.poll() is None:
            self.proc.kill()
        self.close(wait=5)

    def close(self, wait: float = 2.0) -> None:
        """Ask the process to exit (end of file on its stdin) and release its files."""
        for f in (self.proc.stdin, self.proc.stdout):
            try:
                f.close()
            except OSError:
                pass
        try:
            self.proc.wait(timeout=wait)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
        self.log.close()


class _Pool:
    """The helpers of this process: idle ones to reuse, at most ``compile_helpers`` in all."""

    def __init__(self) -> None:
        self.cond = threading.Condition()
        self.idle: list[_Helper] = []
        self.busy: set[_Helper] = set()
        self.count = 0   # idle + busy + being started

    def acquire(self) -> _Helper:
        with self.cond:
            while not self.idle and self.count >= options.get("compile_helpers"):
                self.cond.wait()
            if self.idle:
                helper = self.idle.pop()
                self.busy.add(helper)
                return helper
            self.count += 1
        try:
            helper = _Helper()
        except BaseException:
            with self.cond:
                self.count -= 1
                self.cond.notify()
            raise
        with self.cond:
            self.busy.add(helper)
        return helper

    def release(self, helper: _Helper) -> None:
        with self.cond:
            self.busy.discard(helper)
            keep = helper.healthy and self.count <= options.get("compile_helpers")
            if keep:
                self.idle.append(helper)
            else:
                self.count -= 1
            self.cond.notify()
        if not keep:
            helper.close() if helper.healthy else helper.kill()

    def shutdown(self) -> None:
        with self.cond:
            idle, self.idle = self.idle, []
            self.count -= len(idle)
        for helper in idle:
            helper.close()


_POOL: _Pool | None = None
_POOL_LOCK = threading.Lock()
_INHERITED: list[_Pool] = []   # a fork's copy of its parent's pool, kept so it is never used


def _pool() -> _Pool:
    global _POOL
    if _POOL is None:
        with _POOL_LOCK:
            if _POOL is None:
                _POOL = _Pool()
    return _POOL


def _forget_after_fork() -> None:
    """In a forked child: the helpers belong to the parent; close our copies of their pipes."""
    global _POOL, _POOL_LOCK
    old, _POOL, _POOL_LOCK = _POOL, None, threading.Lock()
    if old is not None:
        _INHERITED.append(old)
        for helper in [*old.idle, *old.busy]:
            for f in (helper.proc.stdin, helper.proc.stdout):
                try:
                    f.close()
                except OSError:
                    pass


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_forget_after_fork)


_NO_HELPERS: list[str] = []   # why helpers cannot be started, once that is known


def _no_helpers(err: OSError) -> None:
    with _POOL_LOCK:
        if _NO_HELPERS:
            return
        _NO_HELPERS.append(f"{type(err).__name__}: {err}")
    logging.getLogger("workbench.codegen").warning(
        "LLVM compile helper: cannot start a Python process (%s); compiling in this process "
        "from now on (no crash isolation: an LLVM abort would end this process)",
        _NO_HELPERS[0])


def run(kind: str, ll: str, spec: TargetSpec) -> bytes | str:
    """Compile ``ll`` in a helper: object code ("object") or assembly text ("assembly").

    Raises what LLVM raised for a module it refuses (``RuntimeError`` for a parse or verify
    error, as in-process), or :class:`LLVMCrashError` if the helper dies or times out."""
    if _NO_HELPERS:
        return llvm_stages.run(kind, ll, spec)
    pool = _pool()
    timeout = options.get("compile_timeout")
    _count("requests")
    for attempt in (1, 2):
        try:
            helper = pool.acquire()
        except OSError as err:
            # This interpreter cannot start another (an embedded Python, a sandbox without
            # fork, a process limit): compile here, as the tuner's pools do in that case.
            _no_helpers(err)
            return llvm_stages.run(kind, ll, spec)
        try:
            result = helper.request(kind, ll, spec, timeout)
        except _HelperDied as died:
            # Dead before it began this module (killed while idle, say): the module is not
            # to blame, so try once more in a new helper.
            if not died.started and not died.timed_out and attempt == 1:
                continue
            if not died.ready and not died.timed_out:
                raise RuntimeError(
                    f"the LLVM compile helper process could not start "
                    f"({_describe_exit(died.exitcode)}); its output:\n"
                    f"{died.log.strip() or '(nothing)'}\nSet option compile_isolation=False "
                    "to compile in-process.") from None
            _count("timeouts" if died.timed_out else "crashes")
            raise _crash_error(died, kind, ll, spec, timeout) from None
        except BaseException:
            helper.healthy = False   # interrupted mid-request: its state is unknown
            raise
        finally:
            pool.release(helper)
        if isinstance(result, Exception):
            raise result
        return result
    raise AssertionError("unreachable")


def helpers() -> list[dict]:
    """The live helpers of this process: ``{"pid", "busy", "stage"}`` each (for diagnostics
    and tests; ``stage`` is the stage a busy helper last reported)."""
    pool = _pool()
    with pool.cond:
        return [{"pid": h.pid, "busy": h in pool.busy, "stage": h.stage if h in pool.busy
                 else None} for h in [*pool.busy, *pool.idle]]


def stats() -> dict:
    """Counters of this process: helpers ``started``, ``requests`` sent, ``crashes``,
    ``timeouts``."""
    with _STATS_LOCK:
        return dict(_STATS)


def shutdown() -> None:
    """Stop the idle helpers now (busy ones stop when their request ends; a later compile
    starts new ones)."""
    if _POOL is not None:
        _POOL.shutdown()


atexit.register(shutdown)


# ---- the error ---------------------------------------------------------------------------------

def _describe_exit(exitcode: int | None) -> str:
    if exitcode is None:
        return "it vanished"
    if exitcode < 0:
        try:
            sig = signal.Signals(-exitcode)
        except ValueError:
            return f"killed by signal {-exitcode}"
        desc = signal.strsignal(sig)
        return f"killed by signal {sig.name}" + (f" ({desc})" if desc else "")
    return f"exited with status {exitcode}"


_DEFINE = re.compile(r'^define\b[^@\n]*@("?)([^"(\s]+)\1\s*\(', re.MULTILINE)


def _functions(ll: str) -> list[str]:
    return [m.group(2) for m in _DEFINE.finditer(ll)]


def _llvm_said(log: str) -> str:
    """What LLVM printed: the log up to Python's own fatal-error report (which follows it)."""
    head = log.split("Fatal Python error:", 1)[0].strip()
    lines = head.splitlines()
    return "\n".join(lines[-15:])


def _save_ir(ll: str, header: str, first: str) -> tuple[str | None, str]:
    """Write the IR (with ``header`` as comments) under ``<cache_dir>/crashes``, else the
    temp dir; returns (path or None, why not)."""
    digest = hashlib.sha256(ll.encode()).hexdigest()[:12]
    name = f"{re.sub(r'[^A-Za-z0-9_.-]', '_', first)[:60] or 'module'}-{digest}.ll"
    comments = "".join(f"; {line}\n" for line in header.splitlines())
    problem = ""
    for folder in (Path(options.get("cache_dir")) / "crashes",
                   Path(tempfile.gettempdir()) / "workbench-crashes"):
        try:
            folder.mkdir(parents=True, exist_ok=True)
            path = folder / name
            path.write_text(comments + ll)
            return str(path), ""
        except OSError as err:
            problem = str(err)
    return None, problem


def _crash_error(died: _HelperDied, kind: str, ll: str, spec: TargetSpec,
                 timeout: float) -> LLVMCrashError:
    functions = _functions(ll)
    shown = ", ".join(functions[:8]) + (f" and {len(functions) - 8} more"
                                        if len(functions) > 8 else "")
    what = f"functions {shown}" if functions else "a module without functions"
    goal = "object code" if kind == "object" else "assembly"
    stage = died.stage
    where = f"while {STAGES[stage]} (stage {stage!r})" if stage in STAGES else \
        "before it started on the module"
    sig = None
    if died.exitcode is not None and died.exitcode < 0:
        try:
            sig = signal.Signals(-died.exitcode).name
        except ValueError:
            sig = str(-died.exitcode)
    if died.timed_out:
        reason = "timeout"
        head = (f"LLVM did not finish compiling {what} to {goal} within the compile_timeout of "
                f"{timeout:g} s; the helper process was killed {where}.")
    else:
        reason = "crashed"
        head = (f"LLVM crashed while compiling {what} to {goal}: the compile helper process "
                f"was {_describe_exit(died.exitcode)} {where}.")
    said = _llvm_said(died.log)
    triple, cpu, features, opt = spec
    header = "\n".join([
        f"Workbench: LLVM {reason} ({_describe_exit(died.exitcode)}), stage {stage}",
        f"target triple {triple}, cpu {cpu}, opt level {opt}",
        f"features {features}",
        "helper log:", *(died.log.strip().splitlines() or ["(empty)"]), ""])
    path, problem = _save_ir(ll, header, functions[0] if functions else "module")
    saved = (f"The LLVM IR is saved in {path} (target and log as comments at the top)."
             if path else f"The LLVM IR could not be saved: {problem}.")
    message = "\n".join([head] + (["LLVM said:\n    " + said.replace("\n", "\n    ")]
                                  if said else []) +
                        [saved, "This process is unaffected; the next compile starts a new "
                                "helper."])
    return LLVMCrashError(message, reason=reason, signal=sig, exitcode=died.exitcode,
                          stage=stage, functions=functions, ir_path=path, llvm_log=died.log)

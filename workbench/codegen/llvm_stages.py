"""The LLVM half of compilation: LLVM IR text -> parsed, verified, optimised -> object code.

This module imports nothing of Workbench (only llvmlite and the standard library) because it is
also the program of the compile helper process (:mod:`workbench.codegen.isolation`): the parent
starts ``python -P <this file>`` and sends it requests over stdin/stdout, so an LLVM abort or
segfault kills the helper, not the user's Python process. With isolation off the very same
functions run in-process, so both paths produce the same bytes for the same cache key.

Protocol (both directions): frames of a 4-byte big-endian length and a pickle. The parent sends
``(kind, ll, spec)`` with ``kind`` "object" or "assembly" and ``spec`` a :data:`TargetSpec`;
the helper answers ``("ready", pid)`` once after start-up, then per request one
``("stage", name)`` as it enters each of :data:`STAGES`, then ``("ok", bytes | str)`` or
``("error", exception type name, message)`` for an ordinary (Python-level) LLVM error.
End of file on stdin means the parent is gone: the helper exits.
"""
from __future__ import annotations

import os
import pickle
import select
import struct
import threading
import time
from typing import Callable

import llvmlite.binding as llvm

# (triple, CPU name, feature string, opt level): everything the target machine depends on.
TargetSpec = tuple[str, str, str, int]

# What each stage does, for error messages (the order is the order they run in).
STAGES = {
    "parse": "parsing the LLVM IR",
    "verify": "verifying the LLVM module",
    "optimize": "running the LLVM optimisation pipeline (new pass manager)",
    "codegen": "generating machine code (instruction selection, register allocation, emission)",
}

_LOCK = threading.Lock()
_MACHINES: dict[TargetSpec, llvm.TargetMachine] = {}


def init_llvm() -> None:
    llvm.initialize_native_target()
    llvm.initialize_native_asmprinter()


def target_machine(spec: TargetSpec) -> llvm.TargetMachine:
    """The (cached) target machine of ``spec``; thread-safe."""
    with _LOCK:
        tm = _MACHINES.get(spec)
        if tm is None:
            init_llvm()
            triple, cpu, features, opt_level = spec
            tm = llvm.Target.from_triple(triple).create_target_machine(
                cpu=cpu, features=features, opt=min(opt_level, 3), reloc="pic",
                codemodel="default")
            _MACHINES[spec] = tm
    return tm


def _no_stage(name: str) -> None:
    pass


def optimized_module(ll: str, spec: TargetSpec,
                     on_stage: Callable[[str], None] = _no_stage) -> llvm.ModuleRef:
    """Parse, verify and optimise ``ll`` for ``spec`` (O3 is capped at 3, as llvmlite needs)."""
    tm = target_machine(spec)
    on_stage("parse")
    mod = llvm.parse_assembly(ll)
    mod.triple = tm.triple
    mod.data_layout = str(tm.target_data)
    on_stage("verify")
    mod.verify()
    on_stage("optimize")
    pto = llvm.create_pipeline_tuning_options(speed_level=min(spec[3], 3))
    pto.loop_vectorization = True
    pto.slp_vectorization = True
    pto.loop_unrolling = True
    pb = llvm.create_pass_builder(tm, pto)
    pb.getModulePassManager().run(mod, pb)
    return mod


def run(kind: str, ll: str, spec: TargetSpec,
        on_stage: Callable[[str], None] = _no_stage) -> bytes | str:
    """Object code (``kind`` "object") or assembly text ("assembly") of ``ll`` for ``spec``."""
    if kind not in ("object", "assembly"):
        raise ValueError(f"unknown compile request kind {kind!r}")
    mod = optimized_module(ll, spec, on_stage)
    on_stage("codegen")
    tm = target_machine(spec)
    return tm.emit_object(mod) if kind == "object" else tm.emit_assembly(mod)


# ---- framing ----------------------------------------------------------------------------------

_HEADER = struct.Struct(">I")


def write_frame(fd: int, obj: object, deadline: float | None = None) -> None:
    """Send ``obj`` on ``fd``; ``TimeoutError`` past ``deadline`` (a ``time.monotonic()``
    value), checked between pieces: with a deadline it writes page-sized pieces, and only when
    the pipe has room, so a reader that stopped reading cannot block it for ever."""
    data = pickle.dumps(obj, protocol=pickle.HIGHEST_PROTOCOL)
    view = memoryview(_HEADER.pack(len(data)) + data)
    while view:
        if deadline is None:
            view = view[os.write(fd, view):]
            continue
        left = deadline - time.monotonic()
        if left <= 0 or not select.select([], [fd], [], left)[1]:
            raise TimeoutError
        view = view[os.write(fd, view[:4096]):]


def _read_exact(fd: int, n: int, deadline: float | None) -> bytes | None:
    chunks, got = [], 0
    while got < n:
        if deadline is not None:
            left = deadline - time.monotonic()
            if left <= 0 or not select.select([fd], [], [], left)[0]:
                raise TimeoutError
        chunk = os.read(fd, n - got)
        if not chunk:
            return None
        chunks.append(chunk)
        got += len(chunk)
    return b"".join(chunks)


def read_frame(fd: int, deadline: float | None = None) -> object | None:
    """The next frame on ``fd``; None at end of file; ``TimeoutError`` past ``deadline``
    (a ``time.monotonic()`` value)."""
    head = _read_exact(fd, _HEADER.size, deadline)
    if head is None:
        return None
    body = _read_exact(fd, _HEADER.unpack(head)[0], deadline)
    return None if body is None else pickle.loads(body)


# ---- the helper process -----------------------------------------------------------------------

def _exit_with_parent(parent: int) -> None:
    """Exit as soon as the parent is gone, even in the middle of a compile: stdin reaches end
    of file only if no other process (say, a fork of the parent) still holds its write end."""
    def watch() -> None:
        while True:
            time.sleep(0.5)
            if os.getppid() != parent:
                os._exit(0)

    threading.Thread(target=watch, name="exit-with-parent", daemon=True).start()


def serve() -> None:
    """The helper's main loop (see the module docstring)."""
    import faulthandler
    import signal

    import sys

    # The parent passes its pid: if it died before we started, there is nobody to serve.
    parent = int(sys.argv[1]) if len(sys.argv) > 1 else os.getppid()
    if os.getppid() != parent:
        return
    # Ctrl-C in a terminal reaches the whole process group: the parent decides what to stop.
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    # Frames go to a private copy of stdout; anything else printed lands in the log (stderr).
    out = os.dup(1)
    os.dup2(2, 1)
    faulthandler.enable()   # the Python stack of a crash goes to the log too
    _exit_with_parent(parent)
    init_llvm()
    write_frame(out, ("ready", os.getpid()))
    while True:
        request = read_frame(0)
        if request is None:
            return
        kind, ll, spec = request
        # The log (stderr, a file the parent reads after a crash) holds one job at a time.
        try:
            os.ftruncate(2, 0)
            os.lseek(2, 0, os.SEEK_SET)
        except OSError:
            pass
        try:
            result = run(kind, ll, tuple(spec), lambda name: write_frame(out, ("stage", name)))
        except Exception as err:  # noqa: BLE001 - every error goes back to the parent
            write_frame(out, ("error", type(err).__name__, str(err)))
        else:
            write_frame(out, ("ok", result))


if __name__ == "__main__":
    serve()

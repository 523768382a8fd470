"""Getting native code into the process: MCJIT for object code, dlopen for shared libraries,
the C compiler for export, and libgomp for parallel loops.

Each loader returns a :class:`LoadedCode`, which resolves symbol addresses and keeps whatever
owns the code (the MCJIT engine or the ``ctypes.CDLL``) alive; the Module holds it, so code is
never freed while a PackedFunc can still call it.

libgomp: ``GOMP_parallel(fn, data, nthreads=0, flags)`` runs with the calling thread's
``nthreads-var``, which ``omp_set_num_threads`` sets *for the calling thread only*. So the
runtime applies the ``num_threads`` option per thread, lazily, from the call path of modules
that use libgomp (:func:`apply_num_threads`), keyed on :func:`workbench.options.generation`.
So a change through ``options.set``/``options.override`` takes effect at the next call; a
change of ``WORKBENCH_NUM_THREADS`` in ``os.environ`` after a thread's first parallel call is
only seen after the next option change (or in new threads). Idle libgomp threads spin
``GOMP_SPINCOUNT`` times before sleeping; the runtime sets it from the option
``omp_spin_count`` while it loads libgomp (:func:`gomp_environment`), so our pool leaves the
cores to other libraries soon after our last parallel region.

libgomp reads its environment once, when loaded, and a process has one libgomp (PyTorch's
wheel brings its own ``libgomp.so.1``; the dynamic linker shares whichever copy came first).
When PyTorch is imported first, our parallel loops run on its libgomp with libgomp's default
spinning (``GOMP_SPINCOUNT`` 300000, milliseconds): on a machine busier than its cores
(issue 26: JupyterLab and Chromium on the same 2 cores as the kernel) a thread spinning at a
barrier burns the time slice the thread it waits for needs, and every parallel region then
costs a scheduling round -- notebook 07's untuned ResNet-18 took 259 ms instead of 35. So
``import workbench`` loads libgomp at once (:func:`preload_gomp`): a library imported after it
shares the bounded spinning (PyTorch's own pool degrades less too), and when another library
was first, a warning says so and what to do.
"""
from __future__ import annotations

import contextlib
import ctypes
import ctypes.util
import hashlib
import itertools
import json
import logging
import os
import shutil
import subprocess
import tempfile
import threading
from typing import Any, Iterator

from .. import options
from .heap import keep_kernel_scratch

__all__ = ["LoadedCode", "load_object", "load_shared", "link_shared", "sources_object",
           "ensure_gomp", "uses_gomp", "apply_num_threads", "wake_threads", "gomp_environment",
           "preload_gomp",
           "read_metadata",
           "METADATA_SYMBOL", "SOURCES_SYMBOL"]

METADATA_SYMBOL = "__workbench_metadata"
SOURCES_SYMBOL = "__workbench_sources"
METADATA_VERSION = 1

_lock = threading.Lock()
_gomp: ctypes.CDLL | None = None
_gomp_error: str | None = None
_llvm_ready = False
_tls = threading.local()
logger = logging.getLogger("workbench.runtime")


class LoadedCode:
    """Native code in the process: ``address(symbol)`` -> int (0 if absent)."""

    def __init__(self, owner: Any, resolve: Any, origin: str) -> None:
        self.owner = owner          # the engine or CDLL; keeping it referenced keeps the code
        self._resolve = resolve
        self.origin = origin        # "mcjit" or the path of the loaded library

    def address(self, symbol: str) -> int:
        return self._resolve(symbol)


# -- libgomp --------------------------------------------------------------------------------

def uses_gomp(obj: bytes) -> bool:
    """Does this object code reference libgomp? (Symbol names sit in the string table.)"""
    return b"GOMP_" in obj or b"omp_get_" in obj


def ensure_gomp(required: bool) -> ctypes.CDLL | None:
    """Load libgomp process-wide once (so MCJIT and dlopen resolve GOMP_* against it).

    Returns the library, or None when it is missing and not ``required``; raises
    ``RuntimeError`` when it is missing and ``required`` (the module uses parallel loops).
    """
    global _gomp, _gomp_error
    with _lock:
        if _gomp is None and _gomp_error is None:
            _gomp, _gomp_error = _load_gomp()
    if _gomp is None and required:
        raise RuntimeError(
            "this module uses parallel loops (GOMP_* symbols) but libgomp could not be loaded: "
            f"{_gomp_error}. Install the GCC OpenMP runtime (e.g. apt-get install libgomp1) "
            "or compile without parallel loops.")
    return _gomp


def _load_gomp() -> tuple[ctypes.CDLL | None, str | None]:
    import llvmlite.binding as llvm

    name = ctypes.util.find_library("gomp")
    if name is None:
        return None, "ctypes.util.find_library('gomp') found nothing"
    try:
        with _gomp_environment(name):
            llvm.load_library_permanently(name)
            lib = ctypes.CDLL(name, mode=ctypes.RTLD_GLOBAL)
    except (OSError, RuntimeError) as err:
        return None, f"loading {name} failed: {err}"
    lib.omp_set_num_threads.argtypes = [ctypes.c_int]
    lib.omp_set_num_threads.restype = None
    lib.omp_get_max_threads.restype = ctypes.c_int
    return lib, None


def gomp_environment(already_loaded: bool = False) -> dict[str, str]:
    """The environment variables libgomp should see when the runtime loads it: the option
    ``omp_spin_count`` as ``GOMP_SPINCOUNT``, unless it is -1, the user's environment sets
    ``GOMP_SPINCOUNT`` or ``OMP_WAIT_POLICY``, or libgomp is ``already_loaded`` (it reads its
    environment once, when loaded)."""
    spin = int(options.get("omp_spin_count"))
    if spin < 0 or already_loaded or "GOMP_SPINCOUNT" in os.environ or \
            "OMP_WAIT_POLICY" in os.environ:
        return {}
    return {"GOMP_SPINCOUNT": str(spin)}


def env_wanted() -> bool:
    """Would the runtime set ``GOMP_SPINCOUNT`` for a libgomp it loads itself?"""
    return bool(gomp_environment())


def preload_gomp() -> None:
    """Load libgomp now (``import workbench`` calls this), so that it gets the runtime's
    spin count even if a library loading its own libgomp (PyTorch) is imported next; see the
    module docstring. Nothing happens when the spin count is left to libgomp (the option
    ``omp_spin_count`` is -1, or ``GOMP_SPINCOUNT`` / ``OMP_WAIT_POLICY`` are set) or libgomp
    is not installed."""
    if env_wanted():
        ensure_gomp(required=False)


@contextlib.contextmanager
def _gomp_environment(name: str) -> Iterator[None]:
    """Set :func:`gomp_environment` while libgomp loads, then restore ``os.environ`` so child
    processes inherit the user's environment, not ours."""
    try:
        ctypes.CDLL(name, mode=os.RTLD_NOLOAD)
        loaded = True
    except OSError:
        loaded = False
    env = gomp_environment(already_loaded=loaded)
    if loaded and env_wanted():
        logger.warning(
            "libgomp (OpenMP) was loaded by another library (PyTorch?) before workbench, so its "
            "idle threads spin for milliseconds: on a busy machine parallel kernels can run "
            "several times slower. Import workbench before torch, or set GOMP_SPINCOUNT=%s "
            "(or OMP_WAIT_POLICY=passive) before Python starts.",
            options.get("omp_spin_count"))
    saved = {k: os.environ.get(k) for k in env}
    os.environ.update(env)
    try:
        yield
    finally:
        for k, v in saved.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v


# -- libmvec (glibc's vector math: exp, log, tanh, ... on SIMD registers) -----------------

_mvec_loaded = False


def uses_mvec(obj: bytes) -> bool:
    """Does this object code call glibc vector-ABI math functions (``_ZGV...``)?"""
    return b"_ZGV" in obj


def ensure_mvec(required: bool) -> None:
    """Load libmvec process-wide once so MCJIT resolves its ``_ZGV*`` symbols."""
    global _mvec_loaded
    if _mvec_loaded or not required:
        return
    import llvmlite.binding as llvm
    name = ctypes.util.find_library("mvec")
    if name is None:
        raise RuntimeError("this module calls glibc vector math (libmvec) but libmvec could "
                           "not be found; rebuild it on this machine")
    with _lock:
        llvm.load_library_permanently(name)
        ctypes.CDLL(name, mode=ctypes.RTLD_GLOBAL)
        _mvec_loaded = True


def apply_num_threads() -> None:
    """Make the calling thread's OpenMP default thread count follow the ``num_threads`` option.
    Cheap when nothing changed: one thread-local read and an integer comparison."""
    gen = options._GENERATION[0]
    if getattr(_tls, "gen", -1) == gen or _gomp is None:
        return
    _gomp.omp_set_num_threads(int(options.get("num_threads")))
    _tls.gen = gen


# A parallel region that only counts the threads that ran it.
_EMPTY_REGION_IR = """
define void @wb_empty_region(i8* %data) {
  %count = bitcast i8* %data to i32*
  %old = atomicrmw add i32* %count, i32 1 seq_cst
  ret void
}
"""
_empty_region: list = []   # [(GOMP_parallel, address of the region, its ctypes function)]


def wake_threads() -> int:
    """Run an empty parallel region on the calling thread's OpenMP team, so that its idle
    threads are awake, spinning, when the next parallel kernel starts (as between the
    kernels of a model). Returns how many threads ran the region (the team size the
    ``num_threads`` option gives); 0 when libgomp is not loaded (no team to wake).

    Why: an idle team thread sleeps after ``omp_spin_count`` spins, and its CPU may then
    idle; the next parallel call waits for it to wake. A timed call that follows some
    single-threaded work (the runner's cache flush: ~0.5 ms for 9 MB) pays that wake, which a
    kernel inside a model, its team spinning since the kernel before, does not. On a 2-core
    Sapphire Rapids VM the wake cost 50-60 us a call: ResNet-18's 56x56 Winograd kernel
    measured 401-443 us flushed against 349-399 us flushed and woken, a 7x7 3x3 convolution
    787-847 against 732-797; a 35 us convolution after 1 ms asleep, 67-83 against 46-52."""
    if _gomp is None:
        return 0
    if not _empty_region:
        fn = jit_host_ir(_EMPTY_REGION_IR, "wb_empty_region",
                         ctypes.CFUNCTYPE(None, ctypes.c_void_p))
        parallel = _gomp.GOMP_parallel
        parallel.argtypes = [ctypes.c_void_p, ctypes.c_void_p, ctypes.c_uint, ctypes.c_uint]
        parallel.restype = None
        _empty_region.append((parallel, ctypes.cast(fn, ctypes.c_void_p).value, fn))
    parallel, address, _ = _empty_region[0]
    apply_num_threads()
    count = ctypes.c_int32(0)
    parallel(address, ctypes.addressof(count), 0, 0)
    return count.value


# -- MCJIT ----------------------------------------------------------------------------------

def _init_llvm() -> None:
    global _llvm_ready
    if not _llvm_ready:
        import llvmlite.binding as llvm

        llvm.initialize_native_target()
        llvm.initialize_native_asmprinter()
        _llvm_ready = True


_host_engines: list = []  # keep the engines of jit_host_ir (and their code) alive


def jit_host_ir(ir: str, name: str, ctype: Any) -> Any:
    """Compile LLVM IR text for this host's CPU and features (-O2) and return its function
    ``name`` as the ctypes function type ``ctype``. For small helper loops (the peak loops,
    the cache flush); the engine lives as long as the process."""
    import llvmlite.binding as llvm

    _init_llvm()
    with _lock:
        tm = llvm.Target.from_triple(llvm.get_process_triple()).create_target_machine(
            cpu=llvm.get_host_cpu_name(), features=llvm.get_host_cpu_features().flatten(),
            opt=2)
        mod = llvm.parse_assembly(ir)
        mod.verify()
        engine = llvm.create_mcjit_compiler(mod, tm)
        engine.finalize_object()
        _host_engines.append(engine)
        return ctype(engine.get_function_address(name))


def load_object(obj: bytes) -> LoadedCode:
    """Load relocatable object code for the host into a fresh MCJIT engine (or, see
    :func:`use_linked_loader`, link it into a shared library and dlopen that).

    External symbols resolve against the process (libm via Python, libgomp via
    :func:`ensure_gomp`). Raises ``ValueError`` if the bytes are not an object file.
    """
    import llvmlite.binding as llvm

    if not isinstance(obj, (bytes, bytearray)) or not obj:
        raise TypeError(f"object code must be non-empty bytes, got {type(obj).__name__}")
    if not (obj[:4] == b"\x7fELF" or obj[:4] in (b"\xcf\xfa\xed\xfe", b"\xce\xfa\xed\xfe")
            or obj[:2] == b"\x64\x86"):
        raise ValueError("object code is not an ELF/Mach-O/COFF object file "
                         f"(starts with {bytes(obj[:4])!r})")
    if obj[:4] == b"\x7fELF" and use_linked_loader():
        return _load_linked(bytes(obj))
    ensure_gomp(required=uses_gomp(obj))
    keep_kernel_scratch()
    ensure_mvec(required=uses_mvec(obj))
    _init_llvm()
    with _lock:
        target = llvm.Target.from_default_triple()
        tm = target.create_target_machine(jit=True)
        empty = llvm.parse_assembly("")
        empty.triple = llvm.get_process_triple()
        engine = llvm.create_mcjit_compiler(empty, tm)
        engine.add_object_file(llvm.ObjectFileRef.from_data(bytes(obj)))
        engine.finalize_object()

    def resolve(symbol: str) -> int:
        # A missing symbol is address 0 (MCJIT's getGlobalValueAddress contract).
        return int(engine.get_global_value_address(symbol) or 0)

    return LoadedCode((engine, tm), resolve, "mcjit")


# Above this much native library code mapped into the process (PyTorch's CUDA build maps
# ~3 GB), MCJIT is unsafe: its memory manager maps the code and the constant/GOT sections of
# one object separately, the kernel may place them in holes more than 2 GB apart, and
# RuntimeDyld then aborts the whole process on a 32-bit PC-relative relocation
# ("Assertion `isInt<32>(RealOffset)' failed"). A shared library is mapped as one image.
_LINK_ABOVE_BYTES = 1 << 30


def _mapped_library_bytes() -> int:
    try:
        with open("/proc/self/maps") as f:
            lines = f.readlines()
    except OSError:
        return 0
    total = 0
    for line in lines:
        parts = line.split()
        if len(parts) >= 6 and ".so" in parts[5]:
            lo, hi = (int(x, 16) for x in parts[0].split("-"))
            total += hi - lo
    return total


def use_linked_loader() -> bool:
    """Whether :func:`load_object` links object code into a shared library (with the C
    compiler) and dlopens it instead of using MCJIT: option ``kernel_loader`` -- ``"mcjit"``,
    ``"linked"``, or ``"auto"`` (linked when a C compiler is available and more than 1 GiB of
    native libraries are mapped, e.g. after ``import torch``)."""
    mode = options.get("kernel_loader")
    if mode == "mcjit":
        return False
    if mode == "linked":
        return True
    try:
        _find_cc()
    except RuntimeError:
        return False
    return _mapped_library_bytes() > _LINK_ABOVE_BYTES


def _load_linked(obj: bytes) -> LoadedCode:
    with tempfile.TemporaryDirectory(prefix="workbench-jit-") as tmp:
        path = os.path.join(tmp, "kernels.so")
        link_shared([obj], path, need_gomp=uses_gomp(obj))
        with open(path, "rb") as f:
            data = f.read()
    # A library of its own per load, as MCJIT gives each module its own code and globals (a
    # content-addressed path would make two modules built from the same code share them).
    return load_shared(data, "<object code linked with the C compiler>", private=True)


# -- shared libraries -----------------------------------------------------------------------

_so_dir: str | None = None
_load_serial = itertools.count()


def _private_copy(data: bytes, unique: bool = False) -> str:
    """dlopen caches by path name: reloading a re-exported file at the same path would return
    the stale library. Load a content-addressed copy in a private directory instead
    (``unique``: a copy no other load shares)."""
    global _so_dir
    digest = hashlib.sha256(data).hexdigest()[:24]
    with _lock:
        if _so_dir is None:
            _so_dir = tempfile.mkdtemp(prefix="workbench-so-")
        if unique:
            digest += f"-{next(_load_serial)}"
    copy = os.path.join(_so_dir, digest + ".so")
    if not os.path.exists(copy):
        tmp = copy + f".{os.getpid()}.{threading.get_ident()}.tmp"
        with open(tmp, "wb") as f:
            f.write(data)
        os.replace(tmp, copy)
    return copy


def load_shared(data: bytes, origin: str, private: bool = False) -> LoadedCode:
    """dlopen the shared library whose file contents are ``data`` (written by
    :func:`link_shared`; ``origin`` is its path, for messages). RTLD_LOCAL: its symbols do
    not leak into other modules. ``private``: its own instance (globals included) even if the
    same bytes were loaded before."""
    if data[:4] != b"\x7fELF":
        raise ValueError(f"{origin} is not an ELF shared library")
    ensure_gomp(required=b"GOMP_" in data)
    keep_kernel_scratch()
    ensure_mvec(required=uses_mvec(data))
    try:
        lib = ctypes.CDLL(_private_copy(data, private), mode=ctypes.RTLD_LOCAL)
    except OSError as err:
        raise RuntimeError(f"cannot load the shared library {origin}: {err}") from None

    def resolve(symbol: str) -> int:
        try:
            return ctypes.addressof(ctypes.c_char.in_dll(lib, symbol))
        except ValueError:
            return 0

    return LoadedCode(lib, resolve, origin)


def _find_cc() -> str:
    configured = options.get("cc")
    candidates = [configured] if configured else ["cc", "gcc", "clang"]
    for name in candidates:
        found = shutil.which(name)
        if found:
            return found
    raise RuntimeError(
        "export_library needs a C compiler to link a shared library, but none of "
        f"{candidates} is on PATH; install one (e.g. apt-get install gcc), set the option "
        "'cc' (WORKBENCH_CC), or export to a path ending in '.o' instead")


def link_shared(objects: list[bytes], path: str, need_gomp: bool) -> None:
    """Link object files into the shared library ``path`` with the system C compiler."""
    cc = _find_cc()
    with tempfile.TemporaryDirectory(prefix="workbench-link-") as tmp:
        files = []
        for i, obj in enumerate(objects):
            name = os.path.join(tmp, f"part{i}.o")
            with open(name, "wb") as f:
                f.write(obj)
            files.append(name)
        out = os.path.join(tmp, "out.so")
        cmd = [cc, "-shared", "-o", out, *files, "-lm"]
        if need_gomp:
            cmd.append("-lgomp")
        if any(uses_mvec(o) for o in objects):
            cmd.append("-lmvec")
        proc = subprocess.run(cmd, capture_output=True, text=True)
        if proc.returncode != 0:
            hint = ""
            if "recompile with -fPIC" in proc.stderr or "relocation" in proc.stderr:
                hint = (" (the object code is not position-independent: codegen must emit "
                        "it with reloc='pic' to be exported as a shared library)")
            raise RuntimeError(f"export_library: linking failed{hint}:\n$ {' '.join(cmd)}\n"
                               f"{proc.stderr.strip()}")
        # Write next to the destination and rename, so a reader never sees half a file.
        dest_tmp = f"{path}.{os.getpid()}.tmp"
        shutil.copyfile(out, dest_tmp)
        os.replace(dest_tmp, path)


def sources_object(sources: dict[str, str]) -> bytes:
    """A tiny object file defining ``__workbench_sources``: the sources as NUL-terminated JSON,
    so an exported library can still answer ``get_source``."""
    import llvmlite.binding as llvm
    import llvmlite.ir as ir

    _init_llvm()
    data = json.dumps(sources).encode("utf-8") + b"\0"
    mod = ir.Module(name="workbench_sources")
    mod.triple = llvm.get_process_triple()
    ty = ir.ArrayType(ir.IntType(8), len(data))
    gv = ir.GlobalVariable(mod, ty, SOURCES_SYMBOL)
    gv.global_constant = True
    gv.initializer = ir.Constant(ty, bytearray(data))
    tm = llvm.Target.from_default_triple().create_target_machine(reloc="pic", codemodel="default")
    return tm.emit_object(llvm.parse_assembly(str(mod)))


# -- metadata -------------------------------------------------------------------------------

def read_metadata(code: LoadedCode) -> dict:
    """Read and validate ``__workbench_metadata`` (NUL-terminated JSON, docs/internals.md)."""
    addr = code.address(METADATA_SYMBOL)
    if not addr:
        raise ValueError(f"the compiled code defines no {METADATA_SYMBOL!r} global; it was not "
                         "produced by workbench.codegen (or the symbol is not external)")
    try:
        meta = json.loads(ctypes.string_at(addr).decode("utf-8"))
    except (UnicodeDecodeError, json.JSONDecodeError) as err:
        raise ValueError(f"{METADATA_SYMBOL} is not valid JSON: {err}") from None
    if not isinstance(meta, dict) or meta.get("version") != METADATA_VERSION:
        raise ValueError(f"{METADATA_SYMBOL}: unsupported metadata version "
                         f"{meta.get('version') if isinstance(meta, dict) else meta!r} "
                         f"(this runtime reads version {METADATA_VERSION})")
    if not isinstance(meta.get("functions"), list):
        raise ValueError(f"{METADATA_SYMBOL}: 'functions' must be a list")
    return meta


def read_sources(code: LoadedCode) -> dict[str, str]:
    addr = code.address(SOURCES_SYMBOL)
    if not addr:
        return {}
    try:
        found = json.loads(ctypes.string_at(addr).decode("utf-8"))
    except (UnicodeDecodeError, json.JSONDecodeError):
        return {}
    return found if isinstance(found, dict) else {}

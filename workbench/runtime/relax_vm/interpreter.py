"""The bytecode interpreter: decodes an Executable once, then runs it with a tight loop.

Decoding (at VM creation) turns every VM function into

- ``template``: the initial register file -- ``register_file_size`` empty registers followed by
  *literal slots* holding every immediate, constant, function and special register the
  function reads, and one scratch slot that absorbs writes to ``%void``;
- ``code``: one 4-tuple per instruction, ``(op, a, b, c)``:

  ========  =====================================  ========================================
  op        a, b, c                                effect
  ========  =====================================  ========================================
  CALL (0)  callee, args getter, dst slot          ``regs[c] = a(*b(regs))``
  RET (1)   result slot                            ``return regs[a]``
  GOTO (2)  offset                                 ``pc += a``
  IF (3)    cond slot, false offset                ``pc += 1 if regs[a] else b``
  END (4)   --                                     ran past the last instruction: error
  HEAP (5)  allocator, args getter, dst slot       ``regs[c] = a shape heap`` (below)
  ========  =====================================  ========================================

Because literals live in the register file, every argument is an index, and the getter is an
``operator.itemgetter`` (C code) built once: a call costs one tuple unpack, one C-level gather
and the callee itself -- no dictionary lookups, no per-argument Python branching. Callees are
resolved once: kernels to their generated checker functions, Python packed functions to the
wrapped callable, VM functions to their runner.

Shape heaps are reused per frame: a function with symbolic shapes starts with
``vm.builtin.alloc_shape_heap`` (VMShapeLower's first binding; making a fresh int64 tensor costs
~3 us, a noticeable share of a small dynamic-shape model's call). When a function has exactly
one such call, it decodes to HEAP: the fast loop takes a heap from the runner's free list (or
allocates one when the list is empty), keeps it in a hidden register, and gives it back on
Ret. A frame owns its heap from HEAP to Ret, so recursive, nested and concurrent (threads)
calls each get their own; a frame that raises simply does not give its heap back. The heap's
stale values are harmless: VMShapeLower stores every slot (match_shape, shape_func) before
reading it. The hooked loop allocates a fresh heap through the builtin, as before, so
instruments and the profiler see the call unchanged.

A second, slower loop (:func:`_run_hooked`) runs whenever an instrument is set or the profiler
is running; the fast loop checks that with one list lookup per *function* call.

Before either loop, a function that :func:`replay.replayable` accepts (no jumps; only kernels
and memory / check / tuple builtins) is recorded on its first uninstrumented call and replayed
after (``replay.py``): each runner keeps its free plans in a list, taken with an atomic
``pop`` like the shape heaps, and any call a plan's guard refuses is interpreted.
"""
from __future__ import annotations

from operator import itemgetter
from typing import Any, Callable, NamedTuple, Sequence

from ... import options
from ..ndarray import NDArray
from ..packed_func import PackedFunc
from ..profiling.metrics import ARGUMENT_SHAPES
from .builtins import make_shape, make_shape_site
from .bytecode import BEGIN_SPECIAL_REG, VM_REG, VOID_REG, ArgKind, Call, Goto, If, Ret
from .executable import Executable, VMFuncInfo, VMFuncKind
from .objects import InternalError, VMClosure, shape_string
from .replay import capture, replayable

__all__ = ["Interpreter", "SKIP_RUN", "CallSite"]

CALL, RET, GOTO, IF, END, HEAP = 0, 1, 2, 3, 4, 5
HEAP_BUILTIN = "vm.builtin.alloc_shape_heap"
SKIP_RUN = 1


class CallSite(NamedTuple):
    """Where the Call an instrument is being told about sits: the VM function, the
    instruction's index inside it, and its global instruction index (TVM's ``pc``)."""

    function: str
    index: int
    pc: int


class Hooks:
    """What the slow loop consults: the instrument and the running profiler (or None).
    ``position`` is the :class:`CallSite` of the Call the instrument is being called for
    (set by the slow loop just before each instrument event; stale outside them)."""

    __slots__ = ("active", "instrument", "profiler", "position", "context")

    def __init__(self) -> None:
        self.active = [False]        # a list so runners read it with one subscript
        self.instrument: Callable[..., Any] | None = None
        self.profiler: Any = None
        self.position: CallSite | None = None
        # (the builtins' context as the registers hold it: a weak proxy of the VM, a weak
        # reference to the VM): an instrument is shown the VM itself, as in TVM
        self.context: tuple[Any, Callable[[], Any]] | None = None

    def shown(self, args: tuple) -> tuple:
        """``args`` as an instrument sees them: the context proxy replaced by the VM."""
        ctx = self.context
        if ctx is None:
            return args
        proxy, vm = ctx
        return tuple(vm() if a is proxy else a for a in args)

    def update(self) -> None:
        self.active[0] = self.instrument is not None or (
            self.profiler is not None and self.profiler.is_running())


def _fast_callable(obj: Any) -> Callable[..., Any]:
    """The cheapest callable equivalent to calling ``obj``."""
    if isinstance(obj, PackedFunc):
        return obj._call    # skips PackedFunc.__call__'s frame
    if isinstance(obj, VMClosure) and not obj.captured:
        return obj.impl
    return obj


def _getter(indices: Sequence[int]) -> Callable[[list], Sequence[Any]]:
    """A C-level function returning ``[regs[i] for i in indices]`` as a sequence."""
    n = len(indices)
    if n == 0:
        return itemgetter(slice(0, 0))
    first = indices[0]
    if list(indices) == list(range(first, first + n)):
        return itemgetter(slice(first, first + n))
    return itemgetter(*indices)


class _Decoder:
    """Decodes one VM function into (template, code, call_info)."""

    def __init__(self, exe: Executable, func: VMFuncInfo, pool: list[Any], ctx: Any) -> None:
        self.exe, self.func, self.pool, self.ctx = exe, func, pool, ctx
        self.nreg = func.register_file_size
        self.literals: list[Any] = []
        self.literal_slot: dict[tuple, int] = {}

    def literal(self, key: tuple, value: Any) -> int:
        slot = self.literal_slot.get(key)
        if slot is None:
            slot = self.nreg + len(self.literals)
            self.literals.append(value)
            self.literal_slot[key] = slot
        return slot

    def reg(self, reg: int) -> int:
        if reg == VOID_REG:
            return self.literal(("void",), None)
        if reg == VM_REG:
            return self.literal(("vm",), self.ctx)
        if not 0 <= reg < self.nreg:
            raise InternalError(f"VM function {self.func.name!r} uses register %{reg} but its "
                                f"register file has {self.nreg} registers")
        return reg

    def arg(self, arg: Any) -> int:
        kind, value = arg.kind, arg.value
        if kind == ArgKind.Register:
            return self.reg(value)
        if kind == ArgKind.Immediate:
            return self.literal(("imm", value), value)
        if kind == ArgKind.ConstIdx:
            return self.literal(("const", value), self.exe.constants[value])
        return self.literal(("func", value), self.pool[value])

    def decode(self) -> tuple[list, list, list]:
        """(template, code, info); ``info[pc]`` is (callee object, name, source metrics,
        generic) for a Call, for the hooked loop's instrument and profiler (the metrics of the
        call's ``CallOrigin``, or None; ``generic``: None, or the (callable, getter) of the
        plain call when ``code[pc]`` runs a specialised one, e.g. a ``make_shape`` site)."""
        func = self.func
        code: list[tuple] = []
        info: list[tuple | None] = []
        for pc in range(func.start_instr, func.end_instr):
            instr = self.exe.instruction(pc)
            entry, call_info = self._DECODERS[type(instr)](self, instr, pc - func.start_instr)
            code.append(entry)
            info.append(call_info)
        code.append((END, None, None, None))
        info.append(None)
        # Writes to %void go to the "scratch" literal, never to the shared None of reads.
        template = [None] * self.nreg + self.literals
        return template, code, info

    def _call(self, instr: Call, pc: int) -> tuple[tuple, tuple]:
        callee = self.pool[instr.func_idx]
        slots = [self.arg(a) for a in instr.args]
        dst = (self.literal(("scratch",), None) if instr.dst >= BEGIN_SPECIAL_REG
               else self.reg(instr.dst))
        origin = self.exe.call_origins.get((self.func.name, pc))
        fn, getter = _fast_callable(callee), _getter(slots)
        info = (callee, self.exe.func_table[instr.func_idx].name,
                origin.metrics() if origin is not None else None, None)
        if fn is make_shape and len(instr.args) >= 2 and all(
                a.kind == ArgKind.Immediate for a in instr.args[1:]):
            # The hooked loop calls the generic builtin (info[3]): hooks see the same call.
            n, *codes = (a.value for a in instr.args[1:])
            info = (*info[:3], (fn, getter))
            fn, getter = make_shape_site(n, tuple(codes)), _getter(slots[:1])
        return (CALL, fn, getter, dst), info

    def _ret(self, instr: Ret, pc: int) -> tuple[tuple, None]:
        return (RET, self.reg(instr.result), None, None), None

    def _goto(self, instr: Goto, pc: int) -> tuple[tuple, None]:
        self.check_target(pc, instr.pc_offset)
        return (GOTO, instr.pc_offset, None, None), None

    def _if(self, instr: If, pc: int) -> tuple[tuple, None]:
        self.check_target(pc, instr.false_offset)
        return (IF, self.reg(instr.cond), instr.false_offset, None), None

    _DECODERS = {Call: _call, Ret: _ret, Goto: _goto, If: _if}

    def check_target(self, pc: int, offset: int) -> None:
        n = self.func.end_instr - self.func.start_instr
        if not 0 <= pc + offset <= n:
            raise InternalError(f"VM function {self.func.name!r}: jump by {offset} at "
                                f"instruction {pc} leaves the function (0..{n})")


class Interpreter:
    """Runs an executable's VM functions; ``closures[name]`` are callable entry points."""

    def __init__(self, exe: Executable, ctx: Any,
                 resolve_packed: Callable[[str], Any]) -> None:
        self.exe = exe
        self.hooks = Hooks()
        self.pool: list[Any] = []
        installers = []
        self.closures: dict[str, VMClosure] = {}
        for func in exe.func_table:
            if func.kind == VMFuncKind.PACKED_FUNC:
                self.pool.append(resolve_packed(func.name))
            elif func.kind == VMFuncKind.VM_FUNC:
                sites = _heap_sites(exe, func)
                runner, install = _make_runner(func, self.hooks, len(sites) == 1)
                closure = VMClosure(func.name, runner)
                self.pool.append(closure)
                self.closures[func.name] = closure
                installers.append((func, install, sites))
            else:
                raise NotImplementedError(
                    f"function {func.name!r} is a VM-TIR function (compiled exec mode), which "
                    "this VM does not run; compile with exec_mode='bytecode'")
        for func, install, sites in installers:
            template, code, info = _Decoder(exe, func, self.pool, ctx).decode()
            install(*_pool_shape_heap(template, code, info, sites))


def _heap_sites(exe: Executable, func: VMFuncInfo) -> list[int]:
    """Indices (in ``func``) of the Calls of ``alloc_shape_heap`` writing a register."""
    return [pc - func.start_instr for pc in range(func.start_instr, func.end_instr)
            if isinstance(instr := exe.instruction(pc), Call) and instr.dst < BEGIN_SPECIAL_REG
            and exe.func_table[instr.func_idx].name == HEAP_BUILTIN]


def _pool_shape_heap(template: list, code: list, info: list, sites: list[int]
                     ) -> tuple[list, list, list, int | None]:
    """Turn a function's one ``alloc_shape_heap`` Call into HEAP, appending the hidden register
    that holds the frame's heap to the template (see the module docstring). Returns the
    (template, code, info, hidden slot or None) the runner is installed with; functions with
    no heap, or with several heap allocations, keep plain Calls. ``sites``: from
    :func:`_heap_sites`."""
    if len(sites) != 1:
        return template, code, info, None
    pc = sites[0]
    _, alloc, args, dst = code[pc]
    code = list(code)
    code[pc] = (HEAP, alloc, args, dst)
    return [*template, None], code, info, len(template)


def _arity_error(func: VMFuncInfo, got: int) -> InternalError:
    names = f" ({', '.join(func.param_names)})" if func.param_names else ""
    plural = "s" if func.num_args != 1 else ""
    return InternalError(f"Invoking function {func.name} expects {func.num_args} argument"
                         f"{plural}{names}, but {got} arguments were provided.")


def _make_runner(func: VMFuncInfo, hooks: Hooks, with_heap: bool = False
                 ) -> tuple[Callable[..., Any], Callable]:
    """The runner of one VM function, and the installer that gives it its decoded code (code
    can only be decoded once every runner exists, since calls refer to each other).
    ``with_heap``: the function has one ``alloc_shape_heap`` call (:func:`_heap_sites`)."""
    nargs = func.num_args
    active = hooks.active
    template: list = []
    code: list = []
    info: list = []
    heaps: list = []          # this function's free shape heaps (module docstring)
    hold = 0                  # the hidden register of the frame's heap
    replay = [_REPLAY_OFF]    # static replay (replay.py): off, capture next call, or replay
    plans: list = []          # its free plans (a busy plan is out of the list)

    def install(t: list, c: list, i: list, heap_slot: int | None) -> None:
        nonlocal template, code, info, hold
        if (heap_slot is not None) != with_heap:
            raise InternalError(f"VM function {func.name!r}: shape-heap decoding disagrees "
                                "with its runner")
        template, code, info = t, c, i
        hold = heap_slot or 0
        if options.get("vm_static_replay") and replayable(code, info, CALL, RET):
            replay[0] = _REPLAY_CAPTURE

    def replay_call(args: tuple) -> Any:
        """The call's result by replay (or by the capturing run), or _MISS: interpret it."""
        try:
            plan = plans.pop()          # atomic: a plan serves one call at a time
        except IndexError:
            if replay[0] != _REPLAY_CAPTURE:
                return _MISS            # every plan is busy in another thread
            replay[0] = _REPLAY_ON
            regs = template[:]
            regs[:nargs] = args
            try:
                result, plan = capture(regs, code, info, nargs, CALL)
            except BaseException:
                replay[0] = _REPLAY_CAPTURE    # e.g. a bad input: capture on a later call
                raise
            if plan is None:
                replay[0] = _REPLAY_OFF
            else:
                plans.append(plan)
            return result
        try:
            return plan.run(args) if plan.matches(args) else _MISS
        finally:
            plans.append(plan)

    def run(*args: Any) -> Any:
        if len(args) != nargs:
            raise _arity_error(func, len(args))
        if replay[0] and not active[0]:
            result = replay_call(args)
            if result is not _MISS:
                return result
        regs = template[:]
        regs[:nargs] = args
        if active[0]:
            return _run_hooked(func, regs, code, info, hooks)
        pc = 0
        while True:
            op, a, b, c = code[pc]
            if op == CALL:              # most frequent first
                regs[c] = a(*b(regs))
                pc += 1
            elif op == RET:
                return regs[a]
            elif op == GOTO:
                pc += a
            elif op == IF:
                pc += 1 if regs[a] else b
            else:
                raise _fell_off(func)

    def run_with_heap(*args: Any) -> Any:
        """``run`` for a function with a HEAP instruction: the same loop, plus HEAP and the
        heap's return on Ret (a second copy so functions without a heap pay nothing)."""
        if len(args) != nargs:
            raise _arity_error(func, len(args))
        regs = template[:]
        regs[:nargs] = args
        if active[0]:
            return _run_hooked(func, regs, code, info, hooks)
        pc = 0
        while True:
            op, a, b, c = code[pc]
            if op == CALL:
                regs[c] = a(*b(regs))
                pc += 1
            elif op == RET:
                heap, result = regs[hold], regs[a]
                if heap is not None and heap is not result:
                    heaps.append(heap)
                return result
            elif op == GOTO:
                pc += a
            elif op == IF:
                pc += 1 if regs[a] else b
            elif op == HEAP:
                # pop is atomic: two threads never take the same heap (and no test of
                # ``heaps`` before it, which another thread could empty in between).
                try:
                    heap = heaps.pop()
                except IndexError:
                    heap = a(*b(regs))
                regs[c] = regs[hold] = heap
                pc += 1
            else:
                raise _fell_off(func)

    if with_heap:
        run = run_with_heap
    run.__name__ = run.__qualname__ = f"vm_function_{func.name}"
    run.replay_status = lambda: _REPLAY_STATUS[replay[0]]   # type: ignore[attr-defined]
    return run, install


_REPLAY_OFF, _REPLAY_CAPTURE, _REPLAY_ON = 0, 1, 2
_REPLAY_STATUS = {_REPLAY_OFF: "interpreted", _REPLAY_CAPTURE: "capture pending",
                  _REPLAY_ON: "replayed"}
_MISS = object()


def _fell_off(func: VMFuncInfo) -> InternalError:
    return InternalError(f"VM function {func.name!r} ran past its last instruction without "
                         "a Ret")


def _run_hooked(func: VMFuncInfo, regs: list, code: list, info: list, hooks: Hooks) -> Any:
    """The loop with instrument callbacks and profiler frames around every Call."""
    pc = 0
    while True:
        op, a, b, c = code[pc]
        if op == CALL:
            callee, name, source, generic = info[pc]
            if generic is not None:
                a, b = generic
            args = tuple(b(regs))
            site = CallSite(func.name, pc, func.start_instr + pc)
            regs[c] = _hooked_call(a, callee, name, args, hooks, site, source)
            pc += 1
        elif op == RET:
            return regs[a]
        elif op == GOTO:
            pc += a
        elif op == IF:
            pc += 1 if regs[a] else b
        elif op == HEAP:            # a fresh heap through the builtin, seen by the hooks
            callee, name, source, _ = info[pc]
            args = tuple(b(regs))
            site = CallSite(func.name, pc, func.start_instr + pc)
            regs[c] = _hooked_call(a, callee, name, args, hooks, site, source)
            pc += 1
        else:
            raise _fell_off(func)


def _hooked_call(fn: Callable[..., Any], callee: Any, name: str, args: tuple,
                 hooks: Hooks, site: CallSite | None = None,
                 source: dict[str, str] | None = None) -> Any:
    profiler = hooks.profiler
    opened = False
    if profiler is not None and profiler.is_running():
        tensors = [x for x in args if isinstance(x, NDArray)]
        if tensors:
            metrics = {ARGUMENT_SHAPES: shape_string(tensors)}
            if source:
                metrics.update(source)
            profiler.start_call(name, tensors[-1]._device, metrics)
            opened = True
    try:
        instrument = hooks.instrument
        if instrument is None:
            return fn(*args)
        hooks.position = site
        shown = hooks.shown(args)
        action = instrument(callee, name, True, None, *shown)
        if isinstance(action, int) and not isinstance(action, bool) and action == SKIP_RUN:
            return None
        result = fn(*args)
        hooks.position = site  # a nested VM function's calls moved it
        instrument(callee, name, False, result, *shown)
        return result
    finally:
        if opened:
            profiler.stop_call()

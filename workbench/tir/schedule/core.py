"""``tir.Schedule``: a traced schedule over an IRModule, handing out block/loop/expr handles.

Every primitive call checks its arguments, runs the pure primitive on the current PrimFunc, and,
only if that succeeded, installs the new PrimFunc and records one instruction in the trace. A
failing primitive raises :class:`ScheduleError` and leaves the schedule exactly as it was.
Primitive families live in mixins (``loop_methods`` etc.), composed in ``schedule.py``.
"""
from __future__ import annotations

import contextlib
import functools
import inspect
from typing import TYPE_CHECKING, Any, Callable, Iterator

from workbench.ir.module import IRModule
from workbench.tir.expr import Var
from workbench.tir.function import PrimFunc
from workbench.tir.schedule.error import ScheduleError
from workbench.tir.schedule.handles import BlockRV, ExprRV, LoopRV, RandomEngine
from workbench.tir.schedule.instruction import Instruction, get_kind
from workbench.tir.schedule.state import FuncIndex
from workbench.tir.schedule.trace import Trace

if TYPE_CHECKING:
    from workbench.tir.schedule.schedule import Schedule


def traced(kind_name: str, sampling: bool = False) -> Callable:
    """Record a successful call of a Schedule method as an instruction of ``kind_name``.

    The method's parameters are split into the kind's inputs and attrs by name. A sampling
    method returns ``(result, decision)``; the decision is stored in the trace. Calls made by
    other primitives (nested) are not recorded.
    """
    kind = get_kind(kind_name)

    def wrap(method: Callable) -> Callable:
        sig = inspect.signature(method)
        input_names = [n.lstrip("*") for n in kind.inputs]

        params_list = list(sig.parameters.values())
        simple = all(p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD, p.KEYWORD_ONLY)
                     for p in params_list)
        names = [p.name for p in params_list]
        positional = [p.name for p in params_list
                      if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)]
        defaults = {p.name: p.default for p in params_list if p.default is not p.empty}

        def bind(self: Any, args: tuple, kwargs: dict) -> dict[str, Any]:
            # A fast equivalent of sig.bind(...).apply_defaults() for plain signatures
            # (the common case; this runs for every primitive call of every replay).
            if simple and len(args) + 1 <= len(positional) and \
                    all(k in defaults or k in names for k in kwargs):
                out = dict(defaults)
                out.update(zip(positional, (self,) + args))
                for k in kwargs:
                    if k in out and k in positional[:len(args) + 1]:
                        break
                else:
                    out.update(kwargs)
                    if len(out) == len(names):
                        return out
            bound = sig.bind(self, *args, **kwargs)
            bound.apply_defaults()
            return bound.arguments

        @functools.wraps(method)
        def call(self: "Schedule", *args: Any, **kwargs: Any) -> Any:
            if self._depth == 0:
                params = bind(self, args, kwargs)  # raises TypeError on a bad call
            self._depth += 1
            try:
                result = method(self, *args, **kwargs)
            finally:
                self._depth -= 1
            decision = None
            if sampling:
                result, decision = result
            if self._depth == 0:
                inputs = [_freeze(params[n]) for n in input_names]
                attrs = [_freeze(params[n]) for n in kind.attrs]
                outputs = [] if result is None else \
                    list(result) if isinstance(result, (list, tuple)) else [result]
                self._trace.append(Instruction(kind, inputs, attrs, outputs), decision)
            return result
        return call
    return wrap


# Lookups and loop annotations that move nothing are sound inside a blockized block's init
# (RewriteTensorize vectorizes the init of a tensorized block this way); everything else would
# schedule part of an init as if it were a stage of its own.
_INIT_PRIMITIVES = frozenset({"get_block", "get_loops", "vectorize", "unroll"})


def _check_not_in_init(index: FuncIndex, key: str | Var, primitive: str) -> None:
    if primitive in _INIT_PRIMITIVES:
        return
    owner = index.init_owner(key)
    if owner is not None:
        what = f"block {key!r}" if isinstance(key, str) else f"loop {key.name!r}"
        raise ScheduleError(primitive, what, f"it is inside the init statement of block "
                            f"{owner!r} (blockize of a reduction puts its init there); it is part "
                            "of that init, not a stage that can be scheduled")


def _freeze(x: Any) -> Any:
    if isinstance(x, tuple):
        return list(x)
    return x


class _SRef:
    """What ``get_sref`` returns: the statement a handle points to and its parent statement."""

    def __init__(self, stmt: Any, parent: Any) -> None:
        self.stmt = stmt
        self.parent = parent

    def __repr__(self) -> str:
        return f"StmtSRef({type(self.stmt).__name__})"


class ScheduleCore:
    """State, handle table and lookups shared by all primitive families."""

    def __init__(self, mod: IRModule | PrimFunc, *, seed: int | None = None,
                 debug_mask: str | int = "all", error_render_level: str = "detail",
                 enable_check: bool = True) -> None:
        if isinstance(mod, PrimFunc):
            mod = IRModule({mod.attrs.get("global_symbol", "main"): mod})
        if not isinstance(mod, IRModule):
            raise TypeError(f"Schedule takes an IRModule or a PrimFunc, got {type(mod).__name__}")
        funcs = [name for name, f in mod.items() if isinstance(f, PrimFunc)]
        if not funcs:
            raise ValueError("Schedule needs an IRModule with at least one PrimFunc")
        self._mod = mod.copy()
        self._func_name = "main" if "main" in funcs else funcs[0]
        self._rand = RandomEngine(seed)
        self._trace = Trace()
        self._symbols: dict[Any, Any] = {}
        self._index_cache: tuple[PrimFunc, FuncIndex] | None = None
        self._depth = 0
        self.debug_mask = debug_mask
        self.error_render_level = error_render_level
        self.enable_check = enable_check
        FuncIndex(self._func)  # fail early on duplicate block names

    @classmethod
    def _restore(cls, mod: IRModule, func_name: str, trace: Trace, symbols: dict,
                 rand: RandomEngine) -> "ScheduleCore":
        """A schedule from state computed elsewhere (a replay worker): ``symbols`` maps the
        trace's handles to blocks and loops of ``mod``, as the schedule that made them did."""
        new = object.__new__(cls)
        new._mod = mod
        new._func_name = func_name
        new._rand = rand
        new._trace = trace
        new._symbols = symbols
        new._index_cache = None
        new._depth = 0
        new.debug_mask = "all"
        new.error_render_level = "detail"
        new.enable_check = True
        return new

    def snapshot(self) -> tuple:
        """``(mod, func_name, trace, handle table, random engine)``: everything this schedule
        is, as plain picklable data (the replay pool's workers send finished schedules back
        this way); :meth:`from_snapshot` rebuilds a full Schedule from it."""
        return (self._mod, self._func_name, self._trace, self._symbols, self._rand)

    @classmethod
    def from_snapshot(cls, snapshot: tuple) -> "ScheduleCore":
        """The schedule a :meth:`snapshot` describes; the handles in its trace resolve as
        they did in the original (they travel with the handle table)."""
        return cls._restore(*snapshot)

    # -- state -----------------------------------------------------------------------------
    @property
    def mod(self) -> IRModule:
        return self._mod.copy()

    @property
    def trace(self) -> Trace:
        return self._trace

    @property
    def func_working_on(self) -> str:
        return self._func_name

    @property
    def _func(self) -> PrimFunc:
        return self._mod[self._func_name]

    def func_index(self) -> FuncIndex:
        """A read-only index of the function being scheduled, for schedule rules,
        postprocessors and mutators that need facts the handle API does not give.

        ``func`` is the current PrimFunc; ``blocks`` maps each block name to a ``BlockInfo``
        (block, realize, ancestors, ``loops``); ``loops`` maps each loop variable to a
        ``LoopInfo``; ``block_order`` lists block names in pre-order. The index describes one
        version of the IR: a primitive that changes the IR makes it stale, so call again
        afterwards (it is rebuilt once per version and cached). Never modify it: change the
        schedule only through its primitives, so every change is in the trace.
        """
        func = self._func
        if self._index_cache is None or self._index_cache[0] is not func:
            self._index_cache = (func, FuncIndex(func))
        return self._index_cache[1]

    #: The name the primitives use (and rules used before ``func_index`` was public).
    _index = func_index

    def _commit(self, func: PrimFunc) -> None:
        self._mod[self._func_name] = func

    def work_on(self, func_name: str) -> None:
        if func_name not in self._mod or not isinstance(self._mod[func_name], PrimFunc):
            raise ValueError(f"work_on: the module has no PrimFunc {func_name!r}")
        self._func_name = func_name

    def copy(self) -> "Schedule":
        new = object.__new__(type(self))
        new.__dict__.update(self.__dict__)
        new._mod = self._mod.copy()
        new._trace = self._trace.copy()
        new._symbols = dict(self._symbols)
        new._rand = RandomEngine(self._rand.fork_seed())
        new._depth = 0
        return new

    def seed(self, seed: int) -> None:
        self._rand.seed(seed)

    def fork_seed(self) -> int:
        return self._rand.fork_seed()

    # -- handles ---------------------------------------------------------------------------
    def _new_block_rv(self, name: str) -> BlockRV:
        rv = BlockRV()
        self._symbols[rv] = name
        return rv

    def _new_loop_rv(self, var: Var | str) -> LoopRV:
        rv = LoopRV()
        self._symbols[rv] = var
        return rv

    def _new_expr_rv(self, value: int) -> ExprRV:
        rv = ExprRV()
        self._symbols[rv] = int(value)
        return rv

    def _block_name(self, rv: Any, primitive: str) -> str:
        if not isinstance(rv, BlockRV):
            raise TypeError(f"{primitive}: expected a BlockRV, got {rv!r}")
        name = self._symbols.get(rv)
        if name is None:
            raise ScheduleError(primitive, repr(rv), "this handle does not belong to the schedule")
        index = self._index()
        if name not in index.blocks:
            raise ScheduleError(primitive, f"block {name!r}", "the block no longer exists "
                                "(an earlier primitive removed it)")
        _check_not_in_init(index, name, primitive)
        return name

    def _loop_var(self, rv: Any, primitive: str) -> Var:
        if not isinstance(rv, LoopRV):
            raise TypeError(f"{primitive}: expected a LoopRV, got {rv!r}")
        var = self._symbols.get(rv, rv.special)
        if var is None:
            raise ScheduleError(primitive, repr(rv), "this handle does not belong to the schedule")
        if isinstance(var, str):
            raise ScheduleError(primitive, f"the {var} location", "it is not a real loop")
        index = self._index()
        if var not in index.loops:
            raise ScheduleError(primitive, f"loop {var.name!r}", "the loop no longer exists "
                                "(an earlier split, fuse or inline removed it)")
        _check_not_in_init(index, var, primitive)
        return var

    def _block_or_loop(self, rv: Any, primitive: str) -> str | Var:
        if isinstance(rv, BlockRV):
            return self._block_name(rv, primitive)
        if isinstance(rv, LoopRV):
            return self._loop_var(rv, primitive)
        raise TypeError(f"{primitive}: expected a BlockRV or LoopRV, got {rv!r}")

    def _int(self, x: Any, primitive: str) -> int | None:
        """An integer argument given as int, ExprRV or None."""
        if x is None or isinstance(x, int):
            return x
        if isinstance(x, ExprRV):
            if x not in self._symbols:
                raise ScheduleError(primitive, repr(x), "this handle does not belong to the "
                                    "schedule")
            return self._symbols[x]
        if hasattr(x, "value"):
            return int(x.value)
        raise TypeError(f"{primitive}: expected an int or ExprRV, got {x!r}")

    def has_block(self, rv: Any) -> bool:
        """Whether ``rv`` is a BlockRV of this schedule whose block still exists (TVM's
        ``HasBlock``): an earlier primitive (compute_inline, ...) may have removed it."""
        name = self._symbols.get(rv) if isinstance(rv, BlockRV) else None
        return isinstance(name, str) and name in self._index().blocks

    def get(self, rv: Any) -> Any:
        """The Block, For or int a handle stands for now."""
        if isinstance(rv, BlockRV):
            return self._index().blocks[self._block_name(rv, "get")].block
        if isinstance(rv, LoopRV):
            value = self._symbols.get(rv, rv.special)
            if isinstance(value, str):
                return value
            return self._index().loops[self._loop_var(rv, "get")].loop
        if isinstance(rv, ExprRV):
            return self._int(rv, "get")
        raise TypeError(f"get: expected a BlockRV, LoopRV or ExprRV, got {rv!r}")

    def get_sref(self, rv: Any) -> _SRef:
        if isinstance(rv, BlockRV):
            info = self._index().blocks[self._block_name(rv, "get_sref")]
            return _SRef(info.block, info.ancestors[-1] if info.ancestors else None)
        info = self._index().loops[self._loop_var(rv, "get_sref")]
        return _SRef(info.loop, info.ancestors[-1] if info.ancestors else None)

    @contextlib.contextmanager
    def _atomic(self) -> Iterator[None]:
        """Undo the trace entries and handles recorded inside the block if it raises: a public
        method that records helper instructions (``get_sblock`` for blocks given by name)
        before the primitive itself must leave no trace of a refused call."""
        n_trace, symbols = len(self._trace), dict(self._symbols)
        try:
            yield
        except BaseException:
            while len(self._trace) > n_trace:
                self._trace.pop()
            self._symbols = symbols
            raise

    def remove_rv(self, rv: Any) -> None:
        self._symbols.pop(rv, None)

    # -- display ---------------------------------------------------------------------------
    def show(self) -> None:
        print(self._func.script(self._func_name))
        print()
        print(self._trace)

    def _repr_html_(self) -> str:
        from workbench.ir.printer import html_highlight
        return ("<div><b>IR</b>" + html_highlight(self._func.script(self._func_name)) +
                "<b>Trace</b>" + html_highlight(str(self._trace)) + "</div>")

    def __repr__(self) -> str:
        return f"<Schedule of {self._func_name!r}: {len(self._trace)} instruction(s)>"

    def enter_postproc(self) -> None:
        self._trace.append(Instruction(get_kind("EnterPostproc"), [], [], []))


__all__ = ["ScheduleCore", "traced", "ScheduleError"]

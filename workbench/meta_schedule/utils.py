"""Helpers shared by the tuner: ``derived_object``, seeds, core counts, FLOP estimates.

``derived_object`` is TVM's decorator for user subclasses of the ``Py*`` extension points
(``PyRunner``, ``PyCostModel``, ``PySearchStrategy``, ...). TVM needs it to wrap a Python
class into an FFI object; in pure Python every subclass already works wherever the built-ins
go, so the decorator only checks the class honestly: it must derive from a ``Py*`` base (one
with ``_tvm_metadata``), and it must implement every abstract method. It then marks the class
(``cls._derived_object = True``) and returns it unchanged.
"""
from __future__ import annotations

import ast
import inspect
import os
import textwrap
from typing import Any, Callable, Sequence, TypeVar

import numpy as np

from workbench.ir.module import IRModule
from workbench.ir.structural import structural_hash
from workbench.tir.expr import (
    Add, BufferLoad, Call, Div, FloorDiv, FloorMod, IntImm, Max, Min, Mod, Mul, PrimExpr, Select,
    Sub, expr_children,
)
from workbench.tir.function import PrimFunc
from workbench.tir.functor import IRVisitor
from workbench.tir.stmt import Block, BufferStore, For

__all__ = ["derived_object", "fork_seed", "cpu_count", "get_num_threads", "shash2hex",
           "estimate_tir_flops", "median", "normalize_mod", "KindTable"]

T = TypeVar("T", bound=type)


def derived_object(cls: T) -> T:
    """Validate and mark a user subclass of a ``Py*`` extension class (see module docstring).

    A method listed in the base's ``_tvm_metadata["methods"]`` counts as missing when it is
    abstract or still the base's stub that only raises ``NotImplementedError``. Raises ``TypeError`` when ``cls`` is not a class deriving from a ``Py*`` base, or when it
    leaves abstract methods unimplemented (naming them), so a mistake shows at definition time
    rather than deep inside a tuning run.
    """
    if not inspect.isclass(cls):
        raise TypeError(f"derived_object decorates a class, got {cls!r}")
    bases = [b for b in cls.__mro__[1:] if "_tvm_metadata" in b.__dict__]
    if not bases:
        raise TypeError(f"derived_object: {cls.__name__} must subclass one of the Py* extension "
                        "classes (PyRunner, PyBuilder, PyDatabase, PyCostModel, "
                        "PySearchStrategy, PyScheduleRule, PyPostproc, PyMutator, "
                        "PyMeasureCallback, PyTaskScheduler, PySpaceGenerator, "
                        "PyFeatureExtractor)")
    base = bases[0]
    methods = base.__dict__["_tvm_metadata"].get("methods", ())
    missing = set(getattr(cls, "__abstractmethods__", ()) or ())
    # Bases that are not ABCs mark required methods with a stub that only raises
    # NotImplementedError; still inheriting such a stub means the method is missing.
    missing.update(m for m in methods if _is_stub(getattr(cls, m, None)))
    if missing:
        raise TypeError(f"derived_object: {cls.__name__} (a {base.__name__}) does not "
                        f"implement {', '.join(sorted(missing))}")
    cls._derived_object = True
    return cls


def _is_stub(method: Any) -> bool:
    """Abstract, or a body that is only (a docstring and) ``raise NotImplementedError``."""
    if method is None:
        return False
    if getattr(method, "__isabstractmethod__", False):
        return True
    func = getattr(method, "__func__", method)
    try:
        tree = ast.parse(textwrap.dedent(inspect.getsource(func)))
    except (OSError, TypeError, SyntaxError):
        return False
    body = tree.body[0].body if tree.body and hasattr(tree.body[0], "body") else []
    if body and isinstance(body[0], ast.Expr) and isinstance(body[0].value, ast.Constant):
        body = body[1:]
    if len(body) != 1 or not isinstance(body[0], ast.Raise) or body[0].exc is None:
        return False
    exc = body[0].exc.func if isinstance(body[0].exc, ast.Call) else body[0].exc
    return isinstance(exc, ast.Name) and exc.id == "NotImplementedError"


class KindTable:
    """One family's classes by name (``@register_mutator(name)`` and the like) and the end of
    the family's ``create(kind)``, after the target kinds' default lists: a registered name
    gives a new object, a GPU target kind is refused, anything else lists the names."""

    def __init__(self, family: str) -> None:
        self.family = family
        self.classes: dict[str, Callable[[], Any]] = {}

    def register(self, name: str) -> Callable[[type], type]:
        """Register a class under ``name`` for ``<family>.create(name)``."""
        def wrap(cls: type) -> type:
            self.classes[name] = cls
            return cls
        return wrap

    def create(self, kind: str) -> Any:
        if kind in self.classes:
            return self.classes[kind]()
        if kind in ("cuda", "cuda-tensorcore", "hexagon"):
            raise ValueError(f"{self.family}.create: target kind {kind!r} is not supported; "
                             "Workbench compiles for CPUs ('llvm') only")
        raise ValueError(f"{self.family}.create: unknown kind {kind!r}; expected 'llvm' or one "
                         f"of {', '.join(sorted(self.classes))}")


def fork_seed(seed: int | None, n: int) -> list[int]:
    """``n`` seeds derived from ``seed`` (TVM's ``fork_seed``: numpy draws in [1, 2**30))."""
    if seed is None or seed == -1:
        seed = np.random.randint(1, 2**30)
    return [int(x) for x in np.random.RandomState(seed).randint(1, 2**30, size=n)]


def cpu_count(logical: bool = True) -> int:
    """Logical or physical CPU count (physical via psutil when available)."""
    if not logical:
        try:
            import psutil
            n = psutil.cpu_count(logical=False)
            if n:
                return int(n)
        except ImportError:  # pragma: no cover - psutil is a dependency in practice
            pass
    return os.cpu_count() or 1


def get_num_threads(num_threads: int | str | None) -> int:
    """``"physical"`` / ``"logical"`` / an int (>= 1) / None (logical) as a thread count."""
    if num_threads is None or num_threads == "logical":
        return cpu_count(logical=True)
    if num_threads == "physical":
        return cpu_count(logical=False)
    if isinstance(num_threads, int) and num_threads >= 1:
        return num_threads
    raise ValueError(f"num_threads must be 'physical', 'logical' or a positive int, got "
                     f"{num_threads!r}")


def shash2hex(mod: IRModule) -> str:
    """The 16-hex-digit structural hash of a module (cost-model group keys)."""
    return f"{structural_hash(mod) & 0xFFFFFFFFFFFFFFFF:016x}"


def median(values: Sequence[float]) -> float:
    """Median; the mean of the two middle values for an even count (as TVM's scheduler)."""
    xs = sorted(float(v) for v in values)
    n = len(xs)
    if n == 0:
        raise ValueError("median of an empty list")
    mid = n // 2
    return xs[mid] if n % 2 else 0.5 * (xs[mid - 1] + xs[mid])


def normalize_mod(mod: Any) -> IRModule:
    """TVM's tune_tir normalisation: a PrimFunc becomes ``IRModule({"main": f})`` with
    ``global_symbol="main"`` and ``tir.noalias``; a one-function module not named main is
    renamed to main."""
    if isinstance(mod, PrimFunc):
        func = mod
        if "global_symbol" not in func.attrs:
            func = func.with_attr("global_symbol", "main")
        if "tir.noalias" not in func.attrs:
            func = func.with_attr("tir.noalias", True)
        return IRModule({"main": func})
    if not isinstance(mod, IRModule):
        raise TypeError(f"expected an IRModule or a PrimFunc, got {type(mod).__name__}")
    funcs = [(n, f) for n, f in mod.items() if isinstance(f, PrimFunc)]
    if len(funcs) == 1 and funcs[0][0] != "main" and len(list(mod.items())) == 1:
        func = funcs[0][1].with_attr("global_symbol", "main")
        return IRModule({"main": func})
    return mod


# ---- FLOP estimate (TVM's EstimateTIRFlops, for the statistics table) ------------------------

_FLOP_NODES = (Add, Sub, Mul, Div, Mod, FloorDiv, FloorMod, Min, Max)
#: Calls whose first argument is a condition choosing among the others.
_CHOICE_CALLS = frozenset({"if_then_else", "tir.if_then_else"})


class _FlopCounter(IRVisitor):
    """Every arithmetic op in a stored value counts once, times the enclosing loop extents."""

    def __init__(self) -> None:
        super().__init__()
        self.scale = 1
        self.total = 0

    def visit_For(self, loop: For) -> None:
        ext = loop.extent.value if isinstance(loop.extent, IntImm) else 1
        saved = self.scale
        self.scale *= max(1, ext)
        self.visit(loop.body)
        self.scale = saved

    def visit_Block(self, block: Block) -> None:
        if block.init is not None:
            self.visit(block.init)
        self.visit(block.body)

    def visit_BufferStore(self, store: BufferStore) -> None:
        self.total += self.scale * _count_ops(store.value)


def _count_ops(expr: Any) -> int:
    """Arithmetic nodes in ``expr``. Load indices are address math, not FLOPs, and so are the
    conditions of ``if_then_else`` and ``Select``: they choose a value (a padded window's
    bounds check, ``oh * 2 + kh >= 1 and ...``), like the comparisons in them, which are free.
    (Counting them made a depthwise convolution with its padding inlined 4-6x its FLOPs, and
    the roofline showed it at 140-220% of the machine's peak.)"""
    count = 0
    stack = [expr]
    while stack:
        node = stack.pop()
        if isinstance(node, _FLOP_NODES):
            count += 1
        if isinstance(node, Select):
            stack += [node.true_value, node.false_value]
        elif isinstance(node, Call) and node.op in _CHOICE_CALLS:
            stack.extend(node.args[1:])
        elif isinstance(node, PrimExpr) and not isinstance(node, BufferLoad):
            stack.extend(expr_children(node))
    return count


def estimate_tir_flops(mod: IRModule | PrimFunc) -> float:
    """Floating/integer arithmetic ops in all stored values times loop trip counts (init
    included); comparisons, loads and conditions are free. A 128^3 matmul gives 2 * 128^3."""
    funcs = [mod] if isinstance(mod, PrimFunc) else \
        [f for _, f in mod.items() if isinstance(f, PrimFunc)]
    counter = _FlopCounter()
    for f in funcs:
        counter.visit(f.body)
    return float(counter.total)

"""The TVMScript round trip as a check: print -> parse -> structurally equal.

:func:`check_roundtrip` prints a PrimFunc, Relax function or IRModule, parses the text back
and compares; ``None`` means the text says everything the IR holds. :class:`RoundTripInstrument`
runs that check on the modules passes see, so a whole test suite (or a user's build) can ask
"does every module we make print as TVMScript that reads back the same?"::

    from workbench.script.roundtrip import RoundTripInstrument
    with PassContext(instruments=[RoundTripInstrument(mode="all")]):
        relax.build(mod, target="llvm")   # raises RoundTripError naming the pass and function

The canonicalisation is the one the printer forces: a SeqStmt nested directly in a SeqStmt
prints as one sequence (Python, like TVMScript, has no sequence-inside-a-sequence statement),
so both sides are compared with nested sequences flattened.
"""
from __future__ import annotations

import sys
from dataclasses import dataclass
from typing import Any, Callable

from workbench.ir.instrument import PassInstrument
from workbench.ir.module import IRModule
from workbench.ir.structural import Mismatch, first_mismatch
from workbench.tir.functor import IRMutator
from workbench.tir.stmt import SeqStmt

__all__ = ["canonical", "script_text", "check_roundtrip", "RoundTripInstrument",
           "RoundTripFailure", "RoundTripError", "MODES", "ALLOWED"]

MODES = ("entry", "all")


class _FlattenSeqs(IRMutator):
    """Nested SeqStmts as one (TVM's SeqStmt flattens on construction; loop unrolling here
    nests them, and the printed text cannot keep the nesting)."""

    def visit_SeqStmt(self, s: SeqStmt) -> SeqStmt:
        flat = []
        for x in s.seq:
            x = self.visit(x)
            flat.extend(x.seq if isinstance(x, SeqStmt) else [x])
        return SeqStmt(tuple(flat))


def _is_prim_func(f: Any) -> bool:
    return hasattr(f, "buffer_map") and hasattr(f, "with_body")


def _merge_plain_blocks(n: Any) -> Any:
    """A SeqExpr with adjacent plain BindingBlocks merged (the text writes their bindings as
    one run of statements; TVM's normaliser merges them too). Dataflow blocks print as
    separate ``with R.dataflow()`` scopes and stay apart."""
    from workbench.relax.expr import BindingBlock, DataflowBlock, SeqExpr
    if not isinstance(n, SeqExpr) or len(n.blocks) < 2:
        return None
    blocks: list[Any] = []
    for b in n.blocks:
        plain = isinstance(b, BindingBlock) and not isinstance(b, DataflowBlock)
        if plain and blocks and type(blocks[-1]) is BindingBlock:
            blocks[-1] = BindingBlock(blocks[-1].bindings + b.bindings)
        else:
            blocks.append(b)
    return None if len(blocks) == len(n.blocks) else n.replace(blocks=tuple(blocks))


def canonical(x: Any) -> Any:
    """``x`` in the form its text has: every PrimFunc's nested SeqStmts flattened, every
    Relax function's adjacent plain binding blocks merged."""
    if isinstance(x, IRModule):
        out = x.copy()
        for name, f in x.items():
            g = canonical(f)
            if g is not f:
                out[name] = g
        return out
    if _is_prim_func(x):
        body = _FlattenSeqs().visit(x.body)
        return x if body is x.body else x.with_body(body)
    from workbench.relax.expr import Function
    if isinstance(x, Function):
        from workbench.ir.node import rewrite_nodes
        return rewrite_nodes(x, _merge_plain_blocks)
    return x


def script_text(x: Any) -> str:
    """The TVMScript of ``x`` the round trip reads back: IRModules with their metadata
    section (``show_meta=True``, so constants print in full), functions as ``x.script()``."""
    return x.script(show_meta=True) if isinstance(x, IRModule) else x.script()


def check_roundtrip(x: Any) -> Mismatch | None:
    """Print ``x`` (a PrimFunc, Relax function or IRModule), parse the text and compare it
    with ``x``; ``None`` when structurally equal (names may differ), else the first
    :class:`~workbench.ir.structural.Mismatch`. A printer or parser error is a mismatch too,
    with path ``<print>`` / ``<parse>`` and the error as the reason."""
    if not hasattr(x, "script"):
        raise TypeError(f"check_roundtrip: expected a PrimFunc, Relax function or IRModule, "
                        f"got {type(x).__name__}")
    from workbench.script.parser.entry import from_source

    x = canonical(x)
    try:
        text = script_text(x)
    except Exception as err:  # noqa: BLE001 - a printer failure is the finding
        return Mismatch("<print>", x, None, f"printing raised {type(err).__name__}: {err}")
    try:
        y = from_source(text)
    except Exception as err:  # noqa: BLE001 - a parser failure is the finding
        return Mismatch("<parse>", text, None, f"parsing raised {type(err).__name__}: {err}")
    if type(y) is not type(x):
        return Mismatch("root", x, y, f"parsed a {type(y).__name__}, printed a "
                                      f"{type(x).__name__}")
    return first_mismatch(x, canonical(y))


# ---- IR the text cannot express (each with why) -------------------------------------------------

@dataclass(frozen=True)
class Allowed:
    """A known mismatch that is not a printer/parser bug: ``matches(mismatch)`` says whether a
    mismatch is this one; ``reason`` is why TVMScript cannot say it."""

    name: str
    matches: Callable[[Mismatch], bool]
    reason: str


ALLOWED: list[Allowed] = [
    Allowed("undefined-variable",
            lambda m: m.reason.startswith("free variables differ"),
            "IR that uses a variable nothing defines (verifier tests build it on purpose): the "
            "text declares every free variable at the top of the function, so it reads back "
            "as a defined one; malformed IR has no faithful TVMScript."),
    Allowed("missing-function",
            lambda m: m.path == "<parse>" and "cls has no attribute" in m.reason,
            "A module calling a function it does not hold (pass-infrastructure tests drop "
            "functions on purpose): the text's cls.<name> has nothing to refer to."),
]


def _allowed(m: Mismatch) -> Allowed | None:
    for a in ALLOWED:
        try:
            if a.matches(m):
                return a
        except Exception:  # noqa: BLE001 - a predicate that cannot tell does not allow
            continue
    return None


# ---- the instrument -----------------------------------------------------------------------------

@dataclass(frozen=True)
class RoundTripFailure:
    """One module that did not round-trip: where (``stage`` is ``before`` or ``after`` the
    pass ``pass_name``), which ``function``, and the mismatch ``path`` and ``reason``."""

    stage: str
    pass_name: str
    function: str | None
    path: str
    reason: str
    lhs: str = ""
    rhs: str = ""
    allowed: str | None = None

    def __str__(self) -> str:
        where = f"function {self.function!r}" if self.function else "the module"
        text = (f"TVMScript round trip failed {self.stage} pass {self.pass_name!r} in {where}: "
                f"{self.path}: {self.reason}")
        if self.lhs or self.rhs:
            text += f" (printed IR {self.lhs}, parsed {self.rhs})"
        return text

    def as_dict(self) -> dict[str, Any]:
        return {k: getattr(self, k) for k in ("stage", "pass_name", "function", "path",
                                              "reason", "lhs", "rhs", "allowed")}


class RoundTripError(AssertionError):
    """Raised by a :class:`RoundTripInstrument` with ``on_failure="raise"``."""

    def __init__(self, failure: RoundTripFailure) -> None:
        super().__init__(str(failure))
        self.failure = failure


def _function_of(path: str, mod: IRModule) -> str | None:
    """The function a mismatch path is in (``root['name']...``), else the only function."""
    if path.startswith("root['"):
        end = path.find("']", 6)
        if end > 0:
            return path[6:end]
    return next(iter(mod)) if len(mod) == 1 else None


def _short(v: Any, limit: int = 160) -> str:
    try:
        text = repr(v)
    except Exception:  # noqa: BLE001
        text = f"<{type(v).__name__}>"
    return text if len(text) <= limit else text[:limit - 3] + "..."


_PASS_RUN_CODE = None


def _outermost_pass() -> bool:
    """Whether the pass about to run was called outside any other pass (counts the frames of
    ``Pass._run`` on the stack: exceptions in earlier passes cannot leave stale state)."""
    global _PASS_RUN_CODE
    if _PASS_RUN_CODE is None:
        from workbench.ir.transform import Pass
        _PASS_RUN_CODE = Pass._run.__code__
    n = 0
    f = sys._getframe(1)
    while f is not None:
        if f.f_code is _PASS_RUN_CODE:
            n += 1
            if n > 1:
                return False
        f = f.f_back
    return True


class RoundTripInstrument(PassInstrument):
    """Round-trips the modules passes see through TVMScript (:func:`check_roundtrip`).

    ``mode="entry"`` checks the module handed to each outermost pass (a pipeline's input: the
    IR a test or user built); ``mode="all"`` also checks the input and output of every nested
    pass (every pass boundary). A module is checked once: modules whose functions and attrs are
    the very objects of one already checked are skipped. ``on_failure="raise"`` raises
    :class:`RoundTripError` naming the pass, function and mismatch path; ``"record"`` appends
    a :class:`RoundTripFailure` to ``failures`` and lets the pass run. Mismatches listed in
    :data:`ALLOWED` are counted in ``allowed`` instead."""

    def __init__(self, mode: str = "entry", on_failure: str = "raise") -> None:
        if mode not in MODES:
            raise ValueError(f"RoundTripInstrument: mode must be one of {MODES}, got {mode!r}")
        if on_failure not in ("raise", "record"):
            raise ValueError("RoundTripInstrument: on_failure must be 'raise' or 'record', got "
                             f"{on_failure!r}")
        self.mode = mode
        self.on_failure = on_failure
        self.failures: list[RoundTripFailure] = []
        self.allowed: list[RoundTripFailure] = []
        self.modules_checked = 0
        self._functions: dict[int, Any] = {}  # id -> function (kept alive so ids stay unique)
        self._seen: dict[tuple, IRModule] = {}

    @property
    def functions_checked(self) -> int:
        """How many distinct function objects were in the modules checked."""
        return len(self._functions)

    def run_before_pass(self, mod: IRModule, info: Any) -> None:
        if self.mode == "all" or _outermost_pass():
            self._check(mod, "before", info.name)

    def run_after_pass(self, mod: IRModule, info: Any) -> None:
        if self.mode == "all":
            self._check(mod, "after", info.name)

    def _check(self, mod: IRModule, stage: str, pass_name: str) -> None:
        key = (id(mod.attrs),) + tuple((n, id(f)) for n, f in mod.items())
        if key in self._seen or len(mod) == 0:
            return
        self._seen[key] = mod
        self.modules_checked += 1
        for _, f in mod.items():
            self._functions.setdefault(id(f), f)
        bad = check_roundtrip(mod)
        if bad is None:
            return
        allow = _allowed(bad)
        failure = RoundTripFailure(stage, pass_name, _function_of(bad.path, mod), bad.path,
                                   bad.reason, _short(bad.lhs), _short(bad.rhs),
                                   allow.name if allow else None)
        if allow is not None:
            self.allowed.append(failure)
            return
        if self.on_failure == "raise":
            raise RoundTripError(failure)
        self.failures.append(failure)

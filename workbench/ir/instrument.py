"""Pass instruments (TVM's ``tvm.ir.instrument``): objects a :class:`PassContext` calls around
every pass run in it.

A :class:`PassInstrument` has five hooks, all optional: ``enter_pass_ctx()`` / ``exit_pass_ctx()``
when the context is entered / left, ``should_run(mod, info)`` (any False skips the pass, unless
the context requires it), ``run_before_pass(mod, info)`` and ``run_after_pass(mod, info)``.
Derive from it, or decorate a plain class with :func:`pass_instrument`.
"""
from __future__ import annotations

import inspect
import time
from dataclasses import dataclass, field
from typing import Any

from workbench.ir.module import IRModule

__all__ = ["PassInstrument", "pass_instrument", "PassTimingInstrument",
           "PassPrintingInstrument", "PrintAfterAll", "PrintBeforeAll"]


class PassInstrument:
    """The base of instruments; every hook does nothing unless overridden."""

    @property
    def name(self) -> str:
        return type(self).__name__

    def enter_pass_ctx(self) -> None:
        """Called when a PassContext holding this instrument is entered."""

    def exit_pass_ctx(self) -> None:
        """Called when that PassContext is left."""

    def should_run(self, mod: IRModule, info: Any) -> bool:
        """Return False to skip the pass (ignored for the context's required passes)."""
        return True

    def run_before_pass(self, mod: IRModule, info: Any) -> None:
        """Called before a pass runs, with the module it gets."""

    def run_after_pass(self, mod: IRModule, info: Any) -> None:
        """Called after a pass ran, with the module it returned."""


def pass_instrument(pi_cls: type | None = None) -> Any:
    """Make a class's instances pass instruments (it may define any of the five hooks);
    usable as ``@pass_instrument`` or ``@pass_instrument()``."""
    def create(cls: type) -> type:
        if not inspect.isclass(cls):
            raise TypeError(f"pass_instrument decorates a class, got {type(cls).__name__}")
        if issubclass(cls, PassInstrument):
            return cls
        wrapped = type(cls.__name__, (cls, PassInstrument),
                       {"__doc__": cls.__doc__, "__module__": cls.__module__,
                        "__qualname__": cls.__qualname__})
        return wrapped

    return create(pi_cls) if pi_cls is not None else create


@dataclass
class _Profile:
    name: str
    start: float
    end: float = 0.0
    children: list["_Profile"] = field(default_factory=list)


class PassTimingInstrument(PassInstrument):
    """Times every pass run in its context, nested passes under the pass that ran them.
    :meth:`render` (inside the ``with``; leaving the context clears the timings, as in TVM)
    gives one line per pass: ``name: total_us [self_us] (% of all; % of parent)``."""

    _active: "PassTimingInstrument | None" = None

    def __init__(self) -> None:
        self._root: list[_Profile] = []
        self._open: list[_Profile] = []

    def enter_pass_ctx(self) -> None:
        self._root, self._open = [], []
        PassTimingInstrument._active = self

    def exit_pass_ctx(self) -> None:
        self._root, self._open = [], []
        if PassTimingInstrument._active is self:
            PassTimingInstrument._active = None

    def run_before_pass(self, mod: IRModule, info: Any) -> None:
        prof = _Profile(info.name, time.perf_counter())
        (self._open[-1].children if self._open else self._root).append(prof)
        self._open.append(prof)

    def run_after_pass(self, mod: IRModule, info: Any) -> None:
        self._open.pop().end = time.perf_counter()

    @staticmethod
    def render() -> str:
        """The timings of the active timing instrument (the one whose context is entered)."""
        inst = PassTimingInstrument._active
        if inst is None:
            return ""
        total = sum(p.end - p.start for p in inst._root) or 1e-12
        lines: list[str] = []

        def emit(p: _Profile, parent: float, depth: int) -> None:
            own = p.end - p.start
            self_time = own - sum(c.end - c.start for c in p.children)
            lines.append(f"{'  ' * depth}{p.name}: {own * 1e6:.0f}us [{self_time * 1e6:.0f}us] "
                         f"({100 * own / total:.2f}%; {100 * own / (parent or 1e-12):.2f}%)")
            for c in p.children:
                emit(c, own, depth + 1)

        for p in inst._root:
            emit(p, total, 0)
        return "\n".join(lines)


class PassPrintingInstrument(PassInstrument):
    """Prints the module before the passes named in ``print_before_pass_names`` and after the
    ones in ``print_after_pass_names``."""

    def __init__(self, print_before_pass_names: list[str],
                 print_after_pass_names: list[str]) -> None:
        self.print_before = list(print_before_pass_names)
        self.print_after = list(print_after_pass_names)

    def run_before_pass(self, mod: IRModule, info: Any) -> None:
        if info.name in self.print_before:
            print(f"Before Running Pass: {info}\n{mod.script()}")

    def run_after_pass(self, mod: IRModule, info: Any) -> None:
        if info.name in self.print_after:
            print(f"After Running Pass: {info}\n{mod.script()}")


class PrintAfterAll(PassInstrument):
    """Prints the module after every pass."""

    def run_after_pass(self, mod: IRModule, info: Any) -> None:
        print(f"After Running Pass: {info}\n{mod.script()}")


class PrintBeforeAll(PassInstrument):
    """Prints the module before every pass."""

    def run_before_pass(self, mod: IRModule, info: Any) -> None:
        print(f"Before Running Pass: {info}\n{mod.script()}")

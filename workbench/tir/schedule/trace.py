"""Trace: the list of instructions a schedule executed, with the decisions of its samplers.

``as_json()`` gives TVM's form ``[insts, decisions]`` (each instruction ``[kind, inputs, attrs,
outputs]``, handles named ``b<k>``/``l<k>``/``v<k>`` by a running counter, strings wrapped in
quotes, ``"None"`` for null); ``as_python()`` prints a script that replays the schedule;
``apply_to_schedule`` replays onto a fresh schedule, reusing or replacing decisions.
"""
from __future__ import annotations

import json
from typing import Any, Callable, Iterable

from workbench.tir.schedule.handles import BlockRV, ExprRV, LoopRV
from workbench.tir.schedule.instruction import Instruction, InstructionKind, get_kind

RV_TYPES = (BlockRV, LoopRV, ExprRV)
DecisionProvider = Callable[[Instruction, list, list, Any], Any]


def _rv_prefix(rv: Any) -> str:
    if isinstance(rv, BlockRV):
        return "b"
    if isinstance(rv, LoopRV):
        return "l"
    return "v"


def _is_rv(x: Any) -> bool:
    return isinstance(x, RV_TYPES)


class _Namer:
    """Names handles in definition order, as TVM's trace printer does."""

    def __init__(self, python: bool = False) -> None:
        self.names: dict[int, str] = {}
        self.count = 0
        self.python = python

    def define(self, rv: Any) -> str:
        if rv is None:
            return "_"
        name = f"{_rv_prefix(rv)}{self.count}"
        self.count += 1
        self.names[id(rv)] = name
        return name

    def use(self, rv: Any) -> str:
        if isinstance(rv, LoopRV) and rv.special:
            # JSON names the marks like handles; Python needs an expression that evaluates
            # (the replaying script must have ``LoopRV`` in scope).
            if self.python:
                return f"LoopRV.{rv.special}()"
            return {"root": "l_root", "inline": "l_inline"}[rv.special]
        try:
            return self.names[id(rv)]
        except KeyError:
            raise ValueError(f"{rv!r} is used by the trace before any instruction defines it") \
                from None


def _literal_to_json(x: Any) -> Any:
    if x is None:
        return "None"
    if isinstance(x, bool):
        return int(x)
    if isinstance(x, str):
        return json.dumps(x)  # strings carry their own quotes, as TVM writes them
    if isinstance(x, (list, tuple)):
        return [_literal_to_json(v) for v in x]
    if isinstance(x, (int, float)):
        return x
    if hasattr(x, "to_json"):
        return x.to_json()
    raise TypeError(f"cannot write {x!r} ({type(x).__name__}) into a trace")


def _input_to_json(x: Any, namer: "_Namer") -> Any:
    """An input in JSON: handles by name, also inside lists (CacheRead's consumer_blocks)."""
    if _is_rv(x):
        return namer.use(x)
    if isinstance(x, (list, tuple)) and any(_is_rv(v) for v in _flatten([x])):
        return [_input_to_json(v, namer) for v in x]
    return _literal_to_json(x)


def _input_from_json(x: Any, named: dict[str, Any], idx: int, kind_name: str) -> Any:
    if isinstance(x, str) and x in named:
        return named[x]
    if isinstance(x, str) and x[:1] in "blv" and x[1:].isdigit():
        raise ValueError(f"trace instruction {idx} ({kind_name}) uses {x} before it is defined")
    if isinstance(x, list):
        return [_input_from_json(v, named, idx, kind_name) for v in x]
    return _literal_from_json(x)


def _literal_from_json(x: Any) -> Any:
    if x == "None":
        return None
    if isinstance(x, str):
        if x.startswith('"'):
            return json.loads(x)
        if x.startswith("{"):
            from workbench.tir.schedule.index_map import IndexMap
            return IndexMap.from_json(x)
        return x
    if isinstance(x, list):
        return [_literal_from_json(v) for v in x]
    return x


def _py_literal(x: Any, namer: _Namer) -> str:
    if _is_rv(x):
        return namer.use(x)
    if isinstance(x, (list, tuple)):
        return "[" + ", ".join(_py_literal(v, namer) for v in x) + "]"
    if hasattr(x, "as_python"):
        return x.as_python()
    return repr(x)


class Trace:
    """Instructions in order, and a decision for each sampling instruction."""

    def __init__(self, insts: Iterable[Instruction] = (), decisions: dict | None = None) -> None:
        self.insts: list[Instruction] = list(insts)
        self.decisions: dict[Instruction, Any] = dict(decisions or {})

    # -- building --------------------------------------------------------------------------
    def append(self, inst: Instruction, decision: Any = None) -> None:
        self.insts.append(inst)
        if decision is not None:
            self.decisions[inst] = decision

    def pop(self) -> Instruction | None:
        if not self.insts:
            return None
        inst = self.insts.pop()
        self.decisions.pop(inst, None)
        return inst

    def get_decision(self, inst: Instruction) -> Any:
        return self.decisions.get(inst)

    def _truncated(self, remove_postproc: bool) -> list[Instruction]:
        if not remove_postproc:
            return list(self.insts)
        out = []
        for inst in self.insts:
            if inst.kind.name == "EnterPostproc":
                break
            out.append(inst)
        return out

    def copy(self) -> "Trace":
        return Trace(self.insts, self.decisions)

    def with_decision(self, inst: Instruction, decision: Any, remove_postproc: bool) -> "Trace":
        """A copy (cut at EnterPostproc if asked) with ``inst``'s decision replaced."""
        insts = self._truncated(remove_postproc)
        decisions = {i: d for i, d in self.decisions.items() if i in set(insts)}
        decisions[inst] = decision
        return Trace(insts, decisions)

    def simplified(self, remove_postproc: bool) -> "Trace":
        """Drop pure instructions whose outputs nothing uses (walking backwards)."""
        insts = self._truncated(remove_postproc)
        used: set[int] = set()
        kept: list[Instruction] = []
        for inst in reversed(insts):
            if inst.kind.pure and inst.kind.name != "EnterPostproc" and \
                    not any(id(o) in used for o in inst.outputs if o is not None):
                continue
            kept.append(inst)
            for x in _flatten(inst.inputs):
                if _is_rv(x):
                    used.add(id(x))
        kept.reverse()
        return Trace(kept, {i: d for i, d in self.decisions.items() if i in set(kept)})

    # -- serialisation ------------------------------------------------------------------------
    def as_json(self, remove_postproc: bool = False) -> list:
        namer = _Namer()
        insts_json, decisions_json = [], []
        for idx, inst in enumerate(self._truncated(remove_postproc)):
            inputs = [_input_to_json(x, namer) for x in _flatten_variadic(inst)]
            attrs = [_literal_to_json(a) for a in inst.attrs]
            outputs = [namer.define(o) for o in inst.outputs]
            insts_json.append([inst.kind.name, inputs, attrs, outputs])
            if inst in self.decisions:
                decisions_json.append([idx, _literal_to_json(self.decisions[inst])])
        return [insts_json, decisions_json]

    def as_python(self, remove_postproc: bool = False) -> list[str]:
        """The schedule as Python lines over ``sch``; the special compute locations print as
        ``LoopRV.root()`` / ``LoopRV.inline()`` (import ``LoopRV`` from
        ``workbench.tir.schedule`` to run them)."""
        namer = _Namer(python=True)
        lines: list[str] = []
        for inst in self._truncated(remove_postproc):
            kind = inst.kind
            args = []
            for name, value in zip(_input_names(kind), inst.inputs):
                if kind.star_args and name == kind.variadic:
                    args.extend(_py_literal(v, namer) for v in value)
                else:
                    args.append(f"{name}={_py_literal(value, namer)}")
            for name, value in zip(kind.attrs, inst.attrs):
                args.append(f"{name}={_py_literal(value, namer)}")
            if inst in self.decisions:
                args.append(f"decision={_py_literal(self.decisions[inst], namer)}")
            call = f"sch.{kind.method}({', '.join(args)})"
            outs = [namer.define(o) for o in inst.outputs]
            if not outs:
                lines.append(call)
            elif len(outs) == 1 and kind.name not in _LIST_OUTPUT_KINDS:
                lines.append(f"{outs[0]} = {call}")
            else:
                lines.append(f"{', '.join(outs)}{',' if len(outs) == 1 else ''} = {call}")
        return lines

    def apply_to_schedule(self, sch: Any, remove_postproc: bool,
                          decision_provider: DecisionProvider | None = None) -> None:
        """Replay onto ``sch``; ``decision_provider(inst, inputs, attrs, decision)`` may replace
        each decision (return ``None`` to sample afresh)."""
        rv_map: dict[int, Any] = {}
        for inst in self._truncated(remove_postproc):
            inputs = [_translate(x, rv_map) for x in inst.inputs]
            decision = self.decisions.get(inst)
            if decision_provider is not None:
                decision = decision_provider(inst, inputs, inst.attrs, decision)
            outputs = apply_instruction(sch, inst.kind, inputs, list(inst.attrs), decision)
            for old, new in zip(inst.outputs, outputs):
                if old is not None:
                    rv_map[id(old)] = new

    @staticmethod
    def apply_json_to_schedule(json_obj: Any, sch: Any) -> None:
        """Replay a trace in TVM's JSON form onto ``sch`` (a malformed trace raises ValueError)."""
        if isinstance(json_obj, str):
            json_obj = json.loads(json_obj)
        try:
            insts_json, decisions_json = json_obj
            decisions = {int(i): _literal_from_json(d) for i, d in decisions_json}
        except (TypeError, ValueError) as e:
            raise ValueError(f"a trace must be [instructions, decisions]: {e}") from None
        named: dict[str, Any] = {"l_root": LoopRV.root(), "l_inline": LoopRV.inline()}
        for idx, entry in enumerate(insts_json):
            try:
                kind_name, inputs_json, attrs_json, outputs_json = entry
            except (TypeError, ValueError):
                raise ValueError(f"trace instruction {idx} is malformed: {entry!r}") from None
            kind = get_kind(kind_name)
            inputs = [_input_from_json(x, named, idx, kind_name) for x in inputs_json]
            attrs = [_literal_from_json(a) for a in attrs_json]
            outputs = apply_instruction(sch, kind, _regroup(kind, inputs), attrs,
                                        decisions.get(idx))
            if len(outputs) != len(outputs_json):
                raise ValueError(f"trace instruction {idx} ({kind_name}) made {len(outputs)} "
                                 f"outputs, the trace names {len(outputs_json)}")
            for name, rv in zip(outputs_json, outputs):
                if name != "_":
                    named[name] = rv

    @staticmethod
    def from_json(json_obj: Any, mod: Any) -> "Trace":
        """Replay the JSON onto a fresh schedule of ``mod`` and return the resulting trace."""
        from workbench.tir.schedule.schedule import Schedule
        sch = Schedule(mod)
        Trace.apply_json_to_schedule(json_obj, sch)
        return sch.trace

    # -- display ---------------------------------------------------------------------------
    def __str__(self) -> str:
        lines = ["# from workbench import tir", "def apply_trace(sch: tir.Schedule) -> None:"]
        body = self.as_python()
        lines += ["  " + ln for ln in body] if body else ["  pass"]
        return "\n".join(lines)

    __repr__ = __str__

    def show(self) -> None:
        print(str(self))

    def _repr_html_(self) -> str:
        from workbench.ir.printer import html_highlight
        return html_highlight(str(self))

    def __len__(self) -> int:
        return len(self.insts)


_LIST_OUTPUT_KINDS = {"GetLoops", "GetChildBlocks", "GetProducers", "GetConsumers", "Split",
                      "SamplePerfectTile"}


def _input_names(kind: InstructionKind) -> list[str]:
    return [n.lstrip("*") for n in kind.inputs]


def _flatten(xs: Iterable[Any]) -> Iterable[Any]:
    for x in xs:
        if isinstance(x, (list, tuple)):
            yield from _flatten(x)
        else:
            yield x


def _flatten_variadic(inst: Instruction) -> list[Any]:
    """Inputs as TVM writes them: a variadic input's items spliced into the list."""
    out: list[Any] = []
    for name, value in zip(inst.kind.inputs, inst.inputs):
        if name.startswith("*"):
            out.extend(value)
        else:
            out.append(value)
    return out


def _regroup(kind: InstructionKind, flat: list[Any]) -> list[Any]:
    """Inverse of :func:`_flatten_variadic`: gather the variadic tail into one list."""
    if kind.variadic is None:
        return flat
    pos = [n.startswith("*") for n in kind.inputs].index(True)
    n_after = len(kind.inputs) - pos - 1
    end = len(flat) - n_after
    return flat[:pos] + [flat[pos:end]] + flat[end:]


def _translate(x: Any, rv_map: dict[int, Any]) -> Any:
    if isinstance(x, (list, tuple)):
        return [_translate(v, rv_map) for v in x]
    if _is_rv(x):
        if isinstance(x, LoopRV) and x.special:
            return x
        return rv_map[id(x)]
    return x


def apply_instruction(sch: Any, kind: InstructionKind, inputs: list, attrs: list,
                      decision: Any) -> list[Any]:
    """Call the kind's schedule method with named inputs/attrs; return outputs as a list."""
    args: list[Any] = []
    kwargs: dict[str, Any] = {}
    for name, value in zip(_input_names(kind), inputs):
        if kind.star_args and name == kind.variadic:
            args.extend(value)
        else:
            kwargs[name] = value
    kwargs.update(zip(kind.attrs, attrs))
    if kind.sampling:
        kwargs["decision"] = decision
    result = getattr(sch, kind.method)(*args, **kwargs)
    if result is None:
        return []
    if isinstance(result, (list, tuple)):
        return list(result)
    return [result]

"""TIR statements: loops, blocks, stores, control flow, allocation and attributes."""
from __future__ import annotations

from typing import Any

from workbench.ir.node import FrozenDict, Node, frozen, node
from workbench.tir.buffer import Buffer, BufferRegion, MatchBufferRegion, Range
from workbench.tir.expr import PrimExpr, Var


class Stmt(Node):
    __slots__ = ()
    __hash__ = object.__hash__


class ForKind:
    """Loop kinds, spelled as in TVM."""

    SERIAL = "serial"
    PARALLEL = "parallel"
    VECTORIZED = "vectorized"
    UNROLLED = "unroll"
    THREAD_BINDING = "thread_binding"
    ALL = ("serial", "parallel", "vectorized", "unroll", "thread_binding")


def freeze_field(n: Node, name: str) -> None:
    """Store a plain dict given for ``name`` as a FrozenDict: IR is immutable, and a dict
    compared unequal to the FrozenDict the same IR read back from TVMScript has."""
    value = getattr(n, name)
    if type(value) is not FrozenDict:
        object.__setattr__(n, name, frozen(value))


@node
class For(Stmt):
    loop_var: Var
    min: PrimExpr
    extent: PrimExpr
    kind: str
    body: Stmt
    thread_binding: Any = None
    annotations: FrozenDict = FrozenDict()

    def __post_init__(self) -> None:
        freeze_field(self, "annotations")


@node
class While(Stmt):
    condition: PrimExpr
    body: Stmt


@node
class IfThenElse(Stmt):
    condition: PrimExpr
    then_case: Stmt
    else_case: Stmt | None = None


@node
class BufferStore(Stmt):
    buffer: Buffer
    value: PrimExpr
    indices: tuple[PrimExpr, ...]
    predicate: PrimExpr | None = None


@node
class SeqStmt(Stmt):
    seq: tuple[Stmt, ...]

    def __len__(self) -> int:
        return len(self.seq)

    def __getitem__(self, i: int) -> Stmt:
        return self.seq[i]


@node
class LetStmt(Stmt):
    var: Var
    value: PrimExpr
    body: Stmt


@node
class Evaluate(Stmt):
    value: PrimExpr


@node
class AttrStmt(Stmt):
    node: Any
    attr_key: str
    value: PrimExpr
    body: Stmt


@node
class Allocate(Stmt):
    """Allocate ``extents`` elements of ``dtype`` and bind the pointer to ``buffer_var``."""

    buffer_var: Var
    dtype: str
    extents: tuple[PrimExpr, ...]
    condition: PrimExpr
    body: Stmt
    annotations: FrozenDict = FrozenDict()


@node
class DeclBuffer(Stmt):
    """Declare ``buffer`` (over memory already bound to ``buffer.data``) inside ``body``."""

    buffer: Buffer
    body: Stmt


@node
class AssertStmt(Stmt):
    condition: PrimExpr
    message: PrimExpr
    body: Stmt


class IterType:
    """Block iteration-variable kinds, with TVM's integer codes in JSON."""

    DATA_PAR = 0      # spatial
    COMM_REDUCE = 2   # reduction
    ORDERED = 3       # scan
    OPAQUE = 4


@node
class IterVar(Node):
    """A block iteration variable over ``dom``; ``iter_type`` is an :class:`IterType` code."""

    dom: Range
    var: Var
    iter_type: int
    thread_tag: str = ""

    __hash__ = object.__hash__


@node
class Block(Stmt):
    """A unit of computation with its own iteration space and declared buffer accesses.

    ``init`` (for reductions) runs when every reduction iter var is at its first value.
    """

    iter_vars: tuple[IterVar, ...]
    reads: tuple[BufferRegion, ...]
    writes: tuple[BufferRegion, ...]
    name_hint: str
    body: Stmt
    init: Stmt | None = None
    alloc_buffers: tuple[Buffer, ...] = ()
    match_buffers: tuple[MatchBufferRegion, ...] = ()
    annotations: FrozenDict = FrozenDict()

    def __post_init__(self) -> None:
        freeze_field(self, "annotations")


@node
class BlockRealize(Stmt):
    """Binds a block's iter vars to ``iter_values`` (expressions over the surrounding loops)."""

    iter_values: tuple[PrimExpr, ...]
    predicate: PrimExpr
    block: Block


def seq(*stmts: Stmt | None) -> Stmt:
    """Flatten nested sequences and drop ``None``; a single statement is returned as is."""
    flat: list[Stmt] = []
    for s in stmts:
        if s is None:
            continue
        if isinstance(s, SeqStmt):
            flat.extend(s.seq)
        else:
            flat.append(s)
    if len(flat) == 1:
        return flat[0]
    return SeqStmt(tuple(flat))


__all__ = [
    "Stmt", "ForKind", "For", "While", "IfThenElse", "BufferStore", "SeqStmt", "LetStmt",
    "Evaluate", "AttrStmt", "Allocate", "DeclBuffer", "AssertStmt", "IterType", "IterVar",
    "Block", "BlockRealize", "Range", "BufferRegion", "seq",
]

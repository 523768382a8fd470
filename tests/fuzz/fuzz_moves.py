"""Random calls of every public schedule primitive, legal or not (the schedule fuzzer's moves).

A :class:`Session` applies random moves to one schedule. A move picks a primitive, a target
(any current block or loop, now and then a stale handle or a handle of the wrong kind) and
arguments (mostly plausible, sometimes out of range), and calls it through the public API.
Each call is one of:

- *accepted*: the primitive returned;
- *refused*: it raised ``ScheduleError`` (or ``TypeError`` for a handle of the wrong kind, which
  only the deliberate misuse moves pass) and the schedule's IR and trace are exactly as before;
- an *internal error*: any other exception, or a refusal that changed the schedule. The
  session raises :class:`FuzzFailure` with the move's description.

Everything random comes from the ``random.Random`` given to the session (and the schedule's
own seed), so a case is reproduced from its seed alone.
"""
from __future__ import annotations

import random
from typing import Any, Callable

from workbench.tir.expr import IntImm
from workbench.tir.schedule import BlockRV, LoopRV, Schedule, ScheduleError
from workbench.tir.schedule.state import FuncIndex
from workbench.tir.stmt import For, IterType

# Annotation keys: ones the compiler reads (unrolling, storage alignment, the tuner's
# postprocessor hints) and a plain one.
ANNOTATION_KEYS = ["test.hint", "pragma_auto_unroll_max_step", "pragma_unroll_explicit",
                   "meta_schedule.parallel", "meta_schedule.vectorize",
                   "meta_schedule.unroll_explicit", "meta_schedule.auto_tensorize",
                   "buffer_dim_align"]
SCOPES = ["local", "global", "local", "global", "local", "shared"]  # "shared": refused on CPU


class FuzzFailure(Exception):
    """A primitive misbehaved: an exception other than a refusal, or a refusal that changed
    the schedule. ``desc`` names the move."""

    def __init__(self, desc: str, detail: str) -> None:
        super().__init__(f"{desc}: {detail}")
        self.desc = desc
        self.detail = detail


class Session:
    """Random moves on ``sch`` drawn from ``rng``; counts accepted and refused calls."""

    def __init__(self, sch: Schedule, rng: random.Random) -> None:
        self.sch = sch
        self.rng = rng
        self.accepted = 0
        self.refused = 0
        self.moves: list[str] = []
        self.old_blocks: list[BlockRV] = []
        self.old_loops: list[LoopRV] = []
        # index maps transform_layout applied to parameters, by parameter position: the
        # caller must lay out the arguments the same way
        self.param_maps: dict[int, list[Any]] = {}

    # -- the current IR -----------------------------------------------------------------------
    def index(self) -> FuncIndex:
        return FuncIndex(self.sch.mod[self.sch.func_working_on])

    def block_names(self, with_root: bool = False) -> list[str]:
        """Blocks a user can get (not the ones inside an init, which get_block refuses)."""
        idx = self.index()
        return [n for n in idx.block_order if (with_root or n != "root") and
                not idx.blocks[n].in_init]

    def block_rv(self) -> BlockRV:
        """A handle to a random block: usually fresh, sometimes an old (possibly stale) one,
        rarely the root block."""
        if self.old_blocks and self.rng.random() < 0.08:
            return self.rng.choice(self.old_blocks)
        names = self.block_names(with_root=self.rng.random() < 0.03)
        rv = self.sch.get_block(self.rng.choice(names))
        self.old_blocks.append(rv)
        return rv

    def loops_of(self, block: BlockRV) -> list[LoopRV]:
        try:
            loops = self.sch.get_loops(block)
        except ScheduleError:
            return []
        self.old_loops.extend(loops)
        return loops

    def loop_rv(self) -> LoopRV | None:
        """A handle to a random loop (any block's), sometimes an old one."""
        if self.old_loops and self.rng.random() < 0.08:
            return self.rng.choice(self.old_loops)
        idx = self.index()
        with_loops = [n for n in self.block_names() if idx.blocks[n].loops]
        if not with_loops:
            return None
        loops = self.loops_of(self.sch.get_block(self.rng.choice(with_loops)))
        return self.rng.choice(loops) if loops else None

    def extent(self, loop: LoopRV) -> int:
        try:
            node = self.sch.get(loop)
        except (ScheduleError, KeyError):
            return 4
        if isinstance(node, For) and isinstance(node.extent, IntImm):
            return node.extent.value
        return 4

    def block_node(self, block: BlockRV) -> Any:
        try:
            return self.sch.get(block)
        except ScheduleError:
            return None

    # -- calling ---------------------------------------------------------------------------
    def call(self, desc: str, thunk: Callable[[], Any], misuse: bool = False) -> Any:
        """Run one primitive call; a refusal must leave IR and trace untouched."""
        func = self.sch.mod[self.sch.func_working_on]
        n_trace = len(self.sch.trace)
        self.moves.append(desc)
        try:
            out = thunk()
        except ScheduleError as e:
            self._check_unchanged(desc, func, n_trace)
            if not (e.primitive and e.subject and e.reason):
                raise FuzzFailure(desc, f"a refusal must name the primitive, the block or "
                                  f"loop, and the rule: {e!r}") from e
            self.refused += 1
            self.moves[-1] += f"  -> refused: {e.reason[:160]}"
            return None
        except TypeError as e:
            if not misuse:
                raise FuzzFailure(desc, f"TypeError: {e}") from e
            self._check_unchanged(desc, func, n_trace)
            self.refused += 1
            self.moves[-1] += "  -> refused (TypeError)"
            return None
        except FuzzFailure:
            raise
        except Exception as e:  # noqa: BLE001 - anything else is a finding
            raise FuzzFailure(desc, f"{type(e).__name__}: {e}") from e
        self.accepted += 1
        return out

    def _check_unchanged(self, desc: str, func: Any, n_trace: int) -> None:
        if self.sch.mod[self.sch.func_working_on] is not func:
            raise FuzzFailure(desc, "refused, but the IR changed")
        if len(self.sch.trace) != n_trace:
            raise FuzzFailure(desc, "refused, but the trace grew")

    def step(self) -> None:
        _, move = self.rng.choices(MOVES, weights=WEIGHTS)[0]
        move(self)


# ---- the moves ----------------------------------------------------------------------------------

def _name(s: Session, rv: Any) -> str:
    try:
        node = s.sch.get(rv)
    except Exception:  # noqa: BLE001 - a stale handle has no name
        return "<stale>"
    if isinstance(node, For):
        return node.loop_var.name
    return getattr(node, "name_hint", repr(node))


def mv_split(s: Session) -> None:
    loop = s.loop_rv()
    if loop is None:
        return
    e = s.extent(loop)
    r = s.rng.random()
    name = _name(s, loop)
    bad = False
    if r < 0.45:
        n = s.rng.choice([2, 2, 3, 4])
        mx = s.rng.choice([-1, 2, 4, 16])
        tiles = s.call(f"sample_perfect_tile({name}, {n}, {mx})",
                       lambda: s.sch.sample_perfect_tile(loop, n=n, max_innermost_factor=mx))
        if tiles is None:
            return
        factors: list[Any] = list(tiles)
        desc = f"split({name}, sampled {[s.sch.get(t) for t in tiles]})"
    elif r < 0.85:
        f = s.rng.randint(1, max(1, e + 1))
        factors = s.rng.choice([[None, f], [f, None], [None, f, s.rng.randint(1, 3)],
                                [s.rng.randint(1, 3), None, f]])
        desc = f"split({name}, {factors})"
    else:
        factors = s.rng.choice([[0, None], [-1, 4], [None, None], [2], [1, 1],
                                [e + 1, e + 1], [None, 2.5]])
        desc = f"split({name}, {factors}) [bad factors]"
        bad = True
    preserve = s.rng.random() < 0.7
    disable = s.rng.random() < 0.08
    s.call(desc + f" preserve={preserve} disable_predication={disable}",
           lambda: s.sch.split(loop, factors, preserve_unit_iters=preserve,
                               disable_predication=disable), misuse=bad)


def mv_fuse(s: Session) -> None:
    if s.rng.random() < 0.8:
        loops = s.loops_of(s.block_rv())
        if len(loops) < 2:
            return
        k = s.rng.randint(2, min(3, len(loops)))
        start = s.rng.randint(0, len(loops) - k)
        chosen = loops[start:start + k]
    else:
        chosen = [x for x in (s.loop_rv(), s.loop_rv()) if x is not None]
        if not chosen:
            return
    preserve = s.rng.random() < 0.7
    s.call(f"fuse({[_name(s, x) for x in chosen]}, preserve={preserve})",
           lambda: s.sch.fuse(*chosen, preserve_unit_iters=preserve))


def mv_reorder(s: Session) -> None:
    if s.rng.random() < 0.85:
        loops = s.loops_of(s.block_rv())
        if len(loops) < 2:
            return
        chosen = s.rng.sample(loops, s.rng.randint(2, len(loops)))
    else:
        chosen = [x for x in (s.loop_rv(), s.loop_rv(), s.loop_rv()) if x is not None]
    s.call(f"reorder({[_name(s, x) for x in chosen]})", lambda: s.sch.reorder(*chosen))


def mv_add_unit_loop(s: Session) -> None:
    target = s.block_rv() if s.rng.random() < 0.6 else s.loop_rv()
    if target is None:
        return
    s.call(f"add_unit_loop({_name(s, target)})", lambda: s.sch.add_unit_loop(target))


def mv_loop_kind(s: Session) -> None:
    loop = s.loop_rv()
    if loop is None:
        return
    kind = s.rng.choice(["parallel", "vectorize", "unroll"])
    s.call(f"{kind}({_name(s, loop)})", lambda: getattr(s.sch, kind)(loop))


def _annotation_value(s: Session, key: str) -> Any:
    if key == "buffer_dim_align":
        return s.rng.choice([((0, 0, 4, 1),), ((0, 1, 8, 0),), ((1, 0, 4, 0),), 3, "x",
                             ((0, 7, 4, 1),)])
    r = s.rng.random()
    if r < 0.3:
        return s.call("sample_categorical([1, 16, 64], ...)",
                      lambda: s.sch.sample_categorical([1, 16, 64], [0.4, 0.3, 0.3]))
    if r < 0.8:
        return s.rng.choice([0, 1, 2, 16, 64, 512])
    return s.rng.choice(["yes", ""])


def mv_annotate(s: Session) -> None:
    target = s.block_rv() if s.rng.random() < 0.5 else s.loop_rv()
    if target is None:
        return
    key = s.rng.choice(ANNOTATION_KEYS)
    value = _annotation_value(s, key)
    if value is None:
        return
    s.call(f"annotate({_name(s, target)}, {key!r}, {value!r})",
           lambda: s.sch.annotate(target, key, value))
    if s.rng.random() < 0.3:
        key2 = key if s.rng.random() < 0.7 else s.rng.choice(ANNOTATION_KEYS)
        s.call(f"unannotate({_name(s, target)}, {key2!r})",
               lambda: s.sch.unannotate(target, key2))


def mv_sample_categorical(s: Session) -> None:
    cands, probs = s.rng.choice([([1, 2, 4], [0.5, 0.25, 0.25]), ([3], [1.0]),
                                 ([1, 2], [0.5]), ([1, 2], [0.0, 0.0]), ([], [])])
    s.call(f"sample_categorical({cands}, {probs})",
           lambda: s.sch.sample_categorical(cands, probs))


def _location(s: Session, block: BlockRV, reverse: bool) -> Any:
    r = s.rng.random()
    if r < 0.35 and not reverse:
        return s.call(f"sample_compute_location({_name(s, block)})",
                      lambda: s.sch.sample_compute_location(block))
    if r < 0.75:
        # a loop of a consumer (compute_at) or producer (reverse_compute_at)
        rel = s.call(f"get_{'producers' if reverse else 'consumers'}({_name(s, block)})",
                     lambda: (s.sch.get_producers if reverse else s.sch.get_consumers)(block))
        if rel:
            loops = s.loops_of(s.rng.choice(rel))
            if loops:
                return s.rng.choice(loops)
    if r < 0.8:
        return s.rng.choice([LoopRV.root(), LoopRV.inline()])
    return s.loop_rv()


def mv_compute_at(s: Session) -> None:
    reverse = s.rng.random() < 0.45
    block = s.block_rv()
    loop = _location(s, block, reverse)
    if loop is None:
        return
    preserve = s.rng.random() < 0.5
    index = s.rng.choice([-1, -1, -1, -2, 0, 1, 2, 5])
    prim = "reverse_compute_at" if reverse else "compute_at"
    s.call(f"{prim}({_name(s, block)}, {_name(s, loop) if not loop.special else loop.special},"
           f" preserve={preserve}, index={index})",
           lambda: getattr(s.sch, prim)(block, loop, preserve_unit_loops=preserve, index=index))


def mv_inline(s: Session) -> None:
    prim = s.rng.choice(["compute_inline", "reverse_compute_inline"])
    block = s.block_rv()
    if s.rng.random() < 0.6:
        # lean towards blocks the rules could accept: no init; for reverse_compute_inline one
        # producer
        idx = s.index()
        names = [n for n in s.block_names() if idx.blocks[n].block.init is None]
        if prim == "reverse_compute_inline":
            names = [n for n in names if len(s.sch.get_producers(s.sch.get_block(n))) == 1]
        if names:
            block = s.sch.get_block(s.rng.choice(names))
    s.call(f"{prim}({_name(s, block)})", lambda: getattr(s.sch, prim)(block))


def _consumer_blocks(s: Session, block: BlockRV) -> list[Any]:
    if s.rng.random() < 0.75:
        return []
    names = s.block_names()
    picked = s.rng.sample(names, min(len(names), s.rng.randint(1, 2)))
    return [s.sch.get_block(n) if s.rng.random() < 0.7 else n for n in picked]


def mv_cache(s: Session) -> None:
    block = s.block_rv()
    node = s.block_node(block)
    write = s.rng.random() < 0.5
    n = len(node.writes if write else node.reads) if node is not None else 1
    idx = _index(s, n)
    scope = s.rng.choice(SCOPES)
    consumers = _consumer_blocks(s, block)
    prim = "cache_write" if write else "cache_read"
    new = s.call(f"{prim}({_name(s, block)}, {idx}, {scope!r}, consumers={len(consumers)})",
                 lambda: getattr(s.sch, prim)(block, idx, scope, consumer_blocks=consumers))
    if new is not None and s.rng.random() < 0.5:
        # the usual follow-up: move the copy next to its user
        loop = _location(s, new, reverse=write)
        if loop is not None:
            mv = "reverse_compute_at" if write else "compute_at"
            s.call(f"{mv}({_name(s, new)}, {_name(s, loop) if not loop.special else loop.special})",
                   lambda: getattr(s.sch, mv)(new, loop))


def _index(s: Session, n: int) -> int:
    """A buffer index: mostly in ``[0, n)``, sometimes one past the end or negative."""
    r = s.rng.random()
    if r < 0.85 and n > 0:
        return s.rng.randrange(n)
    return n if r < 0.97 else -1


def mv_set_scope(s: Session) -> None:
    block = s.block_rv()
    node = s.block_node(block)
    idx = _index(s, len(node.writes) if node is not None else 1)
    scope = s.rng.choice(SCOPES)
    s.call(f"set_scope({_name(s, block)}, {idx}, {scope!r})",
           lambda: s.sch.set_scope(block, idx, scope))


def mv_storage_align(s: Session) -> None:
    block = s.block_rv()
    node = s.block_node(block)
    ndim = len(node.writes[0].buffer.shape) if node is not None and node.writes else 2
    idx = _index(s, len(node.writes) if node is not None else 1)
    if s.rng.random() < 0.8:                          # plausible: an axis and factor that exist
        axis = s.rng.randrange(-ndim, ndim)
        factor, offset = s.rng.choice([2, 4, 8, 16]), s.rng.choice([0, 1, 3])
    else:
        axis = s.rng.choice([-ndim - 1, ndim])
        factor, offset = s.rng.choice([0, -4, 4]), s.rng.choice([-1, 0])
    s.call(f"storage_align({_name(s, block)}, {idx}, axis={axis}, {factor}, {offset})",
           lambda: s.sch.storage_align(block, idx, axis, factor, offset))


def _index_map(s: Session, ndim: int, extents: list[int]) -> tuple[str, Any]:
    """A random index map over ``ndim`` indices: a permutation, a split or fuse of dims, a
    reversal, or a non-injective / padding map (refused)."""
    args = [f"i{d}" for d in range(ndim)]
    kind = s.rng.choice(["perm", "split", "split", "fuse", "reverse", "drop", "pad"])
    outs = list(args)
    if kind == "perm":
        s.rng.shuffle(outs)
    elif kind == "split" and ndim:
        d = s.rng.randrange(ndim)
        f = s.rng.choice([2, 3, 4])
        outs[d:d + 1] = [f"{args[d]} // {f}", f"{args[d]} % {f}"]
    elif kind == "fuse" and ndim >= 2:
        d = s.rng.randrange(ndim - 1)
        outs[d:d + 2] = [f"{args[d]} * {extents[d + 1]} + {args[d + 1]}"]
    elif kind == "reverse" and ndim:
        d = s.rng.randrange(ndim)
        outs[d] = f"{extents[d] - 1} - {args[d]}"
    elif kind == "drop" and ndim >= 2:
        del outs[s.rng.randrange(ndim)]
    elif kind == "pad" and ndim:
        d = s.rng.randrange(ndim)
        outs[d] = f"{args[d]} + 1"
    if not outs:
        outs = ["0"]
    src = f"lambda {', '.join(args)}: ({', '.join(outs)},)"
    return f"{kind} {src}", eval(src)  # noqa: S307 - our own generated lambda


def _const_shape(shape: Any) -> list[int]:
    return [int(x.value) if isinstance(x, IntImm) else 4 for x in shape]


def mv_transform_layout(s: Session) -> None:
    block = s.block_rv()
    node = s.block_node(block)
    if node is None or not (node.reads or node.writes):
        return
    kind = "write" if node.writes and (not node.reads or s.rng.random() < 0.6) else "read"
    regions = node.writes if kind == "write" else node.reads
    k = s.rng.randrange(len(regions))
    shape = _const_shape(regions[k].buffer.shape)
    desc, imap = _index_map(s, len(shape), shape)
    func = s.sch.mod[s.sch.func_working_on]
    param = [p for p, b in enumerate(func.params)
             if func.buffer_map.get(b) is regions[k].buffer]
    before = s.sch.mod[s.sch.func_working_on]
    assume = s.rng.random() < 0.1
    pad = 0.0 if s.rng.random() < 0.05 else None
    s.call(f"transform_layout({_name(s, block)}, ({kind!r}, {k}), {desc}, pad={pad}, "
           f"assume_injective={assume})",
           lambda: s.sch.transform_layout(block, (kind, k), imap, pad_value=pad,
                                          assume_injective_transform=assume))
    if param and s.sch.mod[s.sch.func_working_on] is not before:
        from workbench.tir.schedule import IndexMap
        s.param_maps.setdefault(param[0], []).append(IndexMap.from_func(imap, len(shape)))


def mv_transform_block_layout(s: Session) -> None:
    block = s.block_rv()
    node = s.block_node(block)
    if node is None:
        return
    extents = _const_shape([iv.dom.extent for iv in node.iter_vars])
    desc, imap = _index_map(s, len(extents), extents)
    s.call(f"transform_block_layout({_name(s, block)}, {desc})",
           lambda: s.sch.transform_block_layout(block, imap))


def _reduction_loop(s: Session, block: BlockRV) -> LoopRV | None:
    """A loop above ``block`` that feeds one of its reduction iteration variables, if any."""
    node = s.block_node(block)
    loops = s.loops_of(block)
    if node is None or not loops:
        return None
    info = s.index().blocks[node.name_hint]
    red_vars = set()
    for iv, value in zip(info.block.iter_vars, info.realize.iter_values):
        if iv.iter_type == IterType.COMM_REDUCE:
            from workbench.tir.functor import collect_vars
            red_vars |= collect_vars(value)
    cands = [rv for rv, lp in zip(loops, info.loops) if lp.loop_var in red_vars]
    return s.rng.choice(cands) if cands else None


def mv_decompose_reduction(s: Session) -> None:
    block = s.block_rv()
    loops = s.loops_of(block)
    loop = s.rng.choice(loops) if loops and s.rng.random() < 0.85 else s.loop_rv()
    if loop is None:
        return
    s.call(f"decompose_reduction({_name(s, block)}, {_name(s, loop)})",
           lambda: s.sch.decompose_reduction(block, loop))


def mv_rfactor(s: Session) -> None:
    block = s.block_rv()
    loop = _reduction_loop(s, block) if s.rng.random() < 0.8 else s.loop_rv()
    if loop is None:
        return
    axis = s.rng.randint(-2, 3)
    s.call(f"rfactor({_name(s, loop)}, {axis})", lambda: s.sch.rfactor(loop, axis))


def mv_blockize(s: Session) -> None:
    preserve = s.rng.random() < 0.6
    if s.rng.random() < 0.7:
        loop = s.loop_rv()
        if loop is None:
            return
        s.call(f"blockize({_name(s, loop)}, preserve={preserve})",
               lambda: s.sch.blockize(loop, preserve_unit_iters=preserve))
        return
    names = s.block_names()
    picked = s.rng.sample(names, min(len(names), s.rng.randint(1, 2)))
    blocks = [s.sch.get_block(n) for n in picked]
    s.call(f"blockize({picked}, preserve={preserve})",
           lambda: s.sch.blockize(blocks, preserve_unit_iters=preserve))


def mv_lookups(s: Session) -> None:
    block = s.block_rv()
    kind = s.rng.choice(["get_producers", "get_consumers", "get_child_blocks", "get_loops"])
    target = block
    if kind == "get_child_blocks" and s.rng.random() < 0.6:
        target = s.loop_rv() or block
    s.call(f"{kind}({_name(s, target)})", lambda: getattr(s.sch, kind)(target))


def mv_copy(s: Session) -> None:
    """Go on with a copy of the schedule (``Schedule.copy``): the copy must carry the IR, the
    trace and the handles."""
    s.sch = s.sch.copy()
    s.moves.append("copy()")


def mv_misuse(s: Session) -> None:
    """A handle of the wrong kind where another is expected (TypeError), or a name that is no
    block (ScheduleError)."""
    block, loop = s.block_rv(), s.loop_rv()
    if loop is None:
        return
    kind = s.rng.choice(["split_block", "compute_at_loops", "parallel_block", "get_block_bad",
                         "rfactor_block", "get_loops_loop", "get_block_in_init"])
    idx = s.index()
    in_init = [n for n in idx.block_order if idx.blocks[n].in_init] or ["no_such_block"]
    calls = {
        "split_block": lambda: s.sch.split(block, [None, 2]),
        "compute_at_loops": lambda: s.sch.compute_at(loop, loop),
        "parallel_block": lambda: s.sch.parallel(block),
        "get_block_bad": lambda: s.sch.get_block("no_such_block"),
        "rfactor_block": lambda: s.sch.rfactor(block, 0),
        "get_loops_loop": lambda: s.sch.get_loops(loop),
        "get_block_in_init": lambda: s.sch.get_block(s.rng.choice(in_init)),
    }
    s.call(f"misuse {kind}", calls[kind], misuse=True)


MOVES_W: list[tuple[str, Callable[[Session], None], float]] = [
    ("split", mv_split, 10),
    ("fuse", mv_fuse, 5),
    ("reorder", mv_reorder, 5),
    ("add_unit_loop", mv_add_unit_loop, 2),
    ("loop_kind", mv_loop_kind, 7),
    ("annotate", mv_annotate, 3),
    ("sample_categorical", mv_sample_categorical, 1),
    ("compute_at", mv_compute_at, 12),
    ("inline", mv_inline, 8),
    ("cache", mv_cache, 8),
    ("set_scope", mv_set_scope, 2),
    ("storage_align", mv_storage_align, 4),
    ("transform_layout", mv_transform_layout, 4),
    ("transform_block_layout", mv_transform_block_layout, 2),
    ("decompose_reduction", mv_decompose_reduction, 4),
    ("rfactor", mv_rfactor, 5),
    ("blockize", mv_blockize, 3),
    ("lookups", mv_lookups, 2),
    ("misuse", mv_misuse, 1),
    ("copy", mv_copy, 0.5),
]
MOVES = [(n, f) for n, f, _ in MOVES_W]
WEIGHTS = [w for _, _, w in MOVES_W]

"""Schedule method ``regenerate``: rebuild a generated kernel for other tile sizes.

Some kernels are written by a generator instead of ``te`` (the fused attention of
``workbench.topi.nn.attention``): their tile sizes shape scratch buffers and the whole loop body,
so no split can change them. Such a kernel's block carries the annotation
``tir.generator = <name>``, and its generator registers ``fn(func, params) -> PrimFunc`` under
that name with :func:`register_block_generator` (a layer above: tir never imports it).
``sch.regenerate(block, params)`` replaces the function by ``fn(func, params)`` -- the same
parameters and the same block name --, recorded as ``Regenerate`` with the params as inputs, so
params sampled with ``sample_categorical`` are decisions a trace replays and the tuner varies.
The generator refuses a function that other primitives already changed.
"""
from __future__ import annotations

from typing import Callable, Sequence

from workbench.tir.function import PrimFunc
from workbench.tir.schedule.core import ScheduleCore, traced
from workbench.tir.schedule.error import ScheduleError
from workbench.tir.schedule.handles import BlockRV, ExprRV
from workbench.tir.schedule.instruction import InstructionKind, register_kind

__all__ = ["GenerateMethods", "register_block_generator", "GENERATOR_ANNOTATION"]

GENERATOR_ANNOTATION = "tir.generator"
BlockGenerator = Callable[[PrimFunc, tuple[int, ...]], PrimFunc]
_GENERATORS: dict[str, BlockGenerator] = {}

register_kind(InstructionKind("Regenerate", "regenerate", inputs=("block", "*params")))


def register_block_generator(name: str, fn: BlockGenerator) -> BlockGenerator:
    """Register ``fn(func, params) -> PrimFunc`` as the generator ``name`` (a block annotated
    ``tir.generator = name`` is rebuilt by it). Re-registering a name replaces it."""
    if not isinstance(name, str) or not name:
        raise ValueError(f"register_block_generator: name must be a non-empty str, got {name!r}")
    if not callable(fn):
        raise TypeError(f"register_block_generator: {name!r} needs a callable, got {fn!r}")
    _GENERATORS[name] = fn
    return fn


class GenerateMethods(ScheduleCore):
    @traced("Regenerate")
    def regenerate(self, block: BlockRV, params: Sequence[int | ExprRV]) -> None:
        """Rebuild the function of generated ``block`` with tile parameters ``params`` (ints or
        sampled ExprRVs), through the generator its ``tir.generator`` annotation names (see
        the module docstring). BlockRVs of the block stay valid; loop handles do not (the
        loops are rebuilt): call it before any other primitive."""
        name = self._block_name(block, "regenerate")
        ints = tuple(self._int(p, "regenerate") for p in params)
        if any(not isinstance(p, int) for p in ints):
            raise TypeError(f"regenerate: params must be ints or ExprRVs, got {list(params)!r}")
        info = self._index().blocks[name]
        gen_name = info.block.annotations.get(GENERATOR_ANNOTATION)
        fn = _GENERATORS.get(str(gen_name)) if gen_name is not None else None
        if fn is None:
            why = ("it has no 'tir.generator' annotation" if gen_name is None else
                   f"no generator {gen_name!r} is registered (import the module that "
                   f"defines it); registered: {sorted(_GENERATORS)}")
            raise ScheduleError("regenerate", f"block {name!r}", why)
        try:
            func = fn(self._func, ints)
        except ValueError as err:
            raise ScheduleError("regenerate", f"block {name!r}", str(err)) from None
        if name not in _block_names(func):
            raise ScheduleError("regenerate", f"block {name!r}",
                                f"generator {gen_name!r} returned a function without it")
        self._commit(func)


def _block_names(func: PrimFunc) -> set[str]:
    from workbench.tir.functor import post_order_visit
    from workbench.tir.stmt import Block
    names: set[str] = set()
    post_order_visit(func.body, lambda n: names.add(n.name_hint) if isinstance(n, Block) else None)
    return names

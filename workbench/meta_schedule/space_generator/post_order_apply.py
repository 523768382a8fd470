"""PostOrderApply: apply each schedule rule to each block in post-order, branching whenever a
rule returns several schedules (reference meta_schedule.md section 4.2)."""
from __future__ import annotations

from typing import Any, Callable

from workbench.ir.module import IRModule
from workbench.meta_schedule import analysis as A
from workbench.meta_schedule.space_generator.space_generator import (
    FROM_TARGET, SpaceGenerator, check_lists,
)
from workbench.tir.schedule import BlockRV, Schedule
from workbench.tir.stmt import Block, BlockRealize
from workbench.tir.analysis import child_stmts


class PostOrderApply(SpaceGenerator):
    """TVM's default generator. ``f_block_filter(block) -> bool`` may exclude blocks."""

    def __init__(self, f_block_filter: Callable[[Block], bool] | None = None,
                 sch_rules: Any = FROM_TARGET, postprocs: Any = FROM_TARGET,
                 mutator_probs: Any = FROM_TARGET) -> None:
        super().__init__(sch_rules, postprocs, mutator_probs)
        self.f_block_filter = f_block_filter

    def generate_design_space(self, mod: IRModule) -> list[Schedule]:
        check_lists(self.sch_rules, self.postprocs, self.mutator_probs)
        sch = Schedule(mod, seed=self.rand.fork_seed())
        blocks = [sch.get_sblock(name) for name in self._post_order(sch)]
        result = [sch]
        for rule in self.sch_rules:
            # A stack of (schedule, blocks still to visit); the last block is visited first,
            # so the root comes first and consumers come before producers (as TVM).
            stack: list[tuple[Schedule, list[BlockRV]]] = [(s, list(blocks)) for s in result]
            result = []
            while stack:
                cur, todo = stack.pop()
                if not todo:
                    result.append(cur)
                    continue
                block = todo.pop()
                if not A.has_block(cur, block):
                    stack.append((cur, todo))
                    continue
                if A.block_info(cur, block).block.annotations.get("schedule_rule") is not None \
                        and type(rule).__name__ != "ApplyCustomRule":
                    stack.append((cur, todo))
                    continue
                for applied in rule.apply(cur, block):
                    stack.append((applied, list(todo)))
        return result

    def _post_order(self, sch: Schedule) -> list[str]:
        """Block names, children before parents, siblings in program order, root last."""
        order: list[str] = []

        def visit(stmt: Any) -> None:
            if isinstance(stmt, BlockRealize):
                blk = stmt.block
                if blk.init is not None:
                    visit(blk.init)
                visit(blk.body)
                if self.f_block_filter is None or self.f_block_filter(blk):
                    order.append(blk.name_hint)
                return
            for child in child_stmts(stmt):
                visit(child)

        visit(sch.func_index().func.body)
        return order

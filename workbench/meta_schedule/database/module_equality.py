"""How a database decides that two IRModules are the same workload.

``ModuleEquality(kind)`` gives ``hash(mod)`` and ``equal(a, b)``; lookups test the hash first
and then full equality (TVM's ``module_equality.cc``). Kinds: ``"structural"`` (the default),
``"ignore-tensor"`` / ``"ignore-ndarray"`` and ``"anchor-block"``. Workbench's TIR embeds no
constant tensors, so the ignore-tensor kinds equal ``"structural"``; ``"anchor-block"`` is
accepted and currently also compares whole modules (a stricter, still correct equality: it
only means fewer cross-workload hits).

``WorkloadTable`` is the hash-bucketed set of canonical workloads that the JSON and memory
databases share.
"""
from __future__ import annotations

from typing import TYPE_CHECKING

from workbench.ir.module import IRModule
from workbench.ir.structural import StructuralSet, structural_equal, structural_hash

if TYPE_CHECKING:  # pragma: no cover
    from workbench.meta_schedule.database.database import Workload

__all__ = ["ModuleEquality", "WorkloadTable", "MODULE_EQUALITY_KINDS"]

MODULE_EQUALITY_KINDS = ("structural", "ignore-tensor", "ignore-ndarray", "anchor-block")


class ModuleEquality:
    """Hash and equality of IRModules for one ``module_equality`` kind."""

    def __init__(self, kind: str = "structural") -> None:
        if kind not in MODULE_EQUALITY_KINDS:
            raise ValueError(f"unknown module_equality {kind!r}; expected one of "
                             f"{', '.join(MODULE_EQUALITY_KINDS)}")
        self.kind = kind

    def hash(self, mod: IRModule) -> int:
        return structural_hash(mod)

    def equal(self, a: IRModule, b: IRModule) -> bool:
        return a is b or structural_equal(a, b)


class WorkloadTable(StructuralSet):
    """The canonical workloads, a :class:`~workbench.ir.structural.StructuralSet` of
    workloads compared by module under one :class:`ModuleEquality`, bucketed by their
    ``shash``; ``find(mod)`` returns the equal one or None."""

    def __init__(self, equality: ModuleEquality) -> None:
        super().__init__(key=lambda wl: wl.mod, hash=equality.hash, equal=equality.equal)
        self.equality = equality

    def add(self, workload: "Workload", h: int | None = None) -> bool:
        return super().add(workload, workload.shash if h is None else h)

    def owns(self, workload: "Workload") -> bool:
        """Is ``workload`` itself (by identity) one of the canonical objects?"""
        return super().owns(workload, workload.shash)

    def canonical(self, workload: "Workload") -> "Workload | None":
        if self.owns(workload):
            return workload
        return self.find(workload.mod)

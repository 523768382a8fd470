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

from typing import TYPE_CHECKING, Iterator

from workbench.ir.module import IRModule
from workbench.ir.structural import structural_equal, structural_hash

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


class WorkloadTable:
    """Canonical workloads bucketed by hash; ``find(mod)`` returns the equal one or None."""

    def __init__(self, equality: ModuleEquality) -> None:
        self.equality = equality
        self._buckets: dict[int, list["Workload"]] = {}
        self._order: list["Workload"] = []
        self._ids: set[int] = set()

    def find(self, mod: IRModule, shash: int | None = None) -> "Workload | None":
        if shash is None:
            shash = self.equality.hash(mod)
        for wl in self._buckets.get(shash, ()):
            if self.equality.equal(wl.mod, mod):
                return wl
        return None

    def add(self, workload: "Workload") -> None:
        self._buckets.setdefault(workload.shash, []).append(workload)
        self._order.append(workload)
        self._ids.add(id(workload))

    def owns(self, workload: "Workload") -> bool:
        """Is ``workload`` itself (by identity) one of the canonical objects?"""
        return id(workload) in self._ids

    def canonical(self, workload: "Workload") -> "Workload | None":
        if self.owns(workload):
            return workload
        return self.find(workload.mod)

    def __iter__(self) -> Iterator["Workload"]:
        return iter(self._order)

    def __len__(self) -> int:
        return len(self._order)

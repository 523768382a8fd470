"""BuildCache: the object code of candidates already built, keyed by their scheduled module.

A tuning run builds the same module more than once: the confirmation after the search
re-measures the leaders (each measurement a fresh build of a module built before), the
post-optimization revisits neighbours of the best, and a batch may hold structurally equal
candidates that the search's deduplication did not catch (e.g. the database's records
re-proposed). Lowering and code generation of a 512^3 matmul candidate take about half a
second on a worker; a cache hit writes a file.

Entries are keyed like the databases key workloads: the structural hash of the module with
the target's text, confirmed by ``structural_equal`` (a hash collision never returns another
module's code). Only successful builds are stored; the least recently used entry goes first
past ``max_entries`` (object code of a matmul candidate is ~10-50 kB).

Modules that differ but lower to the same code are not found here; the object-code disk
cache of :mod:`workbench.codegen` (keyed by the LLVM IR text) spares those their LLVM
compile in the worker.
"""
from __future__ import annotations

from collections import OrderedDict
from typing import Any

from workbench.ir.structural import structural_equal, structural_hash

__all__ = ["BuildCache"]


class BuildCache:
    """``(module, target) -> object code`` for modules structurally equal to one built before.

    ``key(mod, target)`` computes the lookup key once (a batch uses it for both ``get`` and
    ``put``); ``hits`` and ``misses`` count the lookups."""

    def __init__(self, max_entries: int = 512) -> None:
        if max_entries < 1:
            raise ValueError(f"BuildCache: max_entries must be >= 1, got {max_entries}")
        self.max_entries = max_entries
        self.hits = 0
        self.misses = 0
        # (hash, target text) -> [(module, object bytes)], most recently used last
        self._entries: OrderedDict[tuple[int, str], list[tuple[Any, bytes]]] = OrderedDict()
        self._size = 0

    @staticmethod
    def key(mod: Any, target: Any) -> tuple[int, str]:
        return structural_hash(mod), str(target)

    def get(self, key: tuple[int, str], mod: Any) -> bytes | None:
        """The object code stored for a module structurally equal to ``mod`` under ``key``,
        or None (counted as a hit or a miss)."""
        for stored, obj in self._entries.get(key, ()):
            if structural_equal(stored, mod):
                self._entries.move_to_end(key)
                self.hits += 1
                return obj
        self.misses += 1
        return None

    def put(self, key: tuple[int, str], mod: Any, obj: bytes) -> None:
        """Store ``obj`` as the object code of ``mod`` (nothing if an equal module is in)."""
        bucket = self._entries.setdefault(key, [])
        if any(structural_equal(stored, mod) for stored, _ in bucket):
            return
        bucket.append((mod, bytes(obj)))
        self._entries.move_to_end(key)
        self._size += 1
        while self._size > self.max_entries:
            _, dropped = self._entries.popitem(last=False)
            self._size -= len(dropped)

    def __len__(self) -> int:
        return self._size

    def __repr__(self) -> str:
        return f"BuildCache({self._size} entries, {self.hits} hit(s), {self.misses} miss(es))"

"""Print -> parse -> structurally equal, for the IR the rest of the suite builds.

The reference is the IR itself: ``from_source(x.script())`` must be ``structural_equal`` to
``x`` (names are free to differ, everything else is compared), and printing the parsed IR
again gives the same text (less the source-location comments of imported models).
"""
from __future__ import annotations

import re

import pytest

from roundtrip_cases import CASES
from workbench.ir.module import IRModule
from workbench.ir.structural import first_mismatch
from workbench.script import from_source
from workbench.tir.functor import IRMutator
from workbench.tir.stmt import SeqStmt


class _FlattenSeqs(IRMutator):
    """Nested SeqStmts as one (TVM's SeqStmt flattens on construction; loop unrolling here
    nests them, and TVMScript, like Python, cannot write a sequence inside a sequence)."""

    def visit_SeqStmt(self, s: SeqStmt) -> SeqStmt:
        flat = []
        for x in s.seq:
            x = self.visit(x)
            flat.extend(x.seq if isinstance(x, SeqStmt) else [x])
        return SeqStmt(tuple(flat))


def _canonical(x):
    if isinstance(x, IRModule):
        out = x.copy()
        for name, f in x.items():
            if hasattr(f, "buffer_map"):
                out[name] = f.with_body(_FlattenSeqs().visit(f.body))
        return out
    return x.with_body(_FlattenSeqs().visit(x.body))


def _text(x) -> str:
    return x.script(show_meta=True) if isinstance(x, IRModule) else x.script()


@pytest.mark.parametrize("case", sorted(CASES))
def test_print_parse_is_structurally_equal(case):
    x = _canonical(CASES[case]())
    text = _text(x)
    y = from_source(text)
    assert type(y) is type(x)
    bad = first_mismatch(x, y)
    assert bad is None, f"{bad.path}: {bad.reason}\n{text}"
    # Source locations of imported models print as trailing comments; they are not IR.
    assert _text(y) == re.sub(r"(?<=\S)  # [^\n]*", "", text)


def test_a_changed_text_is_not_equal():
    """The comparison above can fail: an edited constant parses to different IR."""
    x = CASES["matmul_static"]()
    y = from_source(x.script().replace("T.float32(0)", "T.float32(1)"))
    assert first_mismatch(x, y) is not None

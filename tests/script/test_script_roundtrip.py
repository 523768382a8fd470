"""Print -> parse -> structurally equal, for the IR the rest of the suite builds.

The reference is the IR itself: ``from_source(x.script())`` must be ``structural_equal`` to
``x`` (names are free to differ, everything else is compared), and printing the parsed IR
again gives the same text (less the source-location comments of imported models).
"""
from __future__ import annotations

import re

import pytest

from roundtrip_cases import CASES
from workbench.ir.structural import first_mismatch
from workbench.script import from_source
from workbench.script.roundtrip import canonical as _canonical
from workbench.script.roundtrip import check_roundtrip
from workbench.script.roundtrip import script_text as _text


@pytest.mark.parametrize("case", sorted(CASES))
def test_print_parse_is_structurally_equal(case):
    x = _canonical(CASES[case]())
    text = _text(x)
    bad = check_roundtrip(x)
    assert bad is None, f"{bad.path}: {bad.reason}\n{text}"
    y = from_source(text)
    # Source locations of imported models print as trailing comments; they are not IR.
    assert _text(y) == re.sub(r"(?<=\S)  # [^\n]*", "", text)


def test_a_changed_text_is_not_equal():
    """The comparison above can fail: an edited constant parses to different IR."""
    x = CASES["matmul_static"]()
    y = from_source(x.script().replace("T.float32(0)", "T.float32(1)"))
    assert first_mismatch(x, y) is not None


def test_a_changed_tensor_in_an_attr_is_not_equal():
    """Tensor values in attrs (an importer's ``params``) compare by content: a changed weight
    is a difference, in equality and in the hash."""
    pytest.importorskip("torch")
    from workbench import nd
    from workbench.ir.structural import structural_equal, structural_hash
    x = CASES["torch_small_params_attr"]()
    params = list(x["main"].attrs["params"])
    data = params[0].numpy()
    data.flat[0] += 1.0
    changed = x.copy()
    changed["main"] = x["main"].with_attr("params", (nd.array(data), *params[1:]))
    assert not structural_equal(x, changed)
    assert structural_hash(x) != structural_hash(changed)
    same = x.copy()
    same["main"] = x["main"].with_attr("params", tuple(nd.array(p.numpy()) for p in params))
    assert structural_equal(x, same) and structural_hash(x) == structural_hash(same)

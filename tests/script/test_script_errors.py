"""Script errors are ParserErrors that name the user's file and line and show the line."""
from __future__ import annotations

from pathlib import Path

import pytest

from workbench.script import ParserError, from_source, ir as I, relax as R, tir as T

HERE = Path(__file__).resolve()


def _line_of(marker: str) -> int:
    lines = HERE.read_text().splitlines()
    hits = [i + 1 for i, line in enumerate(lines) if line.rstrip().endswith(marker)]
    assert len(hits) == 1, marker
    return hits[0]


def _check(err: ParserError, marker: str, words: str) -> None:
    line = _line_of(marker)
    assert err.filename == str(HERE)
    assert err.lineno == line
    text = str(err)
    assert f"{HERE}:{line}:" in text
    assert HERE.read_text().splitlines()[line - 1].strip() in text  # the offending line
    assert words in text


def test_undefined_name():
    with pytest.raises(ParserError) as info:
        @T.prim_func
        def f(A: T.Buffer((4,), "float32")):
            for i in range(4):
                A[i] = B[i]  # <- undefined
    _check(info.value, "# <- undefined", "name 'B' is not defined")


def test_wrong_arity():
    with pytest.raises(ParserError) as info:
        @T.prim_func
        def f(A: T.Buffer((4,), "float32")):
            for i in range(4):
                A[i] = T.max(A[i])  # <- arity
    _check(info.value, "# <- arity", "wrong arguments to T.max")


def test_bad_dtype_in_buffer():
    with pytest.raises(ParserError) as info:
        @T.prim_func
        def f(A: T.Buffer((4,), "flaot32")):  # <- dtype
            pass
    _check(info.value, "# <- dtype", "unknown dtype 'flaot32'")


def test_unsupported_statement():
    with pytest.raises(ParserError) as info:
        @T.prim_func
        def f(A: T.Buffer((4,), "float32")):
            try:  # <- unsupported
                A[0] = T.float32(1)
            finally:
                pass
    _check(info.value, "# <- unsupported", "unsupported statement in a TIR function: Try")


def test_wrong_number_of_indices():
    with pytest.raises(ParserError) as info:
        @T.prim_func
        def f(A: T.Buffer((4, 4), "float32")):
            for i in range(4):
                A[i] = T.float32(0)  # <- indices
    _check(info.value, "# <- indices", "has 2 dimension(s) but is indexed with 1")


def test_errors_inside_a_module_point_at_the_member_line():
    with pytest.raises(ParserError) as info:
        @I.ir_module
        class M:
            @R.function
            def main(x: R.Tensor((4,), "float32")):
                y = R.nn.relu(x, z)  # <- module
                return y
    _check(info.value, "# <- module", "name 'z' is not defined")


def test_relax_op_arity():
    with pytest.raises(ParserError) as info:
        @R.function
        def f(x: R.Tensor((4,), "float32")):
            y = R.add(x)  # <- relax arity
            return y
    _check(info.value, "# <- relax arity", "wrong arguments to R.add")


def test_unknown_relax_op():
    with pytest.raises(ParserError) as info:
        @R.function
        def f(x: R.Tensor((4,), "float32")):
            y = R.nn.relux(x)  # <- relax op
            return y
    _check(info.value, "# <- relax op", "R.nn has no attribute 'relux'")


def test_from_source_errors_count_lines_of_the_text():
    text = "@T.prim_func\ndef f(A: T.Buffer((4,), 'float32')):\n    A[0] = q\n"
    with pytest.raises(ParserError) as info:
        from_source(text)
    assert info.value.filename == "<string>" and info.value.lineno == 3
    assert "<string>:3:" in str(info.value) and "A[0] = q" in str(info.value)


def test_parser_error_is_a_value_error():
    assert issubclass(ParserError, ValueError)

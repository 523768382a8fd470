"""Small IR utilities with TVM's names: IRModule.functions_items, with_attr(dict), show()."""

import pytest

import workbench
from workbench import relax, te


def _prim(name="f"):
    A = te.placeholder((4,), name="A")
    B = te.compute((4,), lambda i: A[i] * 2.0, name="B")
    return te.create_prim_func([A, B]).with_attr("global_symbol", name)


def _relax_func():
    bb = relax.BlockBuilder()
    x = relax.Var("x", relax.TensorStructInfo((4,), "float32"))
    with bb.function("main", [x]):
        out = bb.emit(relax.op.add(x, x))
        bb.emit_func_output(out)
    return bb.get()["main"]


def test_functions_items_sorted_by_name():
    mod = workbench.IRModule({"zeta": _prim("zeta"), "alpha": _prim("alpha"), "mid": _prim()})
    items = mod.functions_items()
    assert [gv.name_hint for gv, _ in items] == ["alpha", "mid", "zeta"]
    assert all(f is mod[gv] for gv, f in items)
    assert list(mod) == ["zeta", "alpha", "mid"]  # the module's own order is unchanged


@pytest.mark.parametrize("make", [_prim, _relax_func])
def test_with_attr_key_value_and_dict(make):
    f = make()
    g = f.with_attr({"global_symbol": "g", "my_attr": 3})
    assert g.attrs["global_symbol"] == "g" and g.attrs["my_attr"] == 3
    assert f.attrs.get("my_attr") is None           # functions are immutable
    h = g.with_attr("my_attr", 4)
    assert h.attrs["my_attr"] == 4 and g.attrs["my_attr"] == 3
    assert "my_attr" not in h.without_attr("my_attr").attrs
    assert h.with_attrs({"a": 1, "b": 2}).attrs["b"] == 2
    with pytest.raises(TypeError, match="value is missing"):
        f.with_attr("only_key")
    with pytest.raises(TypeError, match="must be a string"):
        f.with_attr(3, 4)
    with pytest.raises(TypeError, match="not both"):
        f.with_attr({"a": 1}, 2)
    with pytest.raises(TypeError, match="attribute names are strings"):
        f.with_attr({1: 2})


def test_irmodule_with_attrs():
    mod = workbench.IRModule({"f": _prim()})
    m2 = mod.with_attrs({"a": 1}).with_attr("b", 2)
    assert dict(m2.attrs) == {"a": 1, "b": 2} and dict(mod.attrs) == {}


@pytest.mark.parametrize("obj", [lambda: workbench.IRModule({"f": _prim()}), _prim,
                                 _relax_func])
def test_show_prints_the_script(obj, capsys):
    o = obj()
    o.show()
    out = capsys.readouterr().out
    assert out.strip() == o.script().strip()        # captured output is not a terminal: plain


def test_show_highlights_with_pygments_when_asked(capsys):
    pytest.importorskip("pygments")
    f = _prim()
    f.show(style="default")
    out = capsys.readouterr().out
    assert "\x1b[" in out                            # ANSI colour escapes
    import re
    assert re.sub(r"\x1b\[[0-9;]*m", "", out).strip() == f.script().strip()


def test_show_without_pygments_prints_plain(monkeypatch, capsys):
    import workbench.ir.highlight as hl
    monkeypatch.setattr(hl, "_has_pygments", lambda: False)
    monkeypatch.setattr(hl, "_warned_no_pygments", False)
    f = _relax_func()
    with pytest.warns(UserWarning, match="Pygments"):
        f.show(style="default")
    assert capsys.readouterr().out.strip() == f.script().strip()


def test_relax_expr_show(capsys):
    x = relax.Var("x", relax.TensorStructInfo((4,), "float32"))
    x.show()
    assert capsys.readouterr().out.strip() == x.script().strip()


def test_show_outside_a_kernel_prints_even_with_ipykernel_imported(capsys):
    pytest.importorskip("ipykernel")
    import ipykernel  # noqa: F401 - what the widget tests leave imported in a test run
    f = _prim()
    f.show()
    assert capsys.readouterr().out.strip() == f.script().strip()


def test_show_in_a_notebook_displays_html(monkeypatch):
    pytest.importorskip("IPython")
    from IPython import display
    shown = []
    import workbench.ir.highlight as hl
    monkeypatch.setattr(hl, "_in_kernel", lambda: True)
    monkeypatch.setattr(display, "display", lambda obj: shown.append(obj))
    f = _prim()
    f.show()
    [html] = shown
    assert "<pre" in html.data and "T.prim_func" in html.data

"""Source locations on Relax calls (``Call.span``) without any importer: the BlockBuilder's
span scope tags calls, structural equality ignores spans, JSON keeps them, and LegalizeOps /
FuseOps / FuseTIR / CallTIRRewrite / VMCodeGen carry them to ``exe.call_sources``, keyed by
the VM's CallSite of each kernel call. Also: FuseTIR shares structurally equal fused kernels,
and constants hold raw bytes (compared and hashed by value, base64 in JSON)."""
from __future__ import annotations

import base64

import numpy as np

import workbench as wb
from workbench import options
from workbench import relax
from workbench.ir import structural_equal, structural_hash
from workbench.ir.json import load_json, save_json
from workbench.relax import op as R
from workbench.relax.expr import TensorValue
from workbench.relax.span import Source, Span, call_spans


def _span(layer: str, op: str = "aten.relu.default") -> Span:
    return Span((Source("torch", layer.replace(".", "_"), op, layer, "Mod"),))


def _two_blocks(with_spans: bool = True):
    """Two identical ``relu(conv(x) + b)`` blocks, each op tagged with its layer."""
    rng = np.random.default_rng(0)
    bb = relax.BlockBuilder()
    x = relax.Var("x", relax.TensorStructInfo((1, 4, 6, 6), "float32"))
    with bb.function("main", [x]):
        with bb.dataflow():
            h = x
            for blk in ("block0", "block1"):
                w = relax.const(rng.standard_normal((4, 4, 3, 3)).astype("float32"))
                b = relax.const(rng.standard_normal((1, 4, 1, 1)).astype("float32"))
                with bb.span_scope(_span(f"{blk}.conv", "aten.convolution.default")
                                   if with_spans else None):
                    h = bb.emit(R.add(R.nn.conv2d(h, w, padding=1), b))
                with bb.span_scope(_span(f"{blk}.act") if with_spans else None):
                    h = bb.emit(R.nn.relu(h))
            out = bb.emit_output(h)
        bb.emit_func_output(out)
    return bb.get()


def test_span_scope_tags_every_call_normalised_inside():
    mod = _two_blocks()
    calls = [b.value for b in mod["main"].body.blocks[0].bindings
             if isinstance(b.value, relax.Call)]
    # The nested conv2d was emitted as its own binding inside the same scope.
    assert [c.span.label() for c in calls] == ["block0.conv"] * 2 + ["block0.act"] + \
        ["block1.conv"] * 2 + ["block1.act"]
    assert "# block0.conv" in mod["main"].script()
    bb = relax.BlockBuilder()
    y = relax.Var("y", relax.TensorStructInfo((2,), "float32"))
    with bb.function("f", [y]):
        with bb.span_scope(_span("outer")):
            tagged = bb.normalize(R.exp(y).replace(span=_span("own")))
        untagged = bb.normalize(R.exp(y))
        bb.emit_func_output(bb.emit(tagged))
    assert tagged.span.label() == "own" and untagged.span is None


def test_spans_take_no_part_in_structural_equality_and_survive_json():
    a, b = _two_blocks(True), _two_blocks(False)
    assert structural_equal(a, b) and structural_hash(a) == structural_hash(b)
    back = load_json(save_json(a))
    labels = [x.value.span.label() for x in back["main"].body.blocks[0].bindings
              if isinstance(x.value, relax.Call)]
    assert labels[0] == "block0.conv" and labels[-1] == "block1.act"


def test_spans_reach_the_kernel_calls_of_the_executable():
    mod = _two_blocks()
    # In the plain layout (in the blocked one the first block reads the plain input and the
    # second a blocked tensor: two kernels, and a reorder at the end named "layout").
    with options.override(convert_layout=False):
        exe = relax.build(mod, "llvm")
    lowered = [(k, s) for k, s in call_spans(exe.lowered_mod["main"]) if s is not None]
    # conv + bias + relu of one block is one fused kernel named by both of its layers; the two
    # blocks are structurally equal, so both calls share one kernel.
    assert [s.label() for _, s in lowered] == ["block0.conv + block0.act",
                                               "block1.conv + block1.act"]
    assert lowered[0][0] == lowered[1][0] and lowered[0][0].startswith("fused_conv2d_add_relu")
    assert sum(k.startswith("fused_") for k in exe.kernel_names) == 1
    assert lowered[0][1].op_types == ["aten.convolution.default", "aten.relu.default"]

    vm = relax.VirtualMachine(exe, wb.cpu())
    seen = []

    def instrument(func, name, before, ret, *args):
        if before and name in exe.kernel_names:
            site = vm.instrument_position
            seen.append(exe.call_sources[(site.function, site.index)].label())

    vm.set_instrument(instrument)
    x = np.random.default_rng(1).standard_normal((1, 4, 6, 6)).astype("float32")
    got = vm["main"](wb.nd.array(x)).numpy()
    assert seen == ["block0.conv + block0.act", "block1.conv + block1.act"]
    want = relax.testing.evaluate_numpy(mod, "main", x)
    np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-4)


def test_unfused_build_keeps_one_span_per_kernel():
    exe = relax.build(_two_blocks(), "llvm", fuse=False)
    labels = [s.label() for s in exe.call_sources.values()]
    assert labels == ["block0.conv"] * 2 + ["block0.act"] + ["block1.conv"] * 2 + \
        ["block1.act", "layout"]


def test_merge_keeps_first_occurrence_order():
    a, b = _span("a"), _span("b")
    merged = Span.merge([a, None, b, Span((a.sources[0],))])
    assert merged.label() == "a + b" and Span.merge([None]) is None


# ---- constants ----------------------------------------------------------------------------------

def test_constants_hold_raw_bytes_and_round_trip():
    arr = np.arange(12, dtype="float32").reshape(3, 4)
    c = relax.const(arr)
    assert isinstance(c.data.payload, bytes) and c.data.payload == arr.tobytes()
    back = load_json(save_json(c))
    np.testing.assert_array_equal(back.data.numpy(), arr)
    assert structural_equal(c, back) and structural_hash(c) == structural_hash(back)
    other = relax.const(arr + 1)
    assert not structural_equal(c, other) and structural_hash(c) != structural_hash(other)
    # A base64 payload (what older JSON files hold) still makes the same value.
    old = TensorValue("float32", (3, 4), base64.b64encode(arr.tobytes()).decode("ascii"))
    np.testing.assert_array_equal(old.numpy(), arr)
    scalar = relax.const(np.float32(2.5))
    assert scalar.data.shape == () and scalar.data.numpy() == np.float32(2.5)

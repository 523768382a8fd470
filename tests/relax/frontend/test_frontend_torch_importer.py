"""``from_exported_program``'s contract: signature options, weights as parameters, dynamic
batch, the unsupported-op error, source locations, and converters the zoo models do not
reach (checked against PyTorch op family by op family, with and without decomposition)."""
from __future__ import annotations

import numpy as np
import pytest

import frontend_zoo as zoo
from frontend_zoo import nn, torch
import workbench as wb
from workbench import relax
from workbench.relax.frontend import OpNotImplemented, detach_params
from workbench.relax.frontend.torch import from_exported_program
from workbench.relax.span import Span, call_spans


def _export(model, *args, **kw):
    with torch.no_grad():
        return torch.export.export(model.eval(), args, **kw)


def _torch_out(model, *args):
    with torch.no_grad():
        out = model(*args)
    return [o.numpy() for o in (out if isinstance(out, (tuple, list)) else (out,))]


class SmallNet(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv = nn.Conv2d(3, 8, 3, padding=1)
        self.bn = nn.BatchNorm2d(8)
        self.fc = nn.Linear(8, 5)

    def forward(self, x):
        y = torch.relu(self.bn(self.conv(x)))
        return self.fc(y.mean(dim=(2, 3))), y.amax(dim=1)


@pytest.fixture(scope="module")
def small():
    """The small net and its program, decomposed once (the tests below import it with
    ``run_ep_decomposition=False``; the model tests cover the default)."""
    torch.manual_seed(0)
    model = SmallNet().eval()
    x = torch.randn(2, 3, 8, 8)
    return model, x, _export(model, x).run_decompositions()


def _import(ep, **kw):
    return from_exported_program(ep, run_ep_decomposition=False, **kw)


# ---- signature options ----------------------------------------------------------------------

def test_outputs_are_a_tuple_and_the_flags_change_that(small):
    model, x, ep = small
    mod = _import(ep)
    ret = mod["main"].ret_struct_info
    assert isinstance(ret, relax.TupleStructInfo) and len(ret.fields) == 2
    body = mod["main"].body
    assert isinstance(body.body, relax.Var)  # one tuple-valued output variable

    unbound = _import(ep, no_bind_return_tuple=True)["main"].body.body
    assert isinstance(unbound, relax.Tuple) and all(isinstance(f, relax.Var)
                                                    for f in unbound.fields)

    class One(nn.Module):
        def forward(self, x):
            return x * 2

    one = _export(One(), x)
    assert isinstance(_import(one)["main"].ret_struct_info, relax.TupleStructInfo)
    bare = _import(one, unwrap_unit_return_tuple=True)["main"].ret_struct_info
    assert isinstance(bare, relax.TensorStructInfo) and bare.ndim == 4


def test_keep_params_as_input_returns_the_values(small):
    model, x, ep = small
    mod = _import(ep, keep_params_as_input=True)
    main = mod["main"]
    names = [p.name_hint for p in main.params]
    params = [s for s in ep.graph_signature.input_specs if s.kind.name == "PARAMETER"]
    assert names == ["x"] + [s.arg.name for s in params]
    assert main.attrs["num_input"] == 1
    # The values print as references into the metadata section (TVM's form), not inline.
    assert '"params": (metadata["runtime.NDArray"][0], metadata["runtime.NDArray"][1]' in \
        mod.script()
    mod, values = detach_params(mod)
    assert "params" not in mod["main"].attrs
    state = ep.state_dict
    for spec, value in zip(params, values["main"]):
        np.testing.assert_array_equal(value.numpy(), state[spec.target].detach().numpy())
    exe = relax.build(mod, "llvm")
    got = zoo.run_vm(exe, (x,), values["main"])
    for g, w in zip(got, _torch_out(model, x)):
        zoo.assert_close(g, w, "keep_params_as_input")


def test_dynamic_batch_runs_at_any_size():
    """A torch.export.Dim batch is a symbolic dim: one compile serves every batch size."""
    torch.manual_seed(0)
    model = zoo.GPT2().eval()
    batch = torch.export.Dim("batch", min=1, max=8)
    ep = _export(model, torch.randint(0, 1000, (2, 16)),
                 dynamic_shapes={"ids": {0: batch}})
    mod = from_exported_program(ep)
    main = mod["main"]
    (dim, seq), = [p.struct_info.values for p in main.params]
    assert isinstance(dim, wb.tir.SizeVar) and seq.value == 16
    assert main.attrs["tir_var_lower_bound"] == {dim.name: 1}
    assert main.attrs["tir_var_upper_bound"] == {dim.name: 8}
    exe = relax.build(mod, "llvm")
    for b in (1, 3):
        ids = torch.randint(0, 1000, (b, 16))
        got, = zoo.run_vm(exe, (ids,))
        zoo.assert_close(got, _torch_out(model, ids)[0], f"batch {b}")


def test_dynamic_batch_cnn(small):
    model, x, _ = small
    ep = _export(model, x, dynamic_shapes={"x": {0: torch.export.Dim("n", max=16)}})
    exe = relax.build(from_exported_program(ep), "llvm")
    for b in (1, 4):
        xb = torch.randn(b, 3, 8, 8)
        for g, w in zip(zoo.run_vm(exe, (xb,)), _torch_out(model, xb)):
            zoo.assert_close(g, w, f"batch {b}")


# ---- unsupported ops ----------------------------------------------------------------------------

class _Scan(nn.Module):
    def forward(self, x):
        return torch.logcumsumexp(x, dim=1)


class _Sort(nn.Module):
    def forward(self, x):
        return torch.kthvalue(x, 2, dim=-1, keepdim=True).values * x


class TwoUnsupported(nn.Module):
    def __init__(self):
        super().__init__()
        self.proj = nn.Linear(8, 8)
        self.scan = _Scan()
        self.blocks = nn.ModuleList([nn.Sequential(nn.ReLU(), _Sort()) for _ in range(2)])

    def forward(self, x):
        x = self.scan(self.proj(x))
        for b in self.blocks:
            x = b(x)
        return x


def test_unsupported_ops_are_listed_together_with_their_modules():
    ep = _export(TwoUnsupported(), torch.randn(2, 8))
    with pytest.raises(OpNotImplemented) as info:
        from_exported_program(ep)
    err = info.value
    text = str(err)
    assert "aten.logcumsumexp.default" in text and "aten.kthvalue.default" in text
    assert "scan (_Scan)" in text and "blocks.0.1 (_Sort)" in text and "blocks.1.1" in text
    assert {u.op for u in err.unsupported} == {"aten.logcumsumexp.default",
                                               "aten.kthvalue.default"}
    assert "nothing was converted" in text


def test_unsupported_use_of_a_known_op_is_reported_up_front():
    class Pool(nn.Module):
        def __init__(self):
            super().__init__()
            self.down = nn.AvgPool2d(2, divisor_override=3)

        def forward(self, x):
            return self.down(x)

    ep = _export(Pool(), torch.randn(1, 3, 4, 4))
    with pytest.raises(OpNotImplemented, match="divisor_override.*down"):
        from_exported_program(ep)


def test_rejects_what_is_not_an_exported_program():
    with pytest.raises(TypeError, match="torch.export.ExportedProgram"):
        from_exported_program(nn.Linear(2, 2))


# ---- source locations ------------------------------------------------------------------------

def test_spans_name_modules_and_survive_fusion_and_build(small):
    model, x, ep = small
    mod = _import(ep)
    text = mod["main"].script()
    assert "# conv" in text and "# bn" in text and "# fc" in text
    exe = relax.build(mod, "llvm")
    lowered = [(k, s) for k, s in call_spans(exe.lowered_mod["main"]) if s is not None]
    # conv + bias + batch norm + relu fuse into one kernel named by its three layers (the
    # functional relu at the top level is named by its node); module-less ops by their node;
    # the reorder out of the blocked layout (before the mean) by "layout".
    assert [s.label() for _, s in lowered] == ["conv + bn + relu", "layout", "mean", "fc", "amax"]
    assert lowered[0][0].startswith("fused_conv2d") and lowered[3][0].startswith("fused_matmul")
    assert lowered[1][0].startswith("layout_transform")
    assert {k for k, _ in lowered} <= set(exe.kernel_names)
    conv = lowered[0][1]
    assert [src.module_type for src in conv.sources] == ["Conv2d", "BatchNorm2d", "SmallNet"]
    assert conv.op_types == ["aten.convolution.default",
                             "aten._native_batch_norm_legit_no_training.default",
                             "aten.relu.default"]

    # exe.call_sources is keyed by the VM's CallSite of each kernel call.
    vm = relax.VirtualMachine(exe, wb.cpu())
    seen = []

    def instrument(func, name, before, ret, *args):
        if before and name in exe.kernel_names:
            site = vm.instrument_position
            seen.append((name, exe.call_sources.get((site.function, site.index))))

    vm.set_instrument(instrument)
    vm["main"](wb.nd.array(x.numpy()))
    assert seen and all(isinstance(s, Span) for _, s in seen)
    assert [k for k, _ in seen] == [k for k, _ in lowered]
    assert [s.label() for _, s in seen] == [s.label() for _, s in lowered]

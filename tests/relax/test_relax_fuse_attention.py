"""Attention as one kernel: ``relax.nn.attention`` legalizes to the fused streaming kernel
(default schedule: dlight's Attention rule), FuseAttention turns the explicit
matmul-scale-mask-softmax-matmul chain of both importers into it, and the tuner's space for it
produces valid records. Results against PyTorch and float64 numpy."""
from __future__ import annotations

import io
import math

import numpy as np
import pytest

import workbench as wb
from workbench import relax
from workbench.ir.module import IRModule
from workbench.relax import op as R
from workbench.relax.op.nn.attention import _numpy_attention
from workbench.relax.pipeline import get_default_pipeline
from workbench.relax.transform import FuseAttention
from workbench.runtime.relax_vm import VirtualMachine
from workbench.tir import stmt as S
from workbench.tir.function import PrimFunc
from workbench.tir.functor import post_order_visit

TARGET = "llvm -num-cores=2"


def attention_module(shapes, bias_shape=None, scale=None, causal=None) -> IRModule:
    bb = relax.BlockBuilder()
    names = ("q", "k", "v")
    params = [relax.Var(n, relax.TensorStructInfo(s, "float32")) for n, s in zip(names, shapes)]
    if bias_shape is not None:
        params.append(relax.Var("bias", relax.TensorStructInfo(bias_shape, "float32")))
    with bb.function("main", params):
        with bb.dataflow():
            out = bb.emit_output(R.nn.attention(*params[:3], params[3] if bias_shape else None,
                                                scale, causal))
        bb.emit_func_output(out)
    return bb.get()


def run(mod: IRModule, *arrays):
    vm = VirtualMachine(relax.build(mod, TARGET), wb.cpu())
    out = vm["main"](*[wb.nd.array(np.ascontiguousarray(a)) for a in arrays])
    return (out[0] if isinstance(out, (list, tuple)) else out).numpy()


def kernels(mod: IRModule, s: int, t: int) -> tuple[list[PrimFunc], int]:
    """The fused attention kernels after the default pipeline, and the most elements any
    buffer of any kernel (parameter or scratch) of shape (.., s, t) holds: the scores."""
    lowered = get_default_pipeline(TARGET)(mod)
    funcs = [f for f in lowered.functions.values() if isinstance(f, PrimFunc)]
    sizes = [0]

    def note(buf):
        dims = [getattr(d, "value", None) for d in buf.shape]
        if dims[-2:] == [s, t] and None not in dims:
            sizes.append(int(np.prod(dims)))
    for f in funcs:
        for b in f.buffers:
            note(b)
        post_order_visit(f.body, lambda n: [note(b) for b in n.alloc_buffers]
                         if isinstance(n, S.Block) else None)
    return [f for f in funcs if "flash_attention" in f.attrs], max(sizes)


# ---- the op ---------------------------------------------------------------------------------

@pytest.mark.parametrize("shapes, bias_shape, scale, causal", [
    (((2, 33, 4, 16), (2, 41, 2, 16), (2, 41, 2, 8)), None, None, "BottomRight"),   # GQA
    (((1, 20, 3, 8), (1, 20, 3, 8), (1, 20, 3, 8)), (1, 1, 20, 20), 0.7, "TopLeft"),
    (((2, 9, 2, 8), (2, 30, 2, 8), (2, 30, 2, 8)), (2, 1, 1, 30), None, None),      # padding
])
def test_attention_op_is_one_streaming_kernel(shapes, bias_shape, scale, causal):
    mod = attention_module(shapes, bias_shape, scale, causal)
    b, s, n, _ = shapes[0]
    t = shapes[1][1]
    flash, biggest = kernels(mod, s, t)
    assert len(flash) == 1 and flash[0].attrs["tir.is_scheduled"]
    assert flash[0].attrs["op_pattern"] == 8                     # opaque: fusion leaves it
    assert biggest < b * n * s * t                                # no (B, N, S, T) tensor
    rng = np.random.default_rng(0)
    args = [rng.standard_normal(x).astype(np.float32) for x in shapes]
    if bias_shape is not None:
        bias = rng.standard_normal(bias_shape).astype(np.float32)
        bias[..., -3:] = -np.inf
        args.append(bias)
    got = run(mod, *args)
    ref = _numpy_attention(*args[:3], args[3] if bias_shape else None, scale, causal)
    np.testing.assert_allclose(got, ref, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("symbolic_heads", [False, True])
def test_symbolic_shapes_keep_the_masked_rows(symbolic_heads):
    """A symbolic query length takes the fused kernel (its loops stop at the length); a
    symbolic head count the te stages. Both give zeros for rows whose keys are all masked."""
    from workbench.tir.expr import SizeVar
    n = SizeVar("n", "int64")
    heads = SizeVar("h", "int64") if symbolic_heads else 2
    bb = relax.BlockBuilder()
    q = relax.Var("q", relax.TensorStructInfo((1, n, heads, 8), "float32"))
    k = relax.Var("k", relax.TensorStructInfo((1, 6, heads, 8), "float32"))
    m = relax.Var("m", relax.TensorStructInfo((1, 1, n, 6), "float32"))
    with bb.function("main", [q, k, m]):
        with bb.dataflow():
            out = bb.emit_output(R.nn.attention(q, k, k, m, None, "BottomRight"))
        bb.emit_func_output(out)
    mod = bb.get()
    assert bool(kernels(mod, 9, 6)[0]) is not symbolic_heads
    rng = np.random.default_rng(6)
    for s in (9, 70):                       # one query block, then two (the second short)
        qa, ka = rng.standard_normal((1, s, 2, 8)), rng.standard_normal((1, 6, 2, 8))
        mask = np.zeros((1, 1, s, 6))
        mask[..., 6, :] = -np.inf                             # row 6: every key masked
        args = [a.astype(np.float32) for a in (qa, ka, mask)]
        got = run(mod, *args)
        assert (got[0, :s - 6] == 0).all() and (got[0, 6] == 0).all()  # causal, S > T
        np.testing.assert_allclose(got, _numpy_attention(args[0], args[1], args[1], args[2],
                                                         None, "BottomRight"),
                                   rtol=1e-5, atol=1e-5)


def test_default_schedule_uses_the_attention_rule():
    from workbench.dlight import DefaultCPUSchedule
    from workbench.relax.transform import LegalizeOps
    legal = LegalizeOps()(attention_module(((1, 16, 2, 16),) * 3, causal="TopLeft"))
    sched = DefaultCPUSchedule(TARGET)
    sched(legal)
    assert sched.applied == {"transpose": "Injective", "attention": "Attention"}
    assert not sched.failures


# ---- the pass on hand-built graphs -------------------------------------------------------------

def explicit_chain(b=2, n=3, s=11, t=13, h=8, mask="add", scale_where="scores",
                   softmax_axis=-1) -> IRModule:
    """softmax(Q K^T * c [+ m | where(m, ., -inf)]) V on (B, N, S, H) inputs."""
    bb = relax.BlockBuilder()
    q = relax.Var("q", relax.TensorStructInfo((b, n, s, h), "float32"))
    k = relax.Var("k", relax.TensorStructInfo((b, n, t, h), "float32"))
    v = relax.Var("v", relax.TensorStructInfo((b, n, t, h), "float32"))
    mdt = "bool" if mask == "where" else "float32"
    m = relax.Var("m", relax.TensorStructInfo((s, t), mdt))
    c = relax.const(np.float32(1 / math.sqrt(h)))
    with bb.function("main", [q, k, v, m]):
        with bb.dataflow():
            kt = bb.emit(R.permute_dims(k, [0, 1, 3, 2]))
            x = bb.emit(R.matmul(q, kt))
            if scale_where == "scores":
                x = bb.emit(R.multiply(x, c))
            if mask == "add":
                x = bb.emit(R.add(x, m))
            elif mask == "where":
                x = bb.emit(R.where(m, x, relax.const(np.float32(-np.inf))))
            if scale_where == "after_mask":
                x = bb.emit(R.multiply(x, c))
            p = bb.emit(R.nn.softmax(x, softmax_axis))
            out = bb.emit_output(R.matmul(p, v))
        bb.emit_func_output(out)
    return bb.get()


def chain_reference(q, k, v, m, mask, scale, softmax_axis=-1):
    x = q.astype(np.float64) @ k.astype(np.float64).transpose(0, 1, 3, 2) * scale
    if mask == "add":
        x = x + m
    elif mask == "where":
        x = np.where(m, x, -np.inf)
    x = np.exp(x - x.max(softmax_axis, keepdims=True))
    return (x / x.sum(softmax_axis, keepdims=True)) @ v


@pytest.mark.parametrize("mask", ["add", "where", "none"])
def test_pass_fuses_the_explicit_chain(mask):
    mod = explicit_chain(mask=mask)
    fuse = FuseAttention()
    fused = fuse(mod)
    assert fuse.fused == 1
    assert "R.nn.attention" in fused["main"].script()
    rng = np.random.default_rng(1)
    q, k, v = (rng.standard_normal((2, 3, n, 8)).astype(np.float32) for n in (11, 13, 13))
    m = rng.random((11, 13)) > 0.3 if mask == "where" else \
        np.where(rng.random((11, 13)) > 0.3, 0, -np.inf).astype(np.float32)
    m[:, 0] = True if mask == "where" else 0          # every row sees a key
    flash, biggest = kernels(mod, 11, 13)
    assert len(flash) == 1 and biggest < 2 * 3 * 11 * 13
    np.testing.assert_allclose(run(mod, q, k, v, m),
                               chain_reference(q, k, v, m, mask, 1 / math.sqrt(8)),
                               rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("kwargs", [dict(scale_where="after_mask"), dict(softmax_axis=-2)])
def test_pass_leaves_other_chains_alone(kwargs):
    mod = explicit_chain(**kwargs)
    fuse = FuseAttention()
    fuse(mod)
    assert fuse.fused == 0
    rng = np.random.default_rng(2)
    q, k, v = (rng.standard_normal((2, 3, n, 8)).astype(np.float32) for n in (11, 13, 13))
    m = rng.standard_normal((11, 13)).astype(np.float32)
    ref = chain_reference(q, k, v, m, "add", 1 / math.sqrt(8), kwargs.get("softmax_axis", -1)) \
        if "softmax_axis" in kwargs else None
    if ref is None:   # the scale multiplies the mask too
        x = (q.astype(np.float64) @ k.transpose(0, 1, 3, 2) + m) / math.sqrt(8)
        x = np.exp(x - x.max(-1, keepdims=True))
        ref = (x / x.sum(-1, keepdims=True)) @ v
    else:
        x = q.astype(np.float64) @ k.transpose(0, 1, 3, 2) / math.sqrt(8) + m
        x = np.exp(x - x.max(-2, keepdims=True))
        ref = (x / x.sum(-2, keepdims=True)) @ v
    np.testing.assert_allclose(run(mod, q, k, v, m), ref, rtol=1e-5, atol=1e-5)


def test_pass_checks_its_argument():
    with pytest.raises(TypeError, match="FuseAttention expects an IRModule"):
        FuseAttention()("not a module")


# ---- both importers ----------------------------------------------------------------------------

torch = pytest.importorskip("torch")
from workbench.relax.frontend.torch import from_exported_program  # noqa: E402

B, SEQ, D, HEADS = 2, 24, 32, 8


class HandWritten(torch.nn.Module):
    """Attention as people write it: matmul, divide by sqrt(d), add the mask, softmax, matmul."""

    def __init__(self) -> None:
        super().__init__()
        self.qkv = torch.nn.Linear(D, 3 * D)
        self.o = torch.nn.Linear(D, D)

    def forward(self, x, mask):
        b, s, d = x.shape
        q, k, v = self.qkv(x).split(d, -1)
        q, k, v = (t.reshape(b, s, HEADS, d // HEADS).transpose(1, 2) for t in (q, k, v))
        a = (q @ k.transpose(-2, -1)) / math.sqrt(d // HEADS)
        a = (a + mask).softmax(-1)
        return self.o((a @ v).transpose(1, 2).reshape(b, s, d))


class MHA(torch.nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.m = torch.nn.MultiheadAttention(D, HEADS, batch_first=True)

    def forward(self, x, mask):
        return self.m(x, x, x, attn_mask=mask, need_weights=False)[0]


def import_model(model, how: str, x, mask) -> IRModule:
    if how == "export":
        return from_exported_program(torch.export.export(model, (x, mask)))
    onnx = pytest.importorskip("onnx")
    from workbench.relax.frontend.onnx import from_onnx
    f = io.BytesIO()
    torch.onnx.export(model, (x, mask), f, dynamo=False, input_names=["x", "mask"])
    return from_onnx(onnx.load_from_string(f.getvalue()))


@pytest.mark.filterwarnings("ignore::DeprecationWarning", "ignore::UserWarning")
@pytest.mark.parametrize("how", ["export", "onnx"])
@pytest.mark.parametrize("cls", [HandWritten, MHA])
def test_both_importers_end_up_with_one_attention_kernel(cls, how):
    torch.manual_seed(0)
    model = cls().eval()
    x = torch.randn(B, SEQ, D)
    mask = torch.zeros(SEQ, SEQ)
    mask[:, SEQ - 5:] = float("-inf")     # padding: the last five keys
    mask[2, :3] = float("-inf")
    mod = import_model(model, how, x, mask)
    fuse = FuseAttention()
    fuse(mod)
    assert fuse.fused == 1
    flash, biggest = kernels(mod, SEQ, SEQ)
    assert len(flash) == 1 and biggest < B * HEADS * SEQ * SEQ
    out = run(mod, x.numpy(), mask.numpy())
    with torch.no_grad():
        ref = model(x, mask).numpy()
    np.testing.assert_allclose(out, ref, rtol=1e-4, atol=1e-4)


class CausalBlockAttention(torch.nn.Module):
    """GPT-2's masking: a constant lower-triangular buffer, ``masked_fill`` with -inf."""

    def __init__(self) -> None:
        super().__init__()
        self.register_buffer("tri", torch.tril(torch.ones(SEQ, SEQ, dtype=torch.bool)),
                             persistent=False)

    def forward(self, q, k, v):
        a = (q @ k.transpose(-2, -1)) * (1 / math.sqrt(q.shape[-1]))
        a = a.masked_fill(~self.tri, float("-inf"))
        return torch.softmax(a, -1) @ v


def test_constant_causal_mask_becomes_the_causal_attribute():
    torch.manual_seed(2)
    q, k, v = (torch.randn(1, HEADS, SEQ, 16) for _ in range(3))
    mod = from_exported_program(torch.export.export(CausalBlockAttention().eval(), (q, k, v)))
    fused = FuseAttention()(mod)["main"].script()
    assert 'causal_mask="TopLeft"' in fused and "attention_mask" not in fused
    with torch.no_grad():
        ref = CausalBlockAttention()(q, k, v).numpy()
    np.testing.assert_allclose(run(mod, q.numpy(), k.numpy(), v.numpy()), ref, rtol=1e-4,
                               atol=1e-4)


@pytest.mark.parametrize("kind", ["causal", "bool", "float", "gqa"])
def test_torch_sdpa_matches_pytorch(kind):
    F = torch.nn.functional

    class Sdpa(torch.nn.Module):
        def forward(self, q, k, v, m):
            if kind == "causal":
                return F.scaled_dot_product_attention(q, k, v, is_causal=True)
            if kind == "gqa":
                return F.scaled_dot_product_attention(q, k, v, attn_mask=m, enable_gqa=True)
            return F.scaled_dot_product_attention(q, k, v, attn_mask=m)

    torch.manual_seed(1)
    kv_heads = 2 if kind == "gqa" else 4
    q = torch.randn(2, 4, 37, 16) * 30                 # large logits
    k, v = torch.randn(2, kv_heads, 37, 16), torch.randn(2, kv_heads, 37, 16)
    if kind == "bool":
        m = torch.rand(37, 37) > 0.5
        m[5] = False                      # a fully masked row: PyTorch gives zeros
    else:
        m = torch.randn(2, 1, 37, 37) * 10
    ep = torch.export.export(Sdpa().eval(), (q, k, v, m))
    mod = from_exported_program(ep)
    flash, biggest = kernels(mod, 37, 37)
    assert len(flash) == 1 and biggest < 2 * 4 * 37 * 37
    out = run(mod, q.numpy(), k.numpy(), v.numpy(), m.numpy())
    with torch.no_grad():
        ref = Sdpa()(q, k, v, m).numpy()
    assert np.isfinite(ref).all()
    np.testing.assert_allclose(out, ref, rtol=1e-4, atol=1e-4)


# ---- tuning ------------------------------------------------------------------------------------

@pytest.mark.slow
@pytest.mark.tuning
def test_tuner_space_for_the_attention_task(tmp_path):
    from workbench import meta_schedule as ms
    mod = attention_module(((1, 40, 2, 16),) * 3, causal="TopLeft")
    tasks = ms.relax_integration.extract_tasks(mod, TARGET)
    (task,) = [t for t in tasks if "flash_attention" in t.dispatched[0]["main"].attrs]
    db = ms.tune_tir(task.dispatched[0], TARGET, str(tmp_path), max_trials_global=6,
                     num_trials_per_iter=6, cost_model="random", seed=3)
    records = db.get_all_tuning_records()
    assert records and all(r.run_secs and np.isfinite([float(s) for s in r.run_secs]).all()
                           for r in records)
    sizes = {tuple(d for inst, d in r.trace.decisions.items()
                   if inst.kind.name == "SampleCategorical") for r in records}
    assert len(sizes) > 1                                     # block sizes are decisions
    exe = ms.relax_integration.compile_relax(db, mod, TARGET)
    vm = VirtualMachine(exe, wb.cpu())
    rng = np.random.default_rng(5)
    q, k, v = (rng.standard_normal((1, 40, 2, 16)).astype(np.float32) for _ in range(3))
    got = vm["main"](*[wb.nd.array(a) for a in (q, k, v)]).numpy()
    np.testing.assert_allclose(got, _numpy_attention(q, k, v, None, None, "TopLeft"),
                               rtol=1e-5, atol=1e-5)


@pytest.mark.filterwarnings("ignore::DeprecationWarning", "ignore::UserWarning")
def test_packed_qkv_split_reads_whole_vectors():
    """``nn.MultiheadAttention`` splits its packed q/k/v projection with unflatten, unsqueeze,
    transpose and squeeze: one copy kernel whose inlined index mixes int32 loop variables with
    int64 shapes. Its default schedule must read the input with contiguous vectors (it was a
    16-lane gather: 585 us against 22 us at BERT's 128 x 2304)."""
    from workbench import dlight
    from workbench.meta_schedule.relax_integration import extract_tasks
    from workbench.tir import expr as E
    torch.manual_seed(0)
    x, mask = torch.randn(B, SEQ, D), torch.zeros(SEQ, SEQ)
    mod = import_model(MHA().eval(), "export", x, mask)
    target = wb.Target("llvm")
    (task,) = [t for t in extract_tasks(mod, target) if "expand_dims_transpose" in t.task_name]
    func = task.dispatched[0]["main"]
    src = func.buffer_map[func.params[0]]
    lowered = wb.lower(dlight.default_schedule(task.dispatched[0], target))
    loads = []
    post_order_visit(lowered["main"].body, lambda n: loads.append(n) if isinstance(
        n, E.BufferLoad) and n.buffer.name == src.name else None)
    assert loads and all(isinstance(ld.indices[-1], E.Ramp) and
                         isinstance(ld.indices[-1].stride, E.IntImm) and
                         ld.indices[-1].stride.value == 1 for ld in loads), loads

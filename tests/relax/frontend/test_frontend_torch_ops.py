"""The PyTorch converters op family by op family, against PyTorch: each family is one module
returning many results (one compile per family), imported after PyTorch's decompositions (core
ATen, the default) and without them (the common non-decomposed ops: linear, conv2d,
layer_norm, scaled_dot_product_attention, hardswish, ...)."""
from __future__ import annotations

import math

import pytest

import frontend_zoo as zoo
from frontend_zoo import F, nn, torch
from workbench import relax
from workbench.relax.frontend.torch import from_exported_program

pytestmark = pytest.mark.slow


class Elementwise(nn.Module):
    def forward(self, x, y, i, m):
        a = x.abs() + 0.5
        return (
            F.relu6(x * 4), F.hardswish(x * 4), F.hardsigmoid(x * 4), F.silu(x), F.gelu(x),
            F.gelu(x, approximate="tanh"), F.leaky_relu(x, 0.2), torch.clamp(x, -0.5, 0.3),
            torch.clamp(x, min=0.1), x.clamp(max=0.2), F.hardtanh(x, -0.3, 0.4),
            torch.sigmoid(x), torch.tanh(x), torch.exp(x), torch.log(a), torch.sqrt(a),
            torch.rsqrt(a), -x, torch.erf(x), torch.sin(x), torch.cos(x), torch.floor(x * 3),
            torch.ceil(x * 3), torch.round(x * 3), torch.reciprocal(a), torch.log1p(a),
            torch.expm1(x), x ** 2, a ** 0.5, a ** 3, a ** y, 2.0 ** x, torch.maximum(x, y),
            torch.minimum(x, y), torch.remainder(x, 0.3), torch.fmod(x, 0.3),
            torch.floor_divide(i, 3), torch.div(i, 3, rounding_mode="trunc"),
            torch.div(x, y.abs() + 1, rounding_mode="floor"), x / (y.abs() + 1), 1 - x,
            x - 2 * y, torch.sub(x, y, alpha=3), x + i, i * 2, i / 4,
            torch.where(x > y, x, y), x.masked_fill(m, -1.0), (x == y) | m, (x != y) & ~m,
            x < 0.1, x <= y, i > 2, i >= 2, torch.logical_and(x > 0, m),
            torch.logical_or(x > 0, m), torch.logical_not(m), F.softmax(x, -1),
            F.log_softmax(x, 1), x.to(torch.int32), i.to(torch.float32), x.type_as(y),
            torch.tan(x), torch.atan(x), torch.trunc(x * 3), torch.sign(x), torch.sign(i),
            torch.sinh(x), torch.cosh(x), torch.asinh(x), torch.acosh(a + 1),
            torch.atanh(torch.tanh(x) * 0.9), torch.asin(torch.tanh(x)),
            torch.acos(torch.tanh(x)), torch.log2(a), torch.log10(a), torch.atan2(x, y),
            torch.isnan(x / (y * 0)), torch.isinf(x / (y * 0)), F.elu(x, 0.7),
            torch.logical_xor(x > 0, m), i & 6, i | 5, i ^ 3, m ^ (x > 0), m & (x > y),
        )


class Shapes(nn.Module):
    def __init__(self):
        super().__init__()
        self.emb = nn.Embedding(10, 4)

    def forward(self, x, idx):
        b = x.shape[0]
        parts = torch.split(x, [1, 2], dim=1)
        return (
            x.view(b, -1), x.reshape(b, 3, 16), x.permute(0, 2, 3, 1), x.transpose(1, 3),
            x[0, 0].t(), x.unsqueeze(1), x[:, :1].squeeze(1), torch.flatten(x, 1),
            x.flatten(2).unflatten(2, (4, 4)), x[:, :1].expand(b, 5, 4, 4),
            x[:1, :1].repeat(2, 1, 1, 2), torch.cat([x, x * 2], dim=2),
            torch.stack([x, -x], dim=1), parts[0] + 1, parts[1] * 2,
            *torch.chunk(x, 3, dim=1), *x[0].unbind(0), x[:, 1], x[:, -1], x[..., 1:3],
            x[:, :, ::2], x.narrow(3, 1, 2), torch.index_select(x, 2, idx), x[:, :, idx],
            torch.tril(x), torch.triu(x, 1), x.flip(3), torch.zeros_like(x) + x,
            torch.ones(2, 3) * 2, torch.full((2, 2), 7.0), torch.arange(5),
            torch.arange(1, 10, 2), x.new_zeros((2, 2)), self.emb(idx),
            torch.as_strided(x + 0, (2, 3, 2, 2), (48, 16, 5, 1), 1),
            (x * 2).as_strided((2, 3, 3, 4), (48, 16, 4, 1)),
        )


class NN(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv = nn.Conv2d(4, 6, 3, stride=2, padding=1, dilation=1)
        self.group = nn.Conv2d(4, 8, 3, padding=2, dilation=2, groups=2)
        self.depth = nn.Conv2d(4, 4, 3, padding=1, groups=4, bias=False)
        self.conv1d = nn.Conv1d(4, 5, 3, padding=1)
        self.bn = nn.BatchNorm2d(4)
        self.ln = nn.LayerNorm([8, 8])
        self.fc = nn.Linear(8, 3)
        self.bn.running_mean.uniform_(-0.5, 0.5)
        self.bn.running_var.uniform_(0.5, 1.5)

    def forward(self, x, q, k, v, mask):
        seq = x.flatten(2)
        return (
            self.conv(x), self.group(x), self.depth(x), self.conv1d(seq[:, :, :10]), self.bn(x),
            self.ln(x), self.fc(x), F.layer_norm(x, [8], eps=1e-3),
            F.max_pool2d(x, 3, 2, 1), F.max_pool2d(x, 2, ceil_mode=True),
            F.avg_pool2d(x, 3, 2, 1), F.avg_pool2d(x, 2, count_include_pad=False),
            F.adaptive_avg_pool2d(x, 1), F.adaptive_avg_pool2d(x, (2, 4)),
            q @ k.transpose(-1, -2), torch.bmm(q[0], k[0].transpose(1, 2)),
            torch.addmm(q[0, 0, :, 0], q[0, 0], k[0, 0].t(), beta=0.5, alpha=2.0),
            F.scaled_dot_product_attention(q, k, v),
            F.scaled_dot_product_attention(q, k, v, is_causal=True),
            F.scaled_dot_product_attention(q, k, v, attn_mask=mask),
            x.mean((2, 3)), x.sum(1, keepdim=True), x.sum(), x.amax(2), x.amin((1, 3)),
            x.prod(3), x.argmax(1), x.argmin(-1), x.max(1).values, x.max(1).indices,
            x.min(2).values, x.max(), (x > 1).any(1), (x > -3).all(2),
        )


class Indexing(nn.Module):
    """Gathers, scatters, ordering, resampling, padding, group norm, pooling indices."""

    def __init__(self):
        super().__init__()
        self.gn = nn.GroupNorm(2, 4)

    def forward(self, x, idx, grid):
        flat = x.flatten(2)                                   # (2, 4, 64)
        pos = idx.expand(2, 4, 3)
        # (The functional forms: an in-place write to a view has no value semantics.)
        y = torch.slice_scatter(x, x[:, :2] * 2, 1, 1, 3)
        z = torch.slice_scatter(x, torch.full_like(x[:, :, ::2], 0.5), 2, 0, None, 2)
        w = flat.index_put((idx[0, 0] % 2, idx[0, 0] % 4), torch.tensor(1.5))
        values, where = F.max_pool2d(x, 2, return_indices=True)
        return (
            torch.gather(flat, 2, pos), flat.scatter(2, pos, -1.0),
            flat.scatter(2, pos, flat[:, :, :3] * 3), flat.scatter_add(2, pos, flat[..., :3]),
            flat.scatter_reduce(2, pos, flat[..., 5:8], "amax"), y, z, w,
            torch.sort(flat, -1)[0], torch.sort(flat, 1, descending=True)[1],
            torch.topk(flat, 3)[0], torch.topk(flat, 2, dim=1, largest=False)[1],
            torch.cumsum(x, 2), torch.cumprod(x, -1),
            F.interpolate(x, scale_factor=2, mode="nearest"),
            F.interpolate(x, size=(5, 11), mode="nearest"),
            F.interpolate(x, scale_factor=1.5, mode="bilinear"),
            F.interpolate(x, size=(4, 12), mode="bilinear", align_corners=True),
            F.interpolate(x, size=(6, 7), mode="bicubic"),
            F.grid_sample(x, grid, align_corners=False),
            F.grid_sample(x, grid, mode="nearest", padding_mode="border", align_corners=True),
            F.grid_sample(x, grid, mode="bicubic", padding_mode="reflection",
                          align_corners=False),
            F.pad(x, (1, 2, 0, 1), value=0.5), F.pad(x, (2, 1, 1, 2), mode="reflect"),
            F.pad(x, (3, 0, 2, 2), mode="replicate"), F.pad(x, (1, 2, 2, 1), mode="circular"),
            self.gn(x), values, where,
            torch.var(x, (2, 3)), torch.var(x, 1, unbiased=False, keepdim=True),
            torch.var(x, 3, correction=2), torch.clamp(x, x[:, :1] * 0.5, x[:, 1:2] + 1),
            torch.select_scatter(x, x[:, 0] * 3, 1, 2), torch.diagonal(x, 1, 2, 3),
            torch.diagonal(x, -2, 0, 3), torch.full_like(x, 0).fill_(2.5),
            F.batch_norm(x, None, None, self.gn.weight, self.gn.bias, training=True),
        )


class Windows(nn.Module):
    """1-d and 3-d convolutions and pools, transposed convolutions (1-3 d)."""

    def __init__(self):
        super().__init__()
        self.c1 = nn.Conv1d(4, 6, 3, stride=2, padding=1)
        self.c3 = nn.Conv3d(4, 6, (3, 2, 3), padding=(1, 0, 1), dilation=(1, 2, 1), groups=2)
        self.t1 = nn.ConvTranspose1d(4, 3, 3, stride=2, padding=1, output_padding=1)
        self.t2 = nn.ConvTranspose2d(4, 6, 3, stride=(2, 1), padding=(0, 1), groups=2,
                                     dilation=(1, 2))
        self.t3 = nn.ConvTranspose3d(4, 2, 2, stride=2)

    def forward(self, x1, x2, x3):
        return (
            self.c1(x1), self.c3(x3), self.t1(x1), self.t2(x2), self.t3(x3),
            F.max_pool1d(x1, 3, 2, 1), F.avg_pool1d(x1, 2, ceil_mode=True),
            F.max_pool3d(x3, 2, 2, ceil_mode=True), F.avg_pool3d(x3, (3, 2, 2), 1, (1, 0, 1)),
            F.adaptive_avg_pool3d(x3, 1), F.adaptive_avg_pool3d(x3, (2, 2, 3)),
        )


def _inputs(name: str):
    g = torch.Generator().manual_seed(3)
    r = lambda *s: torch.randn(*s, generator=g)  # noqa: E731
    if name == "elementwise":
        return (r(2, 3, 8), r(2, 3, 8), torch.randint(-9, 9, (2, 3, 8), generator=g),
                torch.rand(2, 3, 8, generator=g) > 0.5)
    if name == "shapes":
        return (r(2, 3, 4, 4), torch.tensor([3, 0, 1]))
    if name == "windows":
        return (r(2, 4, 9), r(1, 4, 5, 6), r(1, 4, 4, 6, 6))
    if name == "indexing":
        return (r(2, 4, 8, 8), torch.tensor([[[5, 0, 63]]]),
                torch.rand(2, 3, 5, 2, generator=g) * 2.4 - 1.2)
    mask = torch.rand(1, 2, 6, 6, generator=g) > 0.3
    mask[..., 0] = True
    return (r(2, 4, 8, 8), r(1, 2, 6, 4), r(1, 2, 6, 4), r(1, 2, 6, 4), mask)


_MODULES = {"elementwise": Elementwise, "shapes": Shapes, "nn": NN, "indexing": Indexing,
            "windows": Windows}


@pytest.mark.parametrize("decompose", [True, False], ids=["core_aten", "not_decomposed"])
@pytest.mark.parametrize("family", list(_MODULES))
def test_family_matches_pytorch(family, decompose):
    torch.manual_seed(0)
    model = _MODULES[family]().eval()
    args = _inputs(family)
    with torch.no_grad():
        ep = torch.export.export(model, args)
        want = [o.numpy() for o in model(*args)]
    exe = relax.build(from_exported_program(ep, run_ep_decomposition=decompose), "llvm")
    got = zoo.run_vm(exe, args)
    assert len(got) == len(want)
    for k, (g, w) in enumerate(zip(got, want)):
        assert g.shape == w.shape and g.dtype == w.dtype, (k, g.shape, w.shape, g.dtype)
        zoo.assert_close(g, w, f"{family} output {k}")


def test_custom_convert_map_overrides_a_converter():
    class Act(nn.Module):
        def forward(self, x):
            return torch.sigmoid(x)

    x = torch.randn(2, 3)
    with torch.no_grad():
        ep = torch.export.export(Act(), (x,))

    def half_tanh(node, importer):  # TVM's calling convention: fn(node, importer)
        arg, = importer.retrieve_args(node)
        return importer.block_builder.emit(relax.op.tanh(arg) * relax.const(0.5))

    exe = relax.build(from_exported_program(
        ep, custom_convert_map={"sigmoid.default": half_tanh}), "llvm")
    got, = zoo.run_vm(exe, (x,))
    zoo.assert_close(got, (torch.tanh(x) * 0.5).numpy(), "custom converter")
    assert math.isclose(float(got[0, 0]), math.tanh(float(x[0, 0])) * 0.5, rel_tol=1e-5)


def test_as_strided_of_a_view_is_refused():
    class View(nn.Module):
        def forward(self, x):
            return x.t().as_strided((2, 2), (1, 2))

    with torch.no_grad():
        ep = torch.export.export(View(), (torch.randn(3, 3),))
    with pytest.raises(NotImplementedError, match="non-contiguous input"):
        from_exported_program(ep)

"""A GPT-2-style decoder with a key/value cache, for generating tokens on the Relax VM.

GPT-2's architecture (pre-LayerNorm blocks, causal self-attention, tanh-GELU MLP, learned
position embeddings, output projection tied to the token embeddings) at any size
(:class:`GPT2Config`), written with ``relax.frontend.nn`` modules. The attention layers keep
their keys and values in :class:`~workbench.relax.frontend.nn.kv_cache.FixedKVCache` s: tensors
of the full context length allocated once by the caller and written in place each step.

- :func:`export_gpt2` traces two Relax functions over the same weights (bound as constants, so
  the weights' transposes and packing happen at compile time):
  ``prefill(tokens (1, P), pos (1,), k_0, v_0, k_1, v_1, ...)`` for a chunk of ``P`` prompt
  tokens and ``decode(tokens (1, 1), pos, caches...)`` for one token; each returns
  ``(logits (1, S, vocab), k_0, v_0, ...)``, the caches being the very arrays passed in.
- :class:`GPT2Decoder` runs them on a ``VirtualMachine``: it owns the caches and the position,
  and :meth:`GPT2Decoder.generate` does greedy decoding.
- :func:`torch_reference` builds the same model in PyTorch (random weights, its own
  fixed-capacity cache), the reference the tests and the benchmark compare with, and
  :func:`from_torch` copies its weights into an nn model.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Sequence

import numpy as np

from workbench.relax.frontend.nn import op
from workbench.relax.frontend.nn import spec as _spec
from workbench.relax.frontend.nn.core import Module, ModuleList, Tensor
from workbench.relax.frontend.nn.kv_cache import FixedKVCache
from workbench.relax.frontend.nn.modules import Embedding, LayerNorm, Linear


@dataclass(frozen=True)
class GPT2Config:
    """Model sizes; ``n_positions`` is also the key/value cache capacity (the longest
    context)."""

    vocab_size: int = 1000
    n_positions: int = 256
    n_embd: int = 768
    n_layer: int = 2
    n_head: int = 12
    layer_norm_epsilon: float = 1e-5

    def __post_init__(self) -> None:
        for name in ("vocab_size", "n_positions", "n_embd", "n_layer", "n_head"):
            v = getattr(self, name)
            if not isinstance(v, int) or isinstance(v, bool) or v <= 0:
                raise ValueError(f"GPT2Config: {name} must be a positive int, got {v!r}")
        if self.n_embd % self.n_head:
            raise ValueError(f"GPT2Config: n_embd ({self.n_embd}) must be a multiple of "
                             f"n_head ({self.n_head})")

    @property
    def head_dim(self) -> int:
        return self.n_embd // self.n_head

    def cache(self) -> FixedKVCache:
        return FixedKVCache(self.n_positions, self.n_head, self.head_dim)


# ---- the model (relax.frontend.nn) --------------------------------------------------------------

class GPT2Attention(Module):
    def __init__(self, config: GPT2Config):
        self.config = config
        self.c_attn = Linear(config.n_embd, 3 * config.n_embd)
        self.c_proj = Linear(config.n_embd, config.n_embd)

    def forward(self, x: Tensor, pos: Tensor, keys: Tensor, values: Tensor
                ) -> tuple[Tensor, Tensor, Tensor]:
        c = self.config
        b, s = (int(d) for d in x.shape[:2])
        q, k, v = op.split(self.c_attn(x), 3, axis=2)
        q, k, v = (op.reshape(t, [b, s, c.n_head, c.head_dim]) for t in (q, k, v))
        cache = c.cache()
        keys, values = cache.append(keys, values, k, v, pos)
        y = cache.attention(q, keys, values, pos)
        return self.c_proj(op.reshape(y, [b, s, c.n_embd])), keys, values


class GPT2MLP(Module):
    def __init__(self, config: GPT2Config):
        self.c_fc = Linear(config.n_embd, 4 * config.n_embd)
        self.c_proj = Linear(4 * config.n_embd, config.n_embd)

    def forward(self, x: Tensor) -> Tensor:
        return self.c_proj(op.gelu(self.c_fc(x), approximate="tanh"))


class GPT2Block(Module):
    def __init__(self, config: GPT2Config):
        eps = config.layer_norm_epsilon
        self.ln_1 = LayerNorm(config.n_embd, eps)
        self.attn = GPT2Attention(config)
        self.ln_2 = LayerNorm(config.n_embd, eps)
        self.mlp = GPT2MLP(config)

    def forward(self, x: Tensor, pos: Tensor, keys: Tensor, values: Tensor
                ) -> tuple[Tensor, Tensor, Tensor]:
        a, keys, values = self.attn(self.ln_1(x), pos, keys, values)
        x = x + a
        return x + self.mlp(self.ln_2(x)), keys, values


class GPT2LMHeadModel(Module):
    """``forward(tokens (1, S) int64, pos (1,) int64, k_0, v_0, ...)`` ->
    ``(logits (1, S, vocab), k_0, v_0, ...)`` (see the module docstring)."""

    def __init__(self, config: GPT2Config):
        self.config = config
        self.wte = Embedding(config.vocab_size, config.n_embd)
        self.wpe = Embedding(config.n_positions, config.n_embd)
        self.h = ModuleList([GPT2Block(config) for _ in range(config.n_layer)])
        self.ln_f = LayerNorm(config.n_embd, config.layer_norm_epsilon)

    def forward(self, tokens: Tensor, pos: Tensor, *caches: Tensor) -> tuple[Tensor, ...]:
        c = self.config
        if len(caches) != 2 * c.n_layer:
            raise ValueError(f"GPT2LMHeadModel: {2 * c.n_layer} cache tensors (keys and values "
                             f"of {c.n_layer} layers) expected, got {len(caches)}")
        s = int(tokens.shape[1])
        positions = op.add(pos, Tensor(_arange(s)), name="positions")
        x = op.add(self.wte(tokens), self.wpe(positions))         # (1, S, d) + (S, d)
        out: list[Tensor] = []
        for i, block in enumerate(self.h):
            x, k, v = block(x, pos, caches[2 * i], caches[2 * i + 1])
            out += [k, v]
        # GPT-2 ties the output projection to the token embeddings
        logits = op.matmul(self.ln_f(x), op.permute_dims(self.wte.weight))
        return (logits, *out)

    prefill = forward
    decode = forward


def _arange(n: int) -> Any:
    from workbench.relax.expr import const
    return const(np.arange(n, dtype="int64"))


# ---- export and run -----------------------------------------------------------------------------

def export_gpt2(model: GPT2LMHeadModel, prefill_len: int = 8) -> Any:
    """The IRModule with ``prefill`` (chunks of ``prefill_len`` tokens) and ``decode`` (one
    token), every weight bound as a constant (so each Parameter must hold data)."""
    from workbench.relax.transform.bind_params import BindParams
    c = model.config
    if not isinstance(prefill_len, int) or not 1 <= prefill_len <= c.n_positions:
        raise ValueError(f"export_gpt2: prefill_len must be an int in [1, {c.n_positions}], "
                         f"got {prefill_len!r}")
    k_spec, v_spec = c.cache().specs()
    cache_specs = {}
    for i in range(c.n_layer):
        cache_specs[f"k_cache_{i}"], cache_specs[f"v_cache_{i}"] = k_spec, v_spec

    def inputs(s: int) -> dict[str, Any]:
        return {"tokens": _spec.Tensor((1, s), "int64"), "pos": _spec.Tensor((1,), "int64"),
                **cache_specs}
    mod, params = model.export_tvm({"prefill": inputs(prefill_len), "decode": inputs(1)})
    missing = [name for name, p in params if p.data is None]
    if missing:
        raise ValueError(f"export_gpt2: parameters without data: {missing[:5]}"
                         f"{' ...' if len(missing) > 5 else ''} (load weights first, e.g. "
                         "from_torch)")
    values = {name: p.data for name, p in params}
    for fn in ("prefill", "decode"):
        mod = BindParams(fn, values)(mod)
    return mod


class GPT2Decoder:
    """Greedy generation on a VirtualMachine with the cache held across calls.

    The caches are allocated once (``self.caches``: NDArrays at full capacity, written in place
    by every call); ``self.pos`` is the number of positions filled."""

    def __init__(self, exe: Any, config: GPT2Config, device: Any = None, prefill_len: int = 8):
        import workbench as wb
        from workbench.runtime.relax_vm import VirtualMachine
        self.config = config
        self.prefill_len = prefill_len
        self.device = device if device is not None else wb.cpu()
        self.exe = exe
        self.vm = VirtualMachine(exe, self.device)
        cache = config.cache()
        self.caches = []
        for _ in range(config.n_layer):
            self.caches += [wb.nd.array(a, self.device) for a in cache.empty()]
        self.pos = 0

    def reset(self) -> None:
        """Start a new sequence (the old cache rows are masked out, so need no clearing)."""
        self.pos = 0

    def _run(self, fn: str, tokens: np.ndarray) -> np.ndarray:
        import workbench as wb
        s = tokens.shape[1]
        if self.pos + s > self.config.n_positions:
            raise ValueError(f"GPT2Decoder: {self.pos} + {s} positions exceed the cache "
                             f"capacity {self.config.n_positions}")
        out = self.vm[fn](wb.nd.array(tokens, self.device),
                          wb.nd.array(np.array([self.pos], "int64"), self.device), *self.caches)
        self.pos += s
        return out[0].numpy()[0]

    def prefill(self, tokens: Sequence[int]) -> np.ndarray:
        """Feed the prompt; returns its logits (len(tokens), vocab). Whole chunks of
        ``prefill_len`` tokens go through ``prefill``, the rest one by one through
        ``decode``."""
        toks = np.asarray(tokens, dtype="int64").reshape(1, -1)
        if toks.shape[1] == 0:
            raise ValueError("GPT2Decoder.prefill: the prompt is empty")
        rows = []
        p = self.prefill_len
        for start in range(0, toks.shape[1], p):
            chunk = toks[:, start:start + p]
            if chunk.shape[1] == p:
                rows.append(self._run("prefill", chunk))
            else:
                rows += [self._run("decode", chunk[:, i:i + 1]) for i in range(chunk.shape[1])]
        return np.concatenate(rows, axis=0)

    def step(self, token: int) -> np.ndarray:
        """One decode step: the logits (vocab,) after ``token``."""
        return self._run("decode", np.array([[token]], "int64"))[0]

    def generate(self, prompt: Sequence[int], max_new_tokens: int
                 ) -> tuple[list[int], list[np.ndarray]]:
        """Greedy decoding after ``prompt`` (from a fresh cache): the new tokens and the
        logits each was chosen from (the prompt's last row first)."""
        self.reset()
        logits = [self.prefill(prompt)[-1]]
        new = [int(np.argmax(logits[-1]))]
        while len(new) < max_new_tokens:
            logits.append(self.step(new[-1]))
            new.append(int(np.argmax(logits[-1])))
        return new, logits


# ---- the PyTorch reference ----------------------------------------------------------------------

def torch_reference(config: GPT2Config, seed: int = 0) -> Any:
    """The same model in PyTorch with random weights (``torch.manual_seed(seed)``, GPT-2's
    initialisation: normal(0, 0.02)): ``model(tokens (1, S), pos: int)`` -> logits (1, S,
    vocab), keeping its own fixed-capacity cache (``model.reset()`` starts over)."""
    import torch
    nn, F = torch.nn, torch.nn.functional
    c = config

    class Attention(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.c_attn, self.c_proj = nn.Linear(c.n_embd, 3 * c.n_embd), \
                nn.Linear(c.n_embd, c.n_embd)
            shape = (1, c.n_head, c.n_positions, c.head_dim)
            self.register_buffer("k_cache", torch.zeros(shape), persistent=False)
            self.register_buffer("v_cache", torch.zeros(shape), persistent=False)

        def forward(self, x: Any, pos: int) -> Any:
            b, s, d = x.shape
            q, k, v = (t.view(b, s, c.n_head, c.head_dim).transpose(1, 2)
                       for t in self.c_attn(x).split(d, dim=2))
            self.k_cache[:, :, pos:pos + s] = k
            self.v_cache[:, :, pos:pos + s] = v
            keys, values = self.k_cache[:, :, :pos + s], self.v_cache[:, :, :pos + s]
            mask = None
            if s > 1:   # causal within the new rows; all earlier positions visible
                mask = torch.ones(s, pos + s, dtype=torch.bool).tril(diagonal=pos)
            y = F.scaled_dot_product_attention(q, keys, values, attn_mask=mask)
            return self.c_proj(y.transpose(1, 2).reshape(b, s, d))

    class Block(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.ln_1 = nn.LayerNorm(c.n_embd, eps=c.layer_norm_epsilon)
            self.attn = Attention()
            self.ln_2 = nn.LayerNorm(c.n_embd, eps=c.layer_norm_epsilon)
            self.c_fc, self.mlp_proj = nn.Linear(c.n_embd, 4 * c.n_embd), \
                nn.Linear(4 * c.n_embd, c.n_embd)

        def forward(self, x: Any, pos: int) -> Any:
            x = x + self.attn(self.ln_1(x), pos)
            return x + self.mlp_proj(F.gelu(self.c_fc(self.ln_2(x)), approximate="tanh"))

    class GPT2(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.wte = nn.Embedding(c.vocab_size, c.n_embd)
            self.wpe = nn.Embedding(c.n_positions, c.n_embd)
            self.h = nn.ModuleList([Block() for _ in range(c.n_layer)])
            self.ln_f = nn.LayerNorm(c.n_embd, eps=c.layer_norm_epsilon)

        def forward(self, tokens: Any, pos: int) -> Any:
            s = tokens.shape[1]
            x = self.wte(tokens) + self.wpe(torch.arange(pos, pos + s))
            for block in self.h:
                x = block(x, pos)
            return self.ln_f(x) @ self.wte.weight.T

        def reset(self) -> None:
            for block in self.h:
                block.attn.k_cache.zero_()
                block.attn.v_cache.zero_()

    torch.manual_seed(seed)
    model = GPT2().eval()
    with torch.no_grad():
        for name, p in model.named_parameters():
            # every parameter random, so a bias or norm weight read wrong shows in the logits
            if "ln_" in name and name.endswith("weight"):
                p.copy_(1.0 + 0.1 * torch.randn_like(p))
            else:
                p.normal_(0.0, 0.02)
    return model


def from_torch(torch_model: Any, config: GPT2Config) -> GPT2LMHeadModel:
    """An nn model holding ``torch_model``'s weights (a :func:`torch_reference` model)."""
    model = GPT2LMHeadModel(config)
    state = {k: v.detach().cpu().numpy() for k, v in torch_model.state_dict().items()}
    ours = dict(model.named_parameters())
    rename = {".mlp.c_fc.": ".c_fc.", ".mlp.c_proj.": ".mlp_proj."}
    for name, p in ours.items():
        src = name
        for a, b in rename.items():
            src = src.replace(a, b)
        if src not in state:
            raise KeyError(f"from_torch: the PyTorch model has no {src!r} (for {name!r})")
        p.data = state[src]
    return model


__all__ = ["GPT2Config", "GPT2LMHeadModel", "GPT2Decoder", "export_gpt2", "torch_reference",
           "from_torch"]

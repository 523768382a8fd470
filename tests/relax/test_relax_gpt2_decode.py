"""GPT-2-style decoding on the Relax VM with a key/value cache written in place (issue 22):
prefill + 16 greedy decode steps checked token by token against PyTorch."""
from __future__ import annotations

import re

import numpy as np
import pytest

import workbench as wb
from workbench import relax
from workbench.relax.frontend.nn.gpt2 import (
    GPT2Config, GPT2Decoder, export_gpt2, from_torch, torch_reference,
)

torch = pytest.importorskip("torch")

CONFIG = GPT2Config(vocab_size=1000, n_positions=64, n_embd=768, n_layer=2, n_head=12)
PREFILL = 4
PROMPT = [17, 401, 5, 933, 250, 61]     # a chunk of 4 through prefill, then 2 through decode
STEPS = 16


@pytest.fixture(scope="module")
def reference():
    return torch_reference(CONFIG, seed=0)


@pytest.fixture(scope="module")
def decoder(reference):
    exe = relax.build(export_gpt2(from_torch(reference, CONFIG), PREFILL), "llvm")
    return GPT2Decoder(exe, CONFIG, prefill_len=PREFILL)


def _torch_greedy(model, prompt, n):
    """PyTorch's own cached greedy decoding: new tokens and the logits chosen from."""
    model.reset()
    with torch.inference_mode():
        row = model(torch.tensor([prompt]), 0)[0, -1]
        tokens, logits, pos = [int(row.argmax())], [row.numpy()], len(prompt)
        while len(tokens) < n:
            row = model(torch.tensor([[tokens[-1]]]), pos)[0, -1]
            pos += 1
            tokens.append(int(row.argmax()))
            logits.append(row.numpy())
    return tokens, logits


def _close(ours, ref, what):
    err = np.abs(ours - ref).max() / np.abs(ref).max()
    assert err <= 1e-4, f"{what}: relative error {err:.2e}"


def test_reference_cache_matches_a_full_recompute(reference):
    """The reference's cached steps agree with running the whole sequence at once."""
    tokens, logits = _torch_greedy(reference, PROMPT, 6)
    reference.reset()
    with torch.inference_mode():
        full = reference(torch.tensor([PROMPT + tokens[:-1]]), 0)[0, len(PROMPT) - 1:].numpy()
    for i, row in enumerate(logits):
        _close(row, full[i], f"step {i}")


def test_greedy_decoding_matches_pytorch_token_by_token(decoder, reference):
    ref_tokens, ref_logits = _torch_greedy(reference, PROMPT, STEPS + 1)
    caches = list(decoder.caches)
    pointers = [c.data_ptr for c in caches]
    tokens, logits = decoder.generate(PROMPT, STEPS + 1)
    assert tokens == ref_tokens
    assert len(logits) == STEPS + 1
    for i, (ours, ref) in enumerate(zip(logits, ref_logits)):
        _close(ours, ref, f"step {i}")
    # the caches are the same arrays, in the same memory, after every step
    assert all(a is b for a, b in zip(decoder.caches, caches))
    assert [c.data_ptr for c in decoder.caches] == pointers
    # ... and hold PyTorch's keys and values at the filled positions
    filled = len(PROMPT) + STEPS
    for layer, block in enumerate(reference.h):
        k = caches[2 * layer].numpy()[0].transpose(0, 2, 1)[:, :filled]   # (N, T, H)
        v = caches[2 * layer + 1].numpy()[0].transpose(1, 0, 2)[:, :filled]
        np.testing.assert_allclose(k, block.attn.k_cache[0, :, :filled].numpy(), atol=1e-5)
        np.testing.assert_allclose(v, block.attn.v_cache[0, :, :filled].numpy(), atol=1e-5)


def test_prefill_logits_and_chunking(decoder, reference):
    """Every prompt row's logits, with the prompt split into a prefill chunk and steps."""
    decoder.reset()
    ours = decoder.prefill(PROMPT)
    reference.reset()
    with torch.inference_mode():
        ref = reference(torch.tensor([PROMPT]), 0)[0].numpy()
    assert ours.shape == ref.shape
    for i in range(len(PROMPT)):
        _close(ours[i], ref[i], f"prompt row {i}")


def test_decode_returns_the_caches_it_was_given(decoder):
    decoder.reset()
    decoder.prefill(PROMPT[:PREFILL])
    out = decoder.vm["decode"](wb.nd.array(np.array([[3]], "int64")),
                               wb.nd.array(np.array([decoder.pos], "int64")), *decoder.caches)
    assert len(out) == 1 + 2 * CONFIG.n_layer
    assert all(a is b for a, b in zip(out[1:], decoder.caches))


def test_no_cache_sized_allocation_in_the_step(decoder):
    """The lowered decode function allocates nothing the size of a cache: the writes go into
    the caller's tensors."""
    text = str(decoder.exe.lowered_mod["decode"])
    cache_bytes = 4 * CONFIG.n_positions * CONFIG.n_embd
    sizes = [int(s) for s in re.findall(r"alloc_storage\(R\.shape\(\[(\d+)\]\)", text)]
    assert sizes and all(s < cache_bytes for s in sizes), sizes


def test_capacity_and_argument_errors(decoder):
    decoder.reset()
    decoder.pos = CONFIG.n_positions
    with pytest.raises(ValueError, match="exceed the cache capacity 64"):
        decoder.step(1)
    decoder.reset()
    with pytest.raises(ValueError, match="prompt is empty"):
        decoder.prefill([])
    with pytest.raises(ValueError, match="prefill_len must be an int"):
        export_gpt2(from_torch(torch_reference(CONFIG), CONFIG), 0)
    with pytest.raises(ValueError, match="must be a multiple of n_head"):
        GPT2Config(n_embd=100, n_head=12)
    from workbench.relax.frontend.nn.gpt2 import GPT2LMHeadModel
    with pytest.raises(ValueError, match="parameters without data"):
        export_gpt2(GPT2LMHeadModel(CONFIG), 4)

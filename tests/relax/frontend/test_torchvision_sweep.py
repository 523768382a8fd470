"""Every torchvision classification and segmentation model (random weights, batch 1) through
both importers: ``from_exported_program`` against PyTorch and ``from_onnx`` (the dynamo
exporter's file) against onnxruntime, compiled and run on the VM.

Hours of compilation on a small machine, so the whole sweep runs only in ``make test-models``
(``WORKBENCH_MODEL_SWEEP=1``); ``make test`` runs the fixed :data:`SAMPLE` from it (with the
``test_frontend_*_models`` tests' ResNet-18/50, MobileNetV2/V3, EfficientNet-B0 and ViT-B/16,
and their BERT and GPT-2: ten models in CI). Images are 64x64 where the architecture allows,
else the smallest size it takes.
"""
from __future__ import annotations

import os

import pytest

import frontend_zoo as zoo
from frontend_zoo import torch
from workbench import relax

torchvision = pytest.importorskip("torchvision")

pytestmark = pytest.mark.slow

#: Run in ``make test`` too: quick to compile, and each brings what the zoo models do not
#: (fire modules and ceil-mode pools; ConvNeXt's as_strided pooling and channels-last layer
#: norm). ShuffleNetV2 and LR-ASPP (channel shuffle, a segmentation head) would add 2-3 minutes
#: of compilation to CI: they run in the sweep.
SAMPLE = ("squeezenet1_1", "convnext_tiny")
_SWEEP = bool(os.environ.get("WORKBENCH_MODEL_SWEEP"))
_OUTSIDE_SAMPLE = pytest.mark.skipif(
    not _SWEEP, reason="outside the sample, the torchvision sweep runs in `make test-models` "
                       "(WORKBENCH_MODEL_SWEEP=1)")

# Architectures that need a larger image than 64x64 (patch grids, fixed windows, stems).
_SIZE = {"inception_v3": 96, "vit_b_16": 224, "vit_b_32": 224, "vit_l_16": 224,
         "vit_l_32": 224, "vit_h_14": 224, "maxvit_t": 224}
_SEGMENTATION = tuple(torchvision.models.list_models(module=torchvision.models.segmentation))
_MODELS = tuple(torchvision.models.list_models(module=torchvision.models)) + _SEGMENTATION
assert set(SAMPLE) <= set(_MODELS), set(SAMPLE) - set(_MODELS)


def _model(name: str):
    kwargs: dict = {}
    if name in _SEGMENTATION:
        kwargs["weights_backbone"] = None
        if not name.startswith("lraspp"):
            kwargs["aux_loss"] = False
    if name in ("googlenet", "inception_v3"):
        kwargs.update(aux_logits=False, init_weights=True)
    torch.manual_seed(0)
    return torchvision.models.get_model(name, weights=None, **kwargs).eval()


def _close(got, want, what: str) -> None:
    """1e-4 relative, and 1e-4 of the largest output absolute: with random (uncalibrated)
    weights some models' logits reach 1e7, where float32 sums of different order differ in
    the units place."""
    import numpy as np
    scale = max(1.0, float(np.abs(want).max())) if want.size else 1.0
    np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-4 * scale, err_msg=what)


def _outputs(out):
    if isinstance(out, dict):
        out = out["out"]
    return [o.detach().numpy() for o in (out if isinstance(out, (tuple, list)) else (out,))]


@pytest.fixture(scope="module", params=[
    pytest.param(n, marks=() if n in SAMPLE else _OUTSIDE_SAMPLE) for n in _MODELS])
def exported(request):
    name = request.param
    model = _model(name)
    size = _SIZE.get(name, 64)
    x = torch.randn(1, 3, size, size, generator=torch.Generator().manual_seed(1))
    with torch.no_grad():
        ep = torch.export.export(model, (x,))
        want = _outputs(model(x))
    return name, ep, (x,), want


def test_pytorch_importer(exported):
    from workbench.relax.frontend.torch import from_exported_program
    name, ep, args, want = exported
    got = zoo.run_vm(relax.build(from_exported_program(ep), "llvm"), args)
    assert len(got) >= len(want)
    for g, w in zip(got, want):
        _close(g, w, f"{name} (PyTorch importer) vs PyTorch")


# protobuf cannot serialise a message past 2 GB: larger models (ViT-H/14, RegNetY-128GF) are
# saved with their weights as external data, as users ship them, and read back from the file.
_EXTERNAL_DATA_BYTES = 1 << 30


def _weight_bytes(ep) -> int:
    return sum(t.numel() * t.element_size() for t in ep.state_dict.values())


def test_onnx_importer(exported, tmp_path):
    import onnx

    from workbench.relax.frontend.onnx import from_onnx
    name, ep, args, _ = exported
    with zoo.warnings.catch_warnings():
        zoo.warnings.simplefilter("ignore")
        program = torch.onnx.export(ep, args, dynamo=True, verbose=False)
    if _weight_bytes(ep) < _EXTERNAL_DATA_BYTES:
        model = program.model_proto
        want = zoo.onnxruntime_outputs(model, args)
    else:
        path = str(tmp_path / f"{name}.onnx")
        program.save(path, external_data=True)
        del program
        want = zoo.onnxruntime_outputs(path, args)
        model = onnx.load(path)
    # Each stage's copy of the weights is dropped before the next (gigabytes for the largest).
    mod = from_onnx(model)
    del model
    exe = relax.build(mod, "llvm")
    del mod
    got = zoo.run_vm(exe, args)
    assert len(got) == len(want), f"{name}: {len(got)} outputs, onnxruntime {len(want)}"
    for g, w in zip(got, want):
        _close(g, w, f"{name} (ONNX importer) vs onnxruntime")

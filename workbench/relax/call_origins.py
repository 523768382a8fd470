"""Readable names for the model operations behind a kernel call (spans -> ``CallOrigin``).

``relax.build`` turns the :class:`~workbench.relax.span.Span` of every kernel call into a
:class:`~workbench.runtime.relax_vm.CallOrigin` (plain strings the runtime can keep, save and
put in profiling reports):

- ``layer``: the layers written relative to their common module, so a fused kernel reads like
  the code: ``layer1.0.conv2 + bn2 + add + relu`` (an operation of the common module's own
  ``forward``, such as the residual add, is named by its op); top-level layers as they are
  (``conv1 + bn1 + relu``); ONNX node names when the file records no module paths
  (``node_Conv_0 + node_Relu_1``);
- ``module``: the layers' common module path (``layer1.0``; ``""`` when they share none);
- ``op_type``: the distinct operations, ATen ops without namespace and overload (batch norm's
  and max pooling's inference variants by their common names) or ONNX op types.
"""
from __future__ import annotations

from typing import Mapping

from workbench.relax.span import Source, Span
from workbench.runtime.relax_vm import CallOrigin

__all__ = ["op_name", "origin_of", "call_origins"]

# ATen ops after torch.export's decompositions whose names say more than a reader needs.
_ATEN_ALIASES = {
    "_native_batch_norm_legit_no_training": "batch_norm",
    "_native_batch_norm_legit_functional": "batch_norm",
    "native_batch_norm": "batch_norm",
    "max_pool2d_with_indices": "max_pool2d",
    "native_layer_norm": "layer_norm",
    "_adaptive_avg_pool2d": "adaptive_avg_pool2d",
    "_softmax": "softmax",
    "_log_softmax": "log_softmax",
    "_scaled_dot_product_flash_attention_for_cpu": "scaled_dot_product_attention",
}


def op_name(source: Source) -> str:
    """``aten.convolution.default`` -> ``convolution``; ONNX op types as they are."""
    op = source.op_type
    if source.frontend == "torch" and op.startswith("aten."):
        op = op.split(".")[1]
        return _ATEN_ALIASES.get(op, op)
    return op


def _common_prefix(paths: list[list[str]]) -> list[str]:
    common: list[str] = []
    for level in zip(*paths):
        if any(p != level[0] for p in level):
            break
        common.append(level[0])
    return common


def origin_of(span: Span) -> CallOrigin:
    """The :class:`CallOrigin` of a call with this span (see the module docstring)."""
    sources = span.sources
    op_type = " + ".join(dict.fromkeys(op_name(s) for s in sources))
    paths = [s.module_path for s in sources if s.module_path]
    if len(dict.fromkeys(s.layer for s in sources)) == 1:
        return CallOrigin(sources[0].layer, paths[0] if paths else "", op_type)
    prefix = _common_prefix([p.split(".") for p in paths]) if len(paths) == len(sources) \
        else []
    depth = len(prefix)
    parts: list[str] = []
    for s in sources:
        if s.module_path and depth:
            rest = ".".join(s.module_path.split(".")[depth:])
            part = rest or op_name(s)  # an op of the common module's own forward
        else:
            part = s.layer
        if part not in parts:
            parts.append(part)
    label = " + ".join(parts)
    module = ".".join(prefix)
    return CallOrigin(f"{module}.{label}" if module else label, module, op_type)


def call_origins(call_sources: Mapping[tuple[str, int], Span | None]
                 ) -> dict[tuple[str, int], CallOrigin]:
    """``exe.call_sources`` -> ``exe.call_origins`` (calls without a span are left out)."""
    return {site: origin_of(span) for site, span in call_sources.items() if span is not None}

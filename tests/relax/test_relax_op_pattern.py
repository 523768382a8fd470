"""AnnotateTIROpPattern classifies legalized kernels as TVM does."""
from __future__ import annotations

import pytest

from workbench import relax
from workbench.relax.transform import OpPatternKind as K

from relax_cases import OP_CASES, one_op_module


EXPECTED = {
    "add_broadcast": K.kElemWise,      # x[i, j] + y[j]: one elementwise load makes it elemwise
    "relu": K.kElemWise,
    "exp": K.kElemWise,
    "broadcast_to": K.kBroadcast,
    "expand_dims": K.kInjective,       # a reshape kernel
    "transpose_default": K.kInjective,
    "concat": K.kInjective,
    "take": K.kInjective,
    "matmul_2d": K.kOutEWiseFusable,   # multiply-accumulate
    "conv2d_nchw": K.kOutEWiseFusable,
    "sum": K.kCommReduce,
    "max_all": K.kCommReduce,
    "softmax": K.kOutEWiseFusable,     # reduce, then an injective output block
    "max_pool2d": K.kOutEWiseFusable,  # window reduce with strided indices
    "split_sections": K.kInjective,    # one injective block per output
    "reshape": K.kInjective,
    # topi's layer_norm and argmax reduce two values in one block (two stores at the same
    # indices: one comm-reduce block, as in TVM), then an injective output block.
    "layer_norm": K.kOutEWiseFusable,
    "argmax": K.kOutEWiseFusable,
}


def _pattern(name):
    params, body, _ = OP_CASES[name]
    legal = relax.transform.LegalizeOps()(one_op_module(params, body))
    mod = relax.transform.AnnotateTIROpPattern()(legal)
    kinds = {k: f.attrs["op_pattern"] for k, f in mod.items() if k != "main"}
    assert len(kinds) == 1, kinds
    return next(iter(kinds.values()))


@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_op_pattern(name):
    assert _pattern(name) == EXPECTED[name]


def test_existing_annotation_is_kept():
    params, body, _ = OP_CASES["relu"]
    legal = relax.transform.LegalizeOps()(one_op_module(params, body))
    legal["relu"] = legal["relu"].with_attr("op_pattern", 8)
    assert relax.transform.AnnotateTIROpPattern()(legal)["relu"].attrs["op_pattern"] == 8

"""The model of TVM's customize_opt tutorial (Linear 784->256, ReLU, Linear 256->10 without
bias), shared by the FuseOpsByPattern and RunCodegen tests."""
from __future__ import annotations

import numpy as np

from workbench.relax.frontend import nn


class TutorialModel(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc1 = nn.Linear(784, 256)
        self.relu1 = nn.ReLU()
        self.fc2 = nn.Linear(256, 10, bias=False)

    def forward(self, x):
        return self.fc2(self.relu1(self.fc1(x)))


def tutorial_case():
    """(module, [x, fc1.weight, fc1.bias, fc2.weight], numpy's result)."""
    mod, params = TutorialModel().export_tvm(
        {"forward": {"x": nn.spec.Tensor((1, 784), "float32")}})
    rng = np.random.default_rng(0)
    x = rng.standard_normal((1, 784)).astype("float32")
    weights = [(rng.standard_normal(p.shape) * 0.05).astype(p.dtype) for _, p in params]
    w1, b1, w2 = weights
    return mod, [x, *weights], np.maximum(x @ w1.T + b1, 0) @ w2.T

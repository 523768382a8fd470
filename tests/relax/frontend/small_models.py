"""Small PyTorch models for tests that import, profile or tune a real exported model quickly:
``TinyResNet`` is ResNet's structure (a conv + bn + relu stem, two residual blocks, average
pooling, a linear classifier) at 8 channels on 12x12 images."""
from __future__ import annotations

from typing import Any

import numpy as np

torch = __import__("pytest").importorskip("torch")
nn = torch.nn


class Block(nn.Module):
    def __init__(self, c: int):
        super().__init__()
        self.conv1 = nn.Conv2d(c, c, 3, padding=1, bias=False)
        self.bn1 = nn.BatchNorm2d(c)
        self.relu = nn.ReLU()
        self.conv2 = nn.Conv2d(c, c, 3, padding=1, bias=False)
        self.bn2 = nn.BatchNorm2d(c)

    def forward(self, x: Any) -> Any:
        y = self.relu(self.bn1(self.conv1(x)))
        return self.relu(self.bn2(self.conv2(y)) + x)


class TinyResNet(nn.Module):
    def __init__(self, blocks: int = 2, classes: int = 10):
        super().__init__()
        self.conv1 = nn.Conv2d(3, 8, 3, padding=1, bias=False)
        self.bn1 = nn.BatchNorm2d(8)
        self.relu = nn.ReLU()
        self.layer1 = nn.Sequential(*[Block(8) for _ in range(blocks)])
        self.pool = nn.AdaptiveAvgPool2d(1)
        self.fc = nn.Linear(8, classes)

    def forward(self, x: Any) -> Any:
        x = self.layer1(self.relu(self.bn1(self.conv1(x))))
        return self.fc(torch.flatten(self.pool(x), 1))


def tiny_resnet(seed: int = 0, **kwargs: Any) -> tuple[Any, Any, Any, np.ndarray]:
    """(model in eval mode with non-trivial batch-norm statistics, input, its
    ``torch.export`` program, PyTorch's output)."""
    torch.manual_seed(seed)
    m = TinyResNet(**kwargs).eval()
    with torch.no_grad():
        for bn in (x for x in m.modules() if isinstance(x, nn.BatchNorm2d)):
            bn.running_mean.uniform_(-0.1, 0.1)
            bn.running_var.uniform_(0.5, 1.5)
    x = torch.randn(1, 3, 12, 12)
    with torch.no_grad():
        ep = torch.export.export(m, (x,))
        want = m(x).numpy()
    return m, x, ep, want

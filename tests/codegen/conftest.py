import numpy as np
import pytest

import workbench as wb


@pytest.fixture
def dev():
    return wb.cpu(0)


def nd(x):
    return wb.nd.array(np.ascontiguousarray(x))

"""Buffer planning under a predicated writer (fuzzer case random:12028, max pooling).

A cache_write copy block placed by reverse_compute_at under a producer whose predicate depends
on a loop that no binding uses (a non-dividing split of an extent-1 loop): in the iterations
where the predicate is false the copy reads what the first iteration wrote. Planning used to
allocate the cache buffer inside that loop (one element per iteration), so those reads saw a
fresh, unwritten buffer; it must allocate above the loop."""
from __future__ import annotations

import numpy as np

import workbench as wb
from workbench import te, topi
from workbench.tir import interpreter
from workbench.tir.schedule import Schedule


def _max_pool() -> Schedule:
    x = te.placeholder((1, 3, 7, 6), name="X")
    out = topi.nn.pool2d(x, (3, 3), (2, 2), (1, 1), (1, 1, 1, 1), "max", layout="NCHW")
    sch = Schedule(te.create_prim_func([x, out]))
    sch.compute_inline(sch.get_sblock("pad_temp"))
    pool = sch.get_sblock("pool_max")
    _, i1, i2, _, _, _ = sch.get_loops(pool)
    sch.split(i2, [4, None])
    i2_0 = sch.get_loops(pool)[2]
    sch.split(i2_0, [1, 4], preserve_unit_iters=False)
    sch.split(sch.get_loops(pool)[1], [3, 1, 1])
    # the extent-1 loop split in two: the second half runs with the predicate false
    sch.split(sch.get_loops(pool)[4], [2, None])
    copy = sch.cache_write(pool, 0, "global")
    sch.reverse_compute_at(copy, sch.get_loops(pool)[8], preserve_unit_loops=False)
    return sch


def _ref(x: np.ndarray) -> np.ndarray:
    xp = np.pad(x, ((0, 0), (0, 0), (1, 1), (1, 1)), constant_values=-np.inf)
    return np.stack([np.stack([xp[:, :, 2 * i:2 * i + 3, 2 * j:2 * j + 3].max(axis=(2, 3))
                               for j in range(3)], -1) for i in range(4)], -2)


def test_cache_buffer_outlives_the_loop_its_writer_is_predicated_on():
    sch = _max_pool()
    x = np.random.default_rng(0).standard_normal((1, 3, 7, 6)).astype("float32")
    block_form = np.zeros((1, 3, 4, 3), "float32")
    interpreter.run(sch.mod["main"], x, block_form)
    np.testing.assert_allclose(block_form, _ref(x))
    lowered = wb.lower(sch.mod)
    out = np.zeros((1, 3, 4, 3), "float32")
    interpreter.run(lowered["main"], x, out)
    np.testing.assert_allclose(out, _ref(x))
    built = wb.nd.empty((1, 3, 4, 3), "float32")
    wb.build(sch.mod)["main"](wb.nd.array(x), built)
    np.testing.assert_allclose(built.numpy(), _ref(x))
    # the cache is allocated once per i1_0 iteration, holding the 4 x 3 elements the copy reads
    assert "T.allocate([12]" in lowered.script()

"""A small network written with the BMKernel API - conv 3x3 + bias + ReLU with requantisation,
2x2 max pooling, and a fully connected layer (matrix_mac) with bias and requantisation - run
on the chip model and checked against an int64 numpy reference of the same network."""
import numpy as np
import pytest

from tests.bm1880.bm1880_harness import rng_for
from tests.bm1880.bm1880_net import (CIN, COUT, G_BC, G_BF, G_POOL, G_WC, G_WF, G_X, G_Y, H, K, N, OUT, W, build,
                                     reference)
from tlm.bm1880 import Bm1880, bmk1880_acquire_cmdbuf, bmk1880_info_t, bmk1880_register

@pytest.mark.parametrize("seed", [301, 302, 303])
def test_small_network(seed):
    r = rng_for(seed)
    x = r.integers(-128, 128, (N, CIN, H, W))
    wc = r.integers(-4, 5, (CIN, COUT, K, K))
    bc = r.integers(-3000, 3000, COUT)
    wf = r.integers(-8, 9, (COUT * H * W // 4, OUT))
    bf = r.integers(-20000, 20000, OUT)
    info = bmk1880_info_t(1880, bytearray(4096), 4096)
    ctx = bmk1880_register(info)
    build(ctx)
    buf, _ = bmk1880_acquire_cmdbuf(ctx)
    m = Bm1880()
    b8 = lambda a: (np.asarray(a) & 0xFF).astype(np.uint8).tobytes()                   # noqa: E731
    m.gmem.write(G_X, b8(x))
    m.gmem.write(G_WC, b8(wc.transpose(1, 2, 3, 0).reshape(COUT, K * K, CIN)))         # [co][kh.kw][ci]
    m.gmem.write(G_BC, b8(np.concatenate([bc & 0xFF, (bc >> 8) & 0xFF])))              # n = 0 low, n = 1 high
    m.gmem.write(G_WF, b8(wf))
    m.gmem.write(G_BF, b8(np.concatenate([bf & 0xFF, (bf >> 8) & 0xFF])))
    res = m.run(bytes(buf))
    assert res.ok, str(res)
    pooled, want = reference(x, wc, bc, wf, bf)
    got_pool = np.frombuffer(m.gmem.read(G_POOL, pooled.size), np.int8).reshape(pooled.shape)
    got = np.frombuffer(m.gmem.read(G_Y, want.size), np.int8).reshape(want.shape)
    assert np.array_equal(got_pool, pooled)
    assert np.array_equal(got, want)
    assert 0 < np.count_nonzero(np.abs(want) < 127)                                    # not all saturated

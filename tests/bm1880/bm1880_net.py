"""The small network of test_bm1880_net, as a helper (also traced by test_bm1880_trace)."""
import numpy as np

from tlm.bm1880 import (CTRL_AL, CTRL_NULL, FMT_I8, bmk1880_gdma_load, bmk1880_gdma_store, bmk1880_parallel_disable,
                        bmk1880_parallel_enable, bmk1880_tl_alloc, bmk1880_tl_prealloc, bmk1880_tpu_conv,
                        bmk1880_tpu_matrix_mac, bmk1880_tpu_max_pooling, shape_t2, shape_t4)

N, CIN, H, W, COUT, K, OUT = 2, 3, 8, 8, 8, 3, 10
CONV_SHIFT, FC_SHIFT = 7, 8
G_X, G_WC, G_BC, G_POOL, G_WF, G_BF, G_Y = 0x0, 0x1000, 0x2000, 0x3000, 0x4000, 0x5000, 0x6000


def reference(x, wc, bc, wf, bf):
    """int64 numpy: the network as a framework would compute it."""
    xp = np.pad(x, ((0, 0), (0, 0), (1, 1), (1, 1)))
    win = np.lib.stride_tricks.sliding_window_view(xp, (K, K), axis=(2, 3))           # (N, CIN, H, W, K, K)
    acc = np.tensordot(win, wc, axes=([1, 4, 5], [0, 2, 3])).transpose(0, 3, 1, 2)   # (N, COUT, H, W)
    y = np.clip(np.floor_divide(np.maximum(acc + bc[None, :, None, None], 0), 2 ** CONV_SHIFT), -128, 127)
    pooled = y.reshape(N, COUT, H // 2, 2, W // 2, 2).max(axis=(3, 5))
    flat = pooled.reshape(N, -1)
    out = np.clip(np.floor_divide(flat @ wf + bf, 2 ** FC_SHIFT), -128, 127)
    return pooled, out


def build(ctx):
    al = lambda s, ctrl=CTRL_AL: bmk1880_tl_alloc(ctx, s, FMT_I8, ctrl)                # noqa: E731
    x = al(shape_t4(N, CIN, H, W))
    wl = al(shape_t4(1, COUT, K * K, CIN), CTRL_NULL)                                  # 4.41's layout
    wt = bmk1880_tl_prealloc(ctx, wl.laddr, shape_t4(CIN, COUT, K, K), FMT_I8)
    bc = al(shape_t4(2, COUT, 1, 1), CTRL_NULL)
    y = al(shape_t4(N, COUT, H, W))
    p = al(shape_t4(N, COUT, H // 2, W // 2))
    left = al(shape_t2(N, COUT * H * W // 4))
    right = al(shape_t2(COUT * H * W // 4, OUT))
    bf = al(shape_t2(2, OUT))
    res = al(shape_t2(N, OUT))
    assert None not in (x, wl, wt, bc, y, p, left, right, bf, res), ctx.last_error
    bmk1880_gdma_load(ctx, x, G_X, CTRL_NULL)
    bmk1880_gdma_load(ctx, wl, G_WC, CTRL_NULL)
    bmk1880_gdma_load(ctx, bc, G_BC, CTRL_NULL)
    bmk1880_parallel_enable(ctx)                                                       # FC weights load during conv
    bmk1880_tpu_conv(ctx, ofmap=y, ifmap=x, weight=wt, bias=bc, pad_top=1, pad_bottom=1, pad_left=1, pad_right=1,
                     stride_h=1, stride_w=1, dilation_h=1, dilation_w=1, relu_enable=True, rshift_width=CONV_SHIFT)
    bmk1880_gdma_load(ctx, right, G_WF, CTRL_NULL)
    bmk1880_gdma_load(ctx, bf, G_BF, CTRL_NULL)
    bmk1880_parallel_disable(ctx)
    bmk1880_tpu_max_pooling(ctx, ofmap=p, ifmap=y, kh=2, kw=2, stride_h=2, stride_w=2)
    bmk1880_gdma_store(ctx, p, G_POOL, CTRL_NULL)                                      # NCHW in gmem = (N, C.H.W)
    bmk1880_gdma_load(ctx, left, G_POOL, CTRL_NULL)
    bmk1880_tpu_matrix_mac(ctx, res=res, left=left, right=right, bias=bf, lshift_width=0, rshift_width=FC_SHIFT,
                           res_is_int8=True, ctrls=CTRL_NULL)
    bmk1880_gdma_store(ctx, res, G_Y, CTRL_NULL)

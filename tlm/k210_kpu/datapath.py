"""The KPU's layer arithmetic, vectorised: convolution, batch norm, activation, pooling.

Formulas (EXT nncase ``kpu_conv2d`` / ``kpu_pool2d``; digest §3.2 and §9):

    acc = sum x*w + ((arg_x * sum x) >> shr_x) + ((arg_w * sum w) >> shr_w) + arg_add * n_ic
    v   = ((acc * norm_mul) >> norm_shift) + norm_add
    seg = highest i with v > x_start[i]          (segment 0 when none, see ``activate``)
    y   = clamp(round_half_even((v - x_start[seg]) * y_mul[seg] / 2**shift[seg])
                + result_bias[seg], 0, 255)

The sums run over the kernel window and the input channels of the group (all channels, or
the one channel of a depthwise layer); out-of-image taps read pad_value and count in
``sum x``; ``sum w`` is over every tap. Shifts ``>>`` floor (arithmetic). The convolution
and batch-norm outputs are 36-bit registers (nncase asserts it, digest §9): a value outside
that range wraps and is reported by ``overflow_count``. The convolution is one float64
matrix product per chunk of rows, exact because every partial sum stays below 2**53.
"""
from __future__ import annotations

import numpy as np
from numpy.lib.stride_tricks import sliding_window_view

from .registers import ACT_SEGMENTS, POOL_TYPES

ALU_BITS = 36                              # conv and batch-norm output width (EXT nncase)
CHUNK_ELEMENTS = 1 << 22                   # im2col elements per matrix product


def wrap(values: np.ndarray, bits: int = ALU_BITS) -> "tuple[np.ndarray, int]":
    """Two's-complement wrap of int64 values to `bits`; returns (wrapped, count changed)."""
    half = np.int64(1 << (bits - 1))
    w = ((values + half) & np.int64((1 << bits) - 1)) - half
    return w, int(np.count_nonzero(w != values))


def conv(x: np.ndarray, w: np.ndarray, kernel: int, depthwise: bool, pad_value: int,
         arg_x: int, shr_x: int, arg_w: int, shr_w: int, arg_add: int,
         stride: int = 1) -> np.ndarray:
    """int64 [O, H', W'] accumulators. x: uint8 [C, H, W]; w: [O, C, k, k] (depthwise
    [C, 1, k, k]) uint8 or uint16. SAME padding (k-1)/2 with pad_value; ``stride`` 2 keeps
    the outputs at even rows and columns (first_stride)."""
    c, h, wd = x.shape
    pad = (kernel - 1) // 2
    xp = np.pad(x, ((0, 0), (pad, pad), (pad, pad)), constant_values=pad_value) if pad else x
    win = sliding_window_view(xp, (kernel, kernel), axis=(1, 2))[:, ::stride, ::stride]
    ho, wo = win.shape[1], win.shape[2]
    o = w.shape[0]
    wf = w.reshape(o, -1).astype(np.float64)
    sum_w = w.reshape(o, -1).astype(np.int64).sum(axis=1)
    acc = np.empty((o, ho, wo), dtype=np.int64)
    sum_x = np.empty((o if depthwise else 1, ho, wo), dtype=np.int64)
    taps = kernel * kernel
    rows = max(1, CHUNK_ELEMENTS // max(1, c * taps * wo))
    for r0 in range(0, ho, rows):
        r1 = min(ho, r0 + rows)
        blk = win[:, r0:r1]                                   # [C, r, W', k, k]
        if depthwise:
            cols = blk.transpose(0, 3, 4, 1, 2).reshape(c, taps, -1)      # [C, k*k, r*W']
            prod = np.einsum("ct,ctp->cp", wf, cols.astype(np.float64))
            acc[:, r0:r1] = prod.astype(np.int64).reshape(c, r1 - r0, wo)
            sum_x[:, r0:r1] = cols.sum(axis=1, dtype=np.int64).reshape(c, r1 - r0, wo)
        else:
            cols = blk.transpose(0, 3, 4, 1, 2).reshape(c * taps, -1)     # [C*k*k, r*W']
            acc[:, r0:r1] = (wf @ cols.astype(np.float64)).astype(np.int64).reshape(o, r1 - r0, wo)
            sum_x[0, r0:r1] = cols.sum(axis=0, dtype=np.int64).reshape(r1 - r0, wo)
    n_ic = 1 if depthwise else c
    acc += (np.int64(arg_x) * sum_x) >> np.int64(shr_x)
    acc += ((np.int64(arg_w) * sum_w) >> np.int64(shr_w))[:, None, None]
    acc += np.int64(arg_add) * np.int64(n_ic)
    return acc


def batchnorm(acc: np.ndarray, norm_mul, norm_shift, norm_add) -> np.ndarray:
    """int64 [O, H, W]: ((acc * norm_mul) >> norm_shift) + norm_add, per output channel.
    `acc` must already be 36-bit (the product then fits in int64)."""
    m = np.asarray(norm_mul, np.int64)[:, None, None]
    s = np.asarray(norm_shift, np.int64)[:, None, None]
    a = np.asarray(norm_add, np.int64)[:, None, None]
    return ((acc * m) >> s) + a


def round_shift(p: np.ndarray, shift: np.ndarray) -> np.ndarray:
    """p / 2**shift rounded half to even, exactly, for int64 |p| < 2**59 and any shift >= 0."""
    s = np.minimum(np.asarray(shift, np.int64), 60)
    fl = p >> s
    rem = p - (fl << s)
    half = np.where(s > 0, np.int64(1) << np.maximum(s - 1, 0), np.int64(0))
    up = (s > 0) & ((rem > half) | ((rem == half) & ((fl & 1) == 1)))
    return fl + up


def activate(v: np.ndarray, x_start, y_mul, shift_number, result_bias) -> np.ndarray:
    """uint8 of the 16-segment piecewise-linear activation. `v` must be 36-bit. A value at
    or below every x_start (only v = -2**35 with x_start[0] = -2**35) takes segment 0."""
    xs = np.asarray(x_start, np.int64)
    seg = np.zeros(v.shape, dtype=np.int64)
    for i in range(1, ACT_SEGMENTS):
        seg[v > xs[i]] = i
    p = (v - xs[seg]) * np.asarray(y_mul, np.int64)[seg]
    y = round_shift(p, np.asarray(shift_number, np.int64)[seg]) + np.asarray(result_bias, np.int64)[seg]
    return np.clip(y, 0, 255).astype(np.uint8)


def pool_output_size(h: int, w: int, pool_type: int) -> tuple:
    """(H, W) after pooling: in // stride (EXT get_kpu_pool_output_size)."""
    s = POOL_TYPES[pool_type].stride
    return h // s, w // s


def pool(y: np.ndarray, pool_type: int) -> np.ndarray:
    """uint8 [C, H/s, W/s]. Max: out-of-image taps are 0; mean: taps clamp to the edge and the
    sum is floor-divided by size*size; select: the pixel at the type's offset (EXT kpu_pool2d)."""
    p = POOL_TYPES[pool_type]
    c, h, w = y.shape
    ho, wo = pool_output_size(h, w, pool_type)
    if p.kind == "bypass":
        return y.copy()
    k, s = p.size, p.stride
    if p.kind == "select":
        dy, dx = p.offset
        return y[:, dy:dy + s * ho:s, dx:dx + s * wo:s][:, :ho, :wo].copy()
    # windows start at (s*oy, s*ox) and reach k-1 further; build the taps as shifted views
    need_h, need_w = s * (ho - 1) + k, s * (wo - 1) + k
    if p.kind == "max":
        yp = np.zeros((c, max(need_h, h), max(need_w, w)), dtype=np.uint8)
        yp[:, :h, :w] = y
        out = None
        for dy in range(k):
            for dx in range(k):
                t = yp[:, dy:dy + s * ho:s, dx:dx + s * wo:s]
                out = t.copy() if out is None else np.maximum(out, t)
        return out
    ry = np.minimum(np.arange(max(need_h, h)), h - 1)
    rx = np.minimum(np.arange(max(need_w, w)), w - 1)
    yp = y[:, ry][:, :, rx].astype(np.int64)                 # edge-clamped
    total = np.zeros((c, ho, wo), dtype=np.int64)
    for dy in range(k):
        for dx in range(k):
            total += yp[:, dy:dy + s * ho:s, dx:dx + s * wo:s]
    return (total // (k * k)).astype(np.uint8)

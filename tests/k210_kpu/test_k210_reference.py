"""A reference of the KPU layer arithmetic on logical tensors, written apart from the TLM
(tlm/k210_kpu/datapath.py) from the digest's formulas (§3.2, §9), plus its own checks
against hand-computed values.

Deliberately different from the TLM: the convolution sums tap by tap with integer
tensordot (no im2col, no float matrix product), shifts are floor divisions by powers of two,
the activation picks segments by scanning down from 15 and rounds with Python Fractions on
a sample (``activation_exact``) or with numpy divmod (``activation``), pooling walks the
output pixels. Other test files import it (`from test_k210_reference import ...`).
"""
from __future__ import annotations

from fractions import Fraction

import numpy as np

# pool codes (digest §4, §9: 3/4 are 4x4 stride 4): code -> (kind, size, stride, select offset)
POOLS = {0: ("bypass", 1, 1, None), 1: ("max", 2, 2, None), 2: ("mean", 2, 2, None),
         3: ("max", 4, 4, None), 4: ("mean", 4, 4, None), 5: ("select", 2, 2, (0, 0)),
         6: ("select", 2, 2, (0, 1)), 7: ("select", 4, 4, (0, 0)), 8: ("mean", 2, 1, None),
         9: ("max", 2, 1, None)}


def conv_acc(x, w, depthwise, pad_value, arg_x, shr_x, arg_w, shr_w, arg_add):
    """int64 [O, H, W]: sum x*w + (arg_x*sum x >> shr_x) + (arg_w*sum w >> shr_w) + arg_add*n_ic."""
    x = np.asarray(x, np.int64)
    w = np.asarray(w, np.int64)
    c, h, wd = x.shape
    k = w.shape[-1]
    p = k // 2
    xp = np.full((c, h + 2 * p, wd + 2 * p), pad_value, np.int64)
    xp[:, p:p + h, p:p + wd] = x
    o = w.shape[0]
    dot = np.zeros((o, h, wd), np.int64)
    sx = np.zeros((o if depthwise else 1, h, wd), np.int64)
    for ky in range(k):
        for kx in range(k):
            tap = xp[:, ky:ky + h, kx:kx + wd]
            if depthwise:
                dot += w[:, 0, ky, kx][:, None, None] * tap
                sx += tap
            else:
                dot += np.tensordot(w[:, :, ky, kx], tap, axes=(1, 0))
                sx[0] += tap.sum(axis=0)
    sw = w.reshape(o, -1).sum(axis=1)
    n_ic = 1 if depthwise else c
    return (dot + (arg_x * sx) // (2 ** shr_x) + ((arg_w * sw) // (2 ** shr_w))[:, None, None]
            + arg_add * n_ic)


def batchnorm(acc, mul, shift, add):
    mul, shift, add = (np.asarray(a, np.int64)[:, None, None] for a in (mul, shift, add))
    return (acc * mul) // (2 ** shift) + add


def segment(v, x_start):
    """Highest i with v > x_start[i] (digest §9); 0 when none."""
    seg = np.zeros(np.shape(v), np.int64)
    done = np.zeros(np.shape(v), bool)
    for i in range(15, -1, -1):
        hit = ~done & (v > x_start[i])
        seg[hit] = i
        done |= hit
    return seg


def activation(v, x_start, y_mul, shift, bias):
    """uint8; rounding half to even with divmod (shift <= 62 exact for |p| < 2**52)."""
    v = np.asarray(v, np.int64)
    s = segment(v, np.asarray(x_start, np.int64))
    p = (v - np.asarray(x_start, np.int64)[s]) * np.asarray(y_mul, np.int64)[s]
    sh = np.minimum(np.asarray(shift, np.int64)[s], 62)
    d = np.left_shift(np.int64(1), sh)
    q, r = np.divmod(p, d)
    twice = 2 * r
    up = (twice > d) | ((twice == d) & (q % 2 == 1))
    y = q + up + np.asarray(bias, np.int64)[s]
    return np.clip(y, 0, 255).astype(np.uint8)


def activation_exact(v: int, x_start, y_mul, shift, bias) -> int:
    """One value with Python integers and Fraction (round() on a Fraction is half to even)."""
    s = 0
    for i in range(15, -1, -1):
        if v > int(x_start[i]):
            s = i
            break
    y = round(Fraction((v - int(x_start[s])) * int(y_mul[s]), 2 ** int(shift[s]))) + int(bias[s])
    return min(255, max(0, y))


def pool(y, code):
    kind, k, st, off = POOLS[code]
    y = np.asarray(y, np.int64)
    c, h, w = y.shape
    ho, wo = h // st, w // st
    out = np.zeros((c, ho, wo), np.int64)
    for oy in range(ho):
        for ox in range(wo):
            if kind == "bypass":
                out[:, oy, ox] = y[:, oy, ox]
            elif kind == "select":
                yy, xx = oy * st + off[0], ox * st + off[1]
                out[:, oy, ox] = y[:, yy, xx] if yy < h and xx < w else 0
            elif kind == "max":
                m = np.zeros(c, np.int64)
                for dy in range(k):
                    for dx in range(k):
                        yy, xx = oy * st + dy, ox * st + dx
                        if yy < h and xx < w:
                            m = np.maximum(m, y[:, yy, xx])
                out[:, oy, ox] = m
            else:
                t = np.zeros(c, np.int64)
                for dy in range(k):
                    for dx in range(k):
                        t += y[:, min(oy * st + dy, h - 1), min(ox * st + dx, w - 1)]
                out[:, oy, ox] = t // (k * k)
    return out.astype(np.uint8)


def layer(x, w, depthwise, pad_value, arg_x, shr_x, arg_w, shr_w, arg_add, bn, act, pool_code,
          load_act=1):
    """Full layer on logical tensors; returns (output uint8, BN output v, acc)."""
    acc = conv_acc(x, w, depthwise, pad_value, arg_x, shr_x, arg_w, shr_w, arg_add)
    v = batchnorm(acc, bn["norm_mul"], bn["norm_shift"], bn["norm_add"])
    if load_act:
        y = activation(v, act["x_start"], act["y_mul"], act["shift_number"], act["result_bias"])
    else:
        y = np.zeros(v.shape, np.uint8)
    return pool(y, pool_code), v, acc


def kpu_address(base, c, y, x, group, row_switch, channel_switch):
    """Byte offset of pixel (c, y, x) in KPU RAM (seed formulas, EXT kpu_upload_core)."""
    return (64 * base + (c // group) * 64 * channel_switch + (c % group) * (64 // group)
            + y * 64 * row_switch + x)


# ---- the reference's own checks (hand-computed values) ----------------------------------------
def test_conv_hand_values():
    # 1 channel 4x4 of 1s, 3x3 kernel of 2s, pad 0: interior 18, edge 12, corner 8
    x = np.ones((1, 4, 4), np.uint8)
    w = np.full((1, 1, 3, 3), 2, np.uint8)
    acc = conv_acc(x, w, False, 0, 0, 0, 0, 0, 0)
    assert acc[0, 1, 1] == 18 and acc[0, 0, 1] == 12 and acc[0, 0, 0] == 8
    # pad 1 and arg terms: window sum x = 9 everywhere, sum w = 18
    acc = conv_acc(x, w, False, 1, -3, 1, 5, 2, 7)
    assert acc[0, 0, 0] == 18 + (-27 // 2) + (90 // 4) + 7 == 18 - 14 + 22 + 7


def test_depthwise_counts_one_input_channel():
    x = np.stack([np.full((4, 4), 1), np.full((4, 4), 2)]).astype(np.uint8)
    w = np.ones((2, 1, 1, 1), np.uint8)
    acc = conv_acc(x, w, True, 0, 0, 0, 0, 0, 100)
    assert acc[0, 0, 0] == 1 + 100 and acc[1, 0, 0] == 2 + 100


def test_batchnorm_floor_shift():
    acc = np.array([[[-5, 5]]], np.int64)
    v = batchnorm(acc, [3], [2], [1])
    assert v.tolist() == [[[(-15 // 4) + 1, (15 // 4) + 1]]] == [[[-3, 4]]]


def test_activation_rounding_half_even_and_segments():
    xs = [-(1 << 35)] + [10 * i for i in range(15)]
    ym = [0] + [1] * 15
    sh = [0] + [1] * 15
    bi = [7] + [100] * 15
    # segments 1..15 start at 0, 10, 20, ...: v = 11 is in segment 2 (v > 10), p = 1 -> 0.5 -> 0
    assert activation_exact(11, xs, ym, sh, bi) == 100 + round(Fraction(1, 2))      # 0.5 -> 0
    assert activation_exact(13, xs, ym, sh, bi) == 100 + 2                           # 1.5 -> 2
    assert activation_exact(15, xs, ym, sh, bi) == 100 + 2                           # 2.5 -> 2
    assert activation_exact(10, xs, ym, sh, bi) == 100 + 5                           # seg 1 (>0)
    assert activation_exact(0, xs, ym, sh, bi) == 7                                  # seg 0
    assert activation_exact(-(1 << 35), xs, ym, sh, bi) == 7                         # none -> 0
    v = np.array([11, 13, 15, 10, 0, -(1 << 35), 10 ** 6])
    assert activation(v, xs, ym, sh, bi).tolist() == [100, 102, 102, 105, 7, 7, 255]


def test_activation_negative_products_round_half_even():
    # y_mul -1, shift 1: p = -(v - x_start); -0.5 -> 0 (even), -1.5 -> -2, -2.5 -> -2
    xs = [-(1 << 35)] + [0] * 15
    ym = [0] + [-1] * 15
    sh = [0] + [1] * 15
    bi = [0] + [10] * 15
    got = activation(np.array([1, 3, 5]), xs, ym, sh, bi).tolist()
    assert got == [10 + 0, 10 - 2, 10 - 2]
    assert [activation_exact(v, xs, ym, sh, bi) for v in (1, 3, 5)] == got


def test_activation_divmod_matches_fractions():
    rng = np.random.default_rng(5)
    print("seed 5")
    xs = np.sort(rng.integers(-(1 << 35), 1 << 35, 16))
    xs[0] = -(1 << 35)
    ym = rng.integers(-(1 << 15), 1 << 15, 16)
    sh = rng.integers(0, 64, 16)
    bi = rng.integers(0, 256, 16)
    v = rng.integers(-(1 << 35), 1 << 35, 2000)
    assert activation(v, xs, ym, sh, bi).tolist() == [activation_exact(int(a), xs, ym, sh, bi) for a in v]


def test_pool_hand_values():
    y = np.arange(16, dtype=np.uint8).reshape(1, 4, 4)
    assert pool(y, 1).tolist() == [[[5, 7], [13, 15]]]
    assert pool(y, 2).tolist() == [[[(0 + 1 + 4 + 5) // 4, (2 + 3 + 6 + 7) // 4],
                                    [(8 + 9 + 12 + 13) // 4, (10 + 11 + 14 + 15) // 4]]]
    assert pool(y, 3).tolist() == [[[15]]]
    assert pool(y, 4).tolist() == [[[sum(range(16)) // 16]]]
    assert pool(y, 5).tolist() == [[[0, 2], [8, 10]]]
    assert pool(y, 6).tolist() == [[[1, 3], [9, 11]]]
    assert pool(y, 7).tolist() == [[[0]]]
    # stride 1: last column/row: max pads with 0, mean clamps to the edge
    assert pool(y, 9)[0, 3].tolist() == [13, 14, 15, 15]
    assert pool(y, 8)[0, 3, 3] == 15 and pool(y, 8)[0, 0, 3] == (3 + 3 + 7 + 7) // 4


def test_kpu_address_seed_example():
    # seed layer 0: 320 wide -> row_switch 5, channel_switch 0x4b0, one channel per line
    assert kpu_address(0, 1, 0, 0, 1, 5, 0x4b0) == 0x4b0 * 64
    assert kpu_address(0, 0, 1, 319, 1, 5, 0x4b0) == 5 * 64 + 319
    # 16 wide: four channels per line, 16 bytes apart
    assert [kpu_address(2, c, 0, 0, 4, 1, 8) for c in range(5)] == [128, 144, 160, 176, 128 + 8 * 64]

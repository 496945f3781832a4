"""An acceptance author's own reference of one K210 KPU layer, written from the digest
(`../shared/docs/k210-kpu.md` §3.2-§3.4, the EXT formulas, and the §9 decisions) and from
nncase's K210 reference kernels as read, without importing tlm.k210_kpu's datapath or layout.
It works on logical tensors (uint8 feature maps C x H x W, weights O x I x k x k) and
carries its own KPU RAM layout; the trace generator k210_accept_gen.py uses it to compute
every expected byte of the acceptance traces in traces/accept_*.

Literal, not fast: the conv is a numpy sum over the k*k taps, the pools loop over output
pixels, the activation rounds exactly (int64 where that is exact, Python ints beyond)."""
from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

# pool_type -> (window, stride, kind); §4 with §9 (codes 3 and 4 are 4x4 with stride 4)
POOLS = {
    0: (1, 1, "bypass"),
    1: (2, 2, "max"),
    2: (2, 2, "mean"),
    3: (4, 4, "max"),
    4: (4, 4, "mean"),
    5: (2, 2, "left_top"),
    6: (2, 2, "right_top"),
    7: (4, 4, "left_top"),
    8: (2, 1, "mean"),
    9: (2, 1, "max"),
}


def wrap_signed(v: int, bits: int) -> int:
    """Two's complement value of the low `bits` bits of v."""
    v &= (1 << bits) - 1
    return v - (1 << bits) if v >> (bits - 1) else v


def round_shift_half_even(p: int, s: int) -> int:
    """p / 2**s rounded to nearest, ties to even, exactly (§9), for any s >= 0."""
    if s == 0:
        return p
    q = p >> s                      # floor
    r = p - (q << s)                # 0 <= r < 2**s
    half = 1 << (s - 1)
    if r > half or (r == half and q & 1):
        q += 1
    return q


# ------------------------------------------------------------------------------------------
# KPU RAM feature-map layout (§3.4, nncase get_kpu_row_layout)
# ------------------------------------------------------------------------------------------
def row_layout(width: int) -> tuple[int, int, int]:
    """(groups, row_len in 64-byte lines, row_pitch in bytes) of a map `width` wide."""
    if width <= 16:
        return 4, 1, 16
    if width <= 32:
        return 2, 1, 32
    return 1, -(-width // 64), 64


def kpu_bytes(c: int, h: int, w: int) -> int:
    groups, row_len, _ = row_layout(w)
    return row_len * h * -(-c // groups) * 64


def kpu_offsets(c: int, h: int, w: int) -> np.ndarray:
    """Byte offset in KPU RAM (from the map's base) of every element [c, y, x]."""
    groups, row_len, pitch = row_layout(w)
    ci = np.arange(c)[:, None, None]
    yi = np.arange(h)[None, :, None]
    xi = np.arange(w)[None, None, :]
    return (ci // groups) * row_len * h * 64 + (ci % groups) * pitch + yi * row_len * 64 + xi


def to_kpu(fmap: np.ndarray, background: "np.ndarray | None" = None) -> np.ndarray:
    """The KPU RAM bytes of `fmap` (C, H, W), over `background` (default zeros)."""
    c, h, w = fmap.shape
    out = np.zeros(kpu_bytes(c, h, w), np.uint8) if background is None else background.copy()
    out[kpu_offsets(c, h, w)] = fmap
    return out


def from_kpu(buf: np.ndarray, c: int, h: int, w: int) -> np.ndarray:
    return np.asarray(buf, np.uint8)[kpu_offsets(c, h, w)]


# ------------------------------------------------------------------------------------------
# One layer
# ------------------------------------------------------------------------------------------
@dataclass
class Act:
    """The 16-segment activation: x_start (36-bit signed), y_mul (16-bit signed), shift, bias."""
    x_start: list
    y_mul: list
    shift: list
    bias: list


@dataclass
class BN:
    mul: list          # 24-bit signed
    shift: list        # 0..15
    add: list          # 32-bit signed


@dataclass
class Layer:
    """A layer as the author thinks of it (logical), before any register packing."""
    x_shape: tuple                 # (C_in, H, W)
    o_ch: int
    kernel: int                    # 1 or 3
    depthwise: bool
    pool: int                      # pool_type code
    weights: np.ndarray            # (O, I, k, k) or (C, k, k) for depthwise; uint8 or uint16 values
    wbits: int                     # 8 or 16
    pad_value: int
    arg_x: int
    shr_x: int
    arg_w: int
    shr_w: int
    arg_add: int                   # 40-bit signed
    bn: BN
    act: Act
    extra: dict = field(default_factory=dict)

    @property
    def out_hw(self) -> tuple[int, int]:
        _, h, w = self.x_shape
        stride = POOLS[self.pool][1]
        return h // stride, w // stride

    def weight_bytes(self) -> bytes:
        dt = "<u1" if self.wbits == 8 else "<u2"
        return np.ascontiguousarray(self.weights).astype(dt).tobytes()


def conv_acc(L: Layer, x: np.ndarray) -> np.ndarray:
    """acc[o, y, x] of §3.2 (int64), SAME padding with pad_value, no conv stride."""
    c, h, w = x.shape
    k = L.kernel
    p = k // 2
    xp = np.full((c, h + 2 * p, w + 2 * p), L.pad_value, np.int64)
    xp[:, p:p + h, p:p + w] = x
    wt = L.weights.astype(np.int64)
    if L.depthwise:
        wt = wt.reshape(c, 1, k, k)
    out = np.zeros((L.o_ch, h, w), np.int64)
    sx = np.zeros((L.o_ch, h, w), np.int64)
    for ky in range(k):
        for kx in range(k):
            tap = xp[:, ky:ky + h, kx:kx + w]                   # (C, H, W)
            if L.depthwise:
                out += wt[:, 0, ky, kx][:, None, None] * tap
                sx += tap
            else:
                out += np.einsum("oi,ihw->ohw", wt[:, :, ky, kx], tap)
                sx += tap.sum(axis=0)[None]
    sw = wt.reshape(wt.shape[0], -1).sum(axis=1)                 # per output channel
    n_ic = 1 if L.depthwise else c
    acc = out + ((L.arg_x * sx) >> L.shr_x) + ((L.arg_w * sw) >> L.shr_w)[:, None, None] + L.arg_add * n_ic
    return acc


def batch_norm(L: Layer, acc: np.ndarray) -> np.ndarray:
    mul = np.array(L.bn.mul, np.int64)[:, None, None]
    sh = np.array(L.bn.shift, np.int64)[:, None, None]
    add = np.array(L.bn.add, np.int64)[:, None, None]
    return ((acc * mul) >> sh) + add


def activate(act: Act, v: np.ndarray) -> np.ndarray:
    """§3.2 with §9: highest segment i with v > x_start[i], exact round-half-even, clamp.
    Shifts up to 50 in int64 (|product| < 2**52, so the floor and the remainder are exact);
    larger ones through ``round_shift_half_even`` on Python ints."""
    v = np.asarray(v, np.int64)
    seg = np.full(v.shape, -1, np.int64)
    for i in range(16):
        seg[v > act.x_start[i]] = i
    if (seg < 0).any():
        raise ValueError("a value at or below every x_start: no segment (undefined)")
    xs = np.array(act.x_start, np.int64)[seg]
    p = (v - xs) * np.array(act.y_mul, np.int64)[seg]
    sh = np.array(act.shift, np.int64)[seg]
    y = np.empty(v.shape, np.int64)
    small = sh <= 50
    ps, ss = p[small], sh[small]
    q = ps >> ss
    r = ps - (q << ss)
    half = np.where(ss > 0, np.left_shift(np.int64(1), np.maximum(ss - 1, 0)), 1)
    up = (ss > 0) & ((r > half) | ((r == half) & (q & 1 == 1)))
    y[small] = q + up
    y[~small] = [round_shift_half_even(int(pp), int(s_)) for pp, s_ in zip(p[~small], sh[~small])]
    y += np.array(act.bias, np.int64)[seg]
    return np.clip(y, 0, 255).astype(np.uint8)


def pool(code: int, a: np.ndarray) -> np.ndarray:
    """nncase kpu_pool2d: output size in/stride; max counts outside pixels as 0; mean
    clamps to the edge and divides by k*k (floor); left/right-top pick one pixel."""
    k, s, kind = POOLS[code]
    c, h, w = a.shape
    oh, ow = h // s, w // s
    a = a.astype(np.int64)
    out = np.zeros((c, oh, ow), np.int64)
    for oy in range(oh):
        for ox in range(ow):
            y0, x0 = oy * s, ox * s
            if kind == "bypass":
                out[:, oy, ox] = a[:, y0, x0]
            elif kind == "max":
                m = np.zeros(c, np.int64)
                for ky in range(k):
                    for kx in range(k):
                        y, x = y0 + ky, x0 + kx
                        if y < h and x < w:
                            m = np.maximum(m, a[:, y, x])
                out[:, oy, ox] = m
            elif kind == "mean":
                acc = np.zeros(c, np.int64)
                for ky in range(k):
                    for kx in range(k):
                        acc += a[:, min(y0 + ky, h - 1), min(x0 + kx, w - 1)]
                out[:, oy, ox] = acc // (k * k)
            else:
                dx = 1 if kind == "right_top" else 0
                y, x = y0, x0 + dx
                out[:, oy, ox] = a[:, y, x] if (y < h and x < w) else 0
    return out.astype(np.uint8)


def run_layer(L: Layer, x: np.ndarray) -> dict:
    """Every stage of one layer: acc, bn, act (before pooling) and out (after)."""
    assert x.shape == L.x_shape, (x.shape, L.x_shape)
    acc = conv_acc(L, x)
    v = batch_norm(L, acc)
    y = activate(L.act, v)
    return {"acc": acc, "bn": v, "act": y, "out": pool(L.pool, y)}

"""An independent NE16 reference, written the way an acceptance-trace author would.

Nothing here imports ``tlm.ne16``'s engine, builder or reference: the arithmetic follows the
digest's EXT formulas (docs ``ne16.md`` §6.7 as corrected by §9, i.e. pulp-nnx's
``NeuralEngineFunctionalModel``), the weight layout follows pulp-nnx's bit-plane encoder
algorithm (``Ne16Weight.encode``, re-implemented here from its description) and the linear
layout follows the seed (d2=Ko, d1=Qw, d0=KiMaj x KiMin).

Logical tensors only: activations are HWC arrays, weights are the *effective* integer weights
(Cout, Cin, kh, kw) (depthwise: (C, 1, 3, 3)); ``stored = effective - offset`` is what goes to
memory, the hardware adds the layer-wise offset back.
"""
from __future__ import annotations

import numpy as np

I32 = 1 << 32


def wrap32(a) -> np.ndarray:
    """Two's-complement wrap of int64 values to int32 (the accumulators never saturate)."""
    a = np.asarray(a, dtype=np.int64)
    return ((a + (1 << 31)) % I32) - (1 << 31)


def saturate(a, bits: int, signed: bool) -> np.ndarray:
    lo, hi = (-(1 << (bits - 1)), (1 << (bits - 1)) - 1) if signed else (0, (1 << bits) - 1)
    return np.clip(np.asarray(a, dtype=np.int64), lo, hi)


def conv(x, w, *, depthwise=False, stride=1, pad=(0, 0, 0, 0), pad_value=0) -> np.ndarray:
    """Integer convolution of HWC `x` with effective weights `w` (Cout, Cin|1, kh, kw).

    pad = (top, bottom, left, right), padded with `pad_value`. Returns (Ho, Wo, Cout) int64,
    exact (no wrap)."""
    x = np.asarray(x, dtype=np.int64)
    w = np.asarray(w, dtype=np.int64)
    t, b, l, r = pad
    xp = np.pad(x, ((t, b), (l, r), (0, 0)), constant_values=pad_value)
    cout, _, kh, kw = w.shape
    ho = (xp.shape[0] - kh) // stride + 1
    wo = (xp.shape[1] - kw) // stride + 1
    out = np.zeros((ho, wo, cout), dtype=np.int64)
    for dy in range(kh):
        for dx in range(kw):
            win = xp[dy:dy + stride * (ho - 1) + 1:stride, dx:dx + stride * (wo - 1) + 1:stride, :]
            if depthwise:
                out += win * w[:, 0, dy, dx][None, None, :]
            else:
                out += np.einsum("hwc,oc->hwo", win, w[:, :, dy, dx])
    return out


def linear(x, w) -> np.ndarray:
    """Fully connected: x (Cin,), w (Cout, Cin) -> (Cout,) int64, exact."""
    return np.asarray(w, dtype=np.int64) @ np.asarray(x, dtype=np.int64)


def normalize(acc, scale, bias=None) -> np.ndarray:
    """The value before ReLU and shift: acc*scale exact (int64, as the digest's §6.7, pulp-nnx's
    functional model and the GAP9 simulator compute it); with a bias the product wraps to
    32 bits and the sum wraps again (§9)."""
    t = wrap32(acc) * np.asarray(scale, dtype=np.int64)
    if bias is not None:
        t = wrap32(wrap32(t) + np.asarray(bias, dtype=np.int64))
    return t


def norm_quant(acc, *, scale=None, bias=None, shift=0, relu=False, out_bits=8,
               quantize=True) -> np.ndarray:
    """§6.7/§9 on 32-bit accumulators `acc` (last axis = Ko).

    Without quantisation the raw int32 accumulators are the output. Otherwise:
    t = acc*scale (exact); with bias t = wrap32(wrap32(t) + bias); relu; t >> shift
    (arithmetic, never rounded); saturate to out_bits (unsigned with relu, signed without).
    `shift` is a scalar (global RIGHT_SHIFT) or a per-Ko vector (NORM_SHIFT)."""
    if not quantize:
        return wrap32(acc)
    t = normalize(acc, scale, bias)
    if relu:
        t = np.maximum(t, 0)
    t = t >> np.asarray(shift, dtype=np.int64)
    return saturate(t, out_bits, signed=not relu)


def to_bytes(a, bits: int) -> bytes:
    """Little-endian two's-complement bytes of the integer array `a` (C order)."""
    a = np.asarray(a, dtype=np.int64)
    u = (a % (1 << bits)).astype(np.uint64)
    return u.astype({8: "<u1", 16: "<u2", 32: "<u4"}[bits]).tobytes()


# ---- weight encodings ----------------------------------------------------------------------
def encode_bitplanes(stored, qw: int, depthwise: bool = False, cin_subtile: int = 16) -> bytes:
    """pulp-nnx Ne16Weight.encode, re-implemented from its description: (Cout, Cin, H, W) of
    unsigned stored values -> (Cout, CinMaj, Qw, H*W, CinMin bits packed 8 per byte, little
    bit order). Depthwise swaps Cout and Cin first. MODE16 uses 8-channel minor groups."""
    s = np.asarray(stored, dtype=np.int64)
    assert s.min() >= 0 and s.max() < (1 << qw), "stored weights out of range"
    if depthwise:
        s = s.transpose(1, 0, 2, 3)
    cout, cin, h, w = s.shape
    pad = (-cin) % cin_subtile
    s = np.pad(s, ((0, 0), (0, pad), (0, 0), (0, 0)))
    cmaj = (cin + pad) // cin_subtile
    s = s.reshape(cout, cmaj, cin_subtile, h * w)
    bits = np.stack([(s >> q) & 1 for q in range(qw)], axis=-1)       # (co, cmaj, cmin, hw, q)
    bits = bits.transpose(0, 1, 4, 3, 2).reshape(-1, 8)                  # (co, cmaj, q, hw, cmin)
    return np.packbits(bits.astype(np.uint8), axis=-1, bitorder="little").tobytes()


def encode_linear(stored, qw: int) -> bytes:
    """Seed linear layout d2=Ko, d1=Qw, d0=KiMaj x KiMin: per output channel, per bit plane,
    the Cin bits packed 8 per byte in little bit order (channel c at bit c)."""
    s = np.asarray(stored, dtype=np.int64)
    assert s.min() >= 0 and s.max() < (1 << qw) and s.shape[1] % 8 == 0
    bits = np.stack([(s >> q) & 1 for q in range(qw)], axis=1)           # (co, q, cin)
    return np.packbits(bits.astype(np.uint8), axis=-1, bitorder="little").tobytes()


def decode_bitplanes(blob: bytes, qw: int, cout: int, cin: int, kh: int, kw: int,
                     cin_subtile: int = 16) -> np.ndarray:
    """Inverse of encode_bitplanes (non-depthwise view), for the encoder's own self-test."""
    cmaj = -(-cin // cin_subtile)
    b = np.unpackbits(np.frombuffer(blob, dtype=np.uint8), bitorder="little")
    b = b.reshape(cout, cmaj, qw, kh * kw, cin_subtile).astype(np.int64)
    v = sum(b[:, :, q] << q for q in range(qw))                          # (co, cmaj, hw, cmin)
    v = v.transpose(0, 1, 3, 2).reshape(cout, cmaj * cin_subtile, kh, kw)
    return v[:, :cin]

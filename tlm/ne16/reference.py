"""Numpy reference of one NE16 layer on logical tensors (not the TLM: no subtiles, no
registers, no memory). It states the arithmetic contract the TLM must meet:

  x      input (H, W, Cin): unsigned 8-bit, or unsigned 16-bit in MODE16
  w      unsigned weights of `bits` bits; the effective weight is w + offset, the layer-wise
         offset of WEIGHT_OFFSET (0 for "symmetric" layers; the offset is applied whatever
         CONFIG0.WEIGHT_OFFS says, as the open RTL and the GAP9 simulator model do)
  acc    = wrap32( streamin + sum over taps not masked by FILTER_MASK and input channels of
           w_eff * x_padded ), x padded with the padding value on the four sides
  quant  p = acc * scale, exact                     (scale unsigned, NORM_BITS wide; §6.7)
         v = p >> shift                             (no bias)
         v = wrap32(wrap32(p) + bias) >> shift      (bias, int32)
         out = saturate(v, QUANT_BITS) to [0, 2^n-1] with rectification, else signed
  raw    out = acc (32-bit), or saturate(acc, 8/16) as above
No rounding (digest §9, the project's decision for CONFIG0 bit 11).
"""
from __future__ import annotations

import numpy as np

KINDS = ("conv3x3", "dw3x3", "conv1x1", "linear")


def _wrap(v, bits: int) -> np.ndarray:
    v = np.asarray(v, dtype=object)
    m = 1 << bits
    f = np.vectorize(lambda t: ((int(t) + (m >> 1)) % m) - (m >> 1), otypes=[object])
    return f(v) if v.size else v


def _sat(v, bits: int, signed: bool) -> np.ndarray:
    lo, hi = (-(1 << (bits - 1)), (1 << (bits - 1)) - 1) if signed else (0, (1 << bits) - 1)
    return np.minimum(np.maximum(np.asarray(v, dtype=object), lo), hi)


def tap_mask(mask) -> np.ndarray:
    """(3, 3) bool: True for the taps FILTER_MASK (top, bottom, left, right) keeps."""
    top, bottom, left, right = mask
    r, c = np.mgrid[0:3, 0:3]
    return ~((r < top) | (r >= 3 - bottom) | (c < left) | (c >= 3 - right))


def accumulate(x, w, kind: str, *, stride: int = 1, padding=(0, 0, 0, 0), pad_value: int = 0,
               weight_offset: int = 0, filter_mask=(0, 0, 0, 0), streamin=None) -> np.ndarray:
    """The 32-bit accumulators (Ho, Wo, Cout) as int64 values."""
    if kind not in KINDS:
        raise ValueError(f"unknown layer kind {kind!r} (one of {', '.join(KINDS)})")
    x = np.asarray(x).astype(np.int64)
    weff = np.asarray(w).astype(np.int64) + int(weight_offset)
    if kind == "linear":
        acc = (weff @ x.reshape(-1)).reshape(1, 1, -1)
    else:
        top, bottom, left, right = padding
        h, wd, cin = x.shape
        xp = np.full((h + top + bottom, wd + left + right, cin), pad_value, np.int64)
        xp[top:top + h, left:left + wd] = x
        k = weff.shape[-1]
        if k == 3:
            weff = weff * tap_mask(filter_mask)
        ho = (xp.shape[0] - k) // stride + 1
        wo = (xp.shape[1] - k) // stride + 1
        cout = weff.shape[0]
        acc = np.zeros((ho, wo, cout), np.int64)
        for dr in range(k):
            for dc in range(k):
                win = xp[dr:dr + stride * (ho - 1) + 1:stride, dc:dc + stride * (wo - 1) + 1:stride]
                if kind == "dw3x3":
                    acc += win * weff[:, 0, dr, dc]
                else:
                    acc += win @ weff[:, :, dr, dc].T
    if streamin is not None:
        acc = acc + np.asarray(streamin, np.int64)
    return np.asarray(_wrap(acc, 32), np.int64)


def normquant(acc, scale, shift, bias, out_bits: int, relu: bool) -> np.ndarray:
    """Normalization and quantization of accumulators (..., Cout); shift: int or (Cout,)."""
    acc = np.asarray(acc, dtype=object)
    cout = acc.shape[-1]
    sc = np.asarray(scale, dtype=object).reshape(cout)
    sh = np.broadcast_to(np.asarray(shift, dtype=object), (cout,))
    p = acc * sc                                    # exact (object integers)
    if bias is not None:
        p = _wrap(_wrap(p, 32) + np.asarray(bias, dtype=object).reshape(cout), 32)
    v = np.vectorize(lambda a, s: int(a) >> int(s), otypes=[object])(p, sh)
    return np.asarray(_sat(v, out_bits, signed=not relu), np.int64)


def layer(x, w, kind: str, *, stride=1, padding=(0, 0, 0, 0), pad_value=0, weight_offset=0,
          filter_mask=(0, 0, 0, 0), streamin=None, quant=True, scale=None, shift=0, bias=None,
          out_bits=8, relu=True) -> np.ndarray:
    """The layer's output (Ho, Wo, Cout) as int64 values."""
    acc = accumulate(x, w, kind, stride=stride, padding=padding, pad_value=pad_value,
                     weight_offset=weight_offset, filter_mask=filter_mask, streamin=streamin)
    if quant:
        return normquant(acc, scale, shift, bias, out_bits, relu)
    if out_bits == 32:
        return acc
    return np.asarray(_sat(acc, out_bits, signed=not relu), np.int64)

"""Encoder for the NE16 bit-plane weight layout (a reference, not used by the TLM).

Layouts (seed, WEIGHTS_PTR; bit order EXT pulp-nnx Ne16Weight): weights are unsigned values
of Qw bits stored one bit-plane at a time; channel c of a KiMin block is bit c % 8 of byte
c // 8 of the block (little bit order). KiMin is 16 channels (2 bytes) with 8-bit inputs and
8 channels (1 byte) in MODE16 (digest §9: the weight D0 unit is 1 instead of 2).
* 3x3 (and depthwise, where Ko = 1 and the channels play KiMaj x KiMin):
  (Ko, KiMaj, Qw, Fy*Fx, KiMin bytes)
* 1x1: (Ko, KiMaj, Qw, KiMin bytes)
* linear: (Ko, Qw, Ki bytes), Ki bit-packed contiguously (KiMaj x KiMin).
"""
from __future__ import annotations

import numpy as np


def _check(w: np.ndarray, bits: int) -> np.ndarray:
    w = np.asarray(w)
    if not 1 <= bits <= 8:
        raise ValueError(f"weight bits must be 1..8, got {bits}")
    if w.size and (w.min() < 0 or w.max() >= (1 << bits)):
        raise ValueError(f"weights must be unsigned {bits}-bit values (0..{(1 << bits) - 1})")
    return w.astype(np.uint8)


def _planes(w: np.ndarray, bits: int) -> np.ndarray:
    """(..., ) uint8 -> (bits, ...) of 0/1, plane q = bit q."""
    return np.stack([(w >> q) & 1 for q in range(bits)]).astype(np.uint8)


def encode_conv(w: np.ndarray, bits: int, mode16: bool = False) -> bytes:
    """w (Cout, Cin, kh, kw) with kh = kw = 3 or 1 -> bytes in the 3x3 / 1x1 layout."""
    w = _check(w, bits)
    cout, cin, kh, kw = w.shape
    kimin = 8 if mode16 else 16
    cin_pad = -(-cin // kimin) * kimin
    wp = np.zeros((cout, cin_pad, kh * kw), np.uint8)
    wp[:, :cin] = w.reshape(cout, cin, kh * kw)
    wp = wp.reshape(cout, cin_pad // kimin, kimin, kh * kw)          # Ko, KiMaj, KiMin, taps
    planes = _planes(wp, bits)                                        # Qw, Ko, KiMaj, KiMin, taps
    planes = planes.transpose(1, 2, 0, 4, 3)                          # Ko, KiMaj, Qw, taps, KiMin
    packed = np.packbits(planes, axis=-1, bitorder="little")          # ..., KiMin bytes
    if kh * kw == 1:
        packed = packed[:, :, :, 0, :]                                # 1x1: no tap axis
    return packed.tobytes()


def encode_depthwise(w: np.ndarray, bits: int) -> bytes:
    """w (C, 1, 3, 3) -> bytes: the 3x3 layout with Ko and Ki swapped (pulp-nnx)."""
    w = np.asarray(w)
    return encode_conv(w.transpose(1, 0, 2, 3), bits)


def encode_linear(w: np.ndarray, bits: int) -> bytes:
    """w (Cout, Cin) -> (Cout, Qw, Cin/8 bytes); Cin must be a multiple of 8."""
    w = _check(w, bits)
    cout, cin = w.shape
    if cin % 8:
        raise ValueError("linear weights need Cin to be a multiple of 8")
    planes = _planes(w, bits).transpose(1, 0, 2)                      # Cout, Qw, Cin
    return np.packbits(planes, axis=-1, bitorder="little").tobytes()

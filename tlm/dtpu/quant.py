"""TFLite's reference integer arithmetic for an int8 DEPTHWISE_CONV_2D, vectorised.

What LiteRT's BUILTIN_REF kernel (reference_integer_ops::DepthwiseConvPerChannel) does after
the multiply-accumulate, written from its documented algorithm (no code copied):

* per output channel, effective scale = input_scale * filter_scale[c] / output_scale in
  double precision; QuantizeMultiplier splits it into a Q31 significand and a power of two
  (frexp, round half away from zero, significand 2^31 renormalised, shifts below -31 give 0);
* MultiplyByQuantizedMultiplier(acc, m, s): acc << max(s, 0), SaturatingRoundingDoublingHighMul
  with m, RoundingDivideByPOT by max(-s, 0);
* + output zero point, clamped to the fused activation's range (CalculateActivationRange:
  quantize(f) = zp + round(f / scale) in float).
"""
from __future__ import annotations

import math

import numpy as np

INT32_MIN, INT32_MAX = -(1 << 31), (1 << 31) - 1
ACTIVATIONS = ("NONE", "RELU", "RELU_N1_TO_1", "RELU6")     # TFLite ActivationFunctionType 0..3


def _round_half_away(x: float) -> float:
    return math.floor(x + 0.5) if x >= 0 else -math.floor(-x + 0.5)


def quantize_multiplier(real: float) -> tuple[int, int]:
    """(Q31 significand, shift) with real ~= significand * 2^(shift - 31)."""
    if real == 0.0:
        return 0, 0
    q, shift = math.frexp(real)
    q_fixed = int(_round_half_away(q * (1 << 31)))
    if q_fixed == 1 << 31:
        q_fixed //= 2
        shift += 1
    if shift < -31:
        return 0, 0
    return q_fixed, shift


def channel_multipliers(input_scale: float, filter_scales, output_scale: float,
                        channels: int) -> tuple[np.ndarray, np.ndarray]:
    """Per-channel (multiplier, shift); a single filter scale applies to every channel."""
    fs = np.broadcast_to(np.asarray(filter_scales, np.float32).reshape(-1), (channels,)) \
        if np.size(filter_scales) == 1 else np.asarray(filter_scales, np.float32).reshape(-1)
    if fs.size != channels:
        raise ValueError(f"{fs.size} filter scales for {channels} output channels")
    mult, shift = np.zeros(channels, np.int64), np.zeros(channels, np.int64)
    for c in range(channels):
        eff = float(np.float32(input_scale)) * float(fs[c]) / float(np.float32(output_scale))
        mult[c], shift[c] = quantize_multiplier(eff)
    return mult, shift


def _srdhm(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """SaturatingRoundingDoublingHighMul on int32 values held in int64 arrays."""
    ab = a * b                                   # |ab| <= 2^62: exact in int64
    nudge = np.where(ab >= 0, 1 << 30, 1 - (1 << 30))
    num = ab + nudge
    q = np.where(num >= 0, num >> 31, -((-num) >> 31))      # C++ division: toward zero
    return np.where((a == INT32_MIN) & (b == INT32_MIN), INT32_MAX, q)


def _rdbpot(x: np.ndarray, exponent: np.ndarray) -> np.ndarray:
    """RoundingDivideByPOT (round half away from zero)."""
    mask = (np.int64(1) << exponent) - 1
    remainder = x & mask
    threshold = (mask >> 1) + (x < 0)
    return (x >> exponent) + (remainder > threshold)


def wrap_int32(x: np.ndarray) -> np.ndarray:
    x = np.asarray(x, np.int64)
    return ((x + (1 << 31)) & 0xFFFFFFFF) - (1 << 31)


def multiply_by_quantized_multiplier(acc: np.ndarray, mult: np.ndarray, shift: np.ndarray) -> np.ndarray:
    """acc (int32 values, int64 array, channel last) times per-channel (mult, shift)."""
    acc = np.asarray(acc, np.int64)
    left = np.maximum(shift, 0)
    right = np.maximum(-shift, 0)
    return _rdbpot(_srdhm(wrap_int32(acc << left), np.asarray(mult, np.int64)), right)


def activation_range(activation: str, scale: float, zero_point: int,
                     qmin: int = -128, qmax: int = 127) -> tuple[int, int]:
    def q(f: float) -> int:
        v = np.float32(f) / np.float32(scale)
        return zero_point + int(_round_half_away(float(v)))
    if activation == "RELU":
        return max(qmin, q(0.0)), qmax
    if activation == "RELU6":
        return max(qmin, q(0.0)), min(qmax, q(6.0))
    if activation == "RELU_N1_TO_1":
        return max(qmin, q(-1.0)), min(qmax, q(1.0))
    if activation == "NONE":
        return qmin, qmax
    raise ValueError(f"fused activation {activation!r} is not supported by DEPTHWISE_CONV_2D int8")

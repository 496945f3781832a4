"""gemmlowp's 16-bit fixed-point logistic and tanh, in numpy.

LiteRT's integer LSTM kernel (8x8_16) evaluates its gate nonlinearities with these
(``gemmlowp::logistic`` on Q3.12 inputs, ``gemmlowp::tanh`` on Q(n).(15-n) inputs, both into
Q0.15), where Vela programs its LUT activations (TFLite's int16 LOGISTIC/TANH approximation).
Written from gemmlowp's fixedpoint.h algorithm (Taylor expansion of exp on [-1/4, 0), the
exp barrel shifter, three Newton-Raphson steps of 1/(1+x)); every operation is the int16
one of that file: saturating rounding doubling high multiply, rounding divide by a power of
two (round half away from zero), rounding half sum, wrapping add/sub. For tests: an
independent model of LiteRT's arithmetic (tests/test_published_models.py).
"""
from __future__ import annotations

import numpy as np

__all__ = ["logistic", "tanh"]

_MIN, _MAX = -(1 << 15), (1 << 15) - 1


def _wrap(x):
    return ((np.asarray(x, np.int64) + (1 << 15)) & 0xFFFF) - (1 << 15)


def _mul(a, b):
    """SaturatingRoundingDoublingHighMul (int16): (a*b + nudge) / 2**15, C division."""
    a, b = np.asarray(a, np.int64), np.asarray(b, np.int64)
    ab = a * b
    s = ab + np.where(ab >= 0, 1 << 14, 1 - (1 << 14))
    q = np.where(s >= 0, s >> 15, -((-s) >> 15))
    return np.where((a == _MIN) & (b == _MIN), _MAX, _wrap(q))


def _div_pot(x, e: int):
    """RoundingDivideByPOT: round half away from zero."""
    x = np.asarray(x, np.int64)
    mask = (1 << e) - 1
    return (x >> e) + ((x & mask) > (mask >> 1) + (x < 0))


def _mul_pot(x, e: int):
    """SaturatingRoundingMultiplyByPOT<e> (int16)."""
    x = np.asarray(x, np.int64)
    if e <= 0:
        return _div_pot(x, -e) if e else x
    t = (1 << (15 - e)) - 1
    return np.where(x > t, _MAX, np.where(x < -t, _MIN, _wrap(x << e)))


def _const(v: float, integer_bits: int) -> int:
    """A FixedPoint<int16_t, integer_bits> constant (FromDouble)."""
    return int(max(_MIN, min(_MAX, round(v * (1 << (15 - integer_bits))))))


def _half_sum(a, b):
    s = np.asarray(a, np.int64) + np.asarray(b, np.int64)
    t = s + np.where(s >= 0, 1, -1)
    return np.where(t >= 0, t >> 1, -((-t) >> 1))


def _exp_quarter(a):
    """exp(a) for a in [-1/4, 0), Q0.15 in and out."""
    c = _const(np.exp(-1.0 / 8.0), 0)
    x = _wrap(a + (1 << 12))                                    # a + 1/8
    x2 = _mul(x, x)
    x3 = _mul(x2, x)
    x4 = _mul(x2, x2)
    t = _mul_pot(_wrap(_mul(_wrap(_mul_pot(x4, -2) + x3), _const(1.0 / 3.0, 0)) + x2), -1)
    return np.clip(c + _mul(c, _wrap(x + t)), _MIN, _MAX)


def _exp_negative(a, integer_bits: int):
    """exp(a) for a <= 0 given as FixedPoint<int16_t, integer_bits>; Q0.15 result."""
    a = np.asarray(a, np.int64)
    frac = 15 - integer_bits
    quarter = 1 << (frac - 2)
    amq = _wrap((a & (quarter - 1)) - quarter)
    r = _exp_quarter(_mul_pot(amq, integer_bits))
    rem = _wrap(amq - a)
    for e in range(-2, 5):
        if integer_bits > e:
            r = np.where((rem & (1 << (frac + e))) != 0, _mul(r, _const(np.exp(-2.0 ** e), 0)), r)
    if integer_bits > 5:
        r = np.where(a < -(1 << (frac + 5)), 0, r)
    return np.where(a == 0, _MAX, r)


def _newton(a):
    """x ~ 1/(1+a) in Q2.13 after three Newton-Raphson steps on the half denominator."""
    half = _half_sum(a, _MAX)
    x = _wrap(_const(48.0 / 17.0, 2) + _mul(half, _const(-32.0 / 17.0, 2)))
    for _ in range(3):
        x = _wrap(x + _mul_pot(_mul(x, _wrap((1 << 13) - _mul(half, x))), 2))
    return x


def logistic(a, integer_bits: int = 3) -> np.ndarray:
    """gemmlowp::logistic of int16 raw values in Q(integer_bits); Q0.15 int16 raw result."""
    a = np.asarray(a, np.int64)
    pos = a > 0
    n = np.where(pos, _wrap(-a), a)                              # -|a| (wrapping)
    rp = _mul_pot(_newton(_exp_negative(n, integer_bits)), 1)   # 1 / (1 + exp(-|a|))
    return np.where(a == 0, 1 << 14, np.where(pos, rp, _wrap(_MAX - rp))).astype(np.int16)


def tanh(a, integer_bits: int = 3) -> np.ndarray:
    """gemmlowp::tanh of int16 raw values in Q(integer_bits); Q0.15 int16 raw result."""
    a = np.asarray(a, np.int64)
    neg = a < 0
    n = np.where(neg, a, _wrap(-a))                              # -|a|
    t = _mul_pot(_wrap(_newton(_exp_negative(n, integer_bits + 1)) - (1 << 13)), 2)
    return np.where(a == 0, 0, np.where(neg, _wrap(-t), t)).astype(np.int16)
